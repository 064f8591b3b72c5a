"""A fork server for Python processes that use jax: import jax and jaxpp_mlir once, fork
a child per run.

A fresh Python process spends a second or more of CPU importing jax and jaxpp_mlir
before it does anything; a test suite that starts dozens of worker processes pays
that each time. This server imports them once (no backend is initialized, no
thread is started) and listens on a Unix socket. For each request of
``python_client.py`` (the client's command line, working directory, environment and
standard streams, passed as file descriptors) it forks a child that runs the
script, ``-m`` module or ``-c`` code as ``python`` would: the child's ``sys.argv``,
``sys.path[0]``, directory, environment and streams are the client's, and it ends
through the interpreter's own exit (``atexit`` handlers, ``sys.excepthook``,
``SystemExit``), so it exits as the plain interpreter would.

The client learns the child's pid first (it forwards the signals it receives to the
child), then how the child ended: ``exit N`` or ``signal N`` (the client then ends by
the same signal, so that its parent sees a killed process). A client that goes away
(killed) takes its child with it: the server kills the child.

jax reads its ``JAX_*`` configuration from the environment when it is imported: a
request whose ``JAX_*`` variables differ from the server's is refused (the client
then runs the plain interpreter), except the variables jax reads later
(``JAX_COORDINATOR_*``) and those in ``UPDATABLE``, which the child sets with
``jax.config.update`` before the run.

Run: ``python tests/fork_servers/python_server.py SOCKET_PATH``.
"""

from __future__ import annotations

import builtins
import contextlib
import gc
import importlib
import io
import os
import runpy
import signal
import socket
import sys
import types
import warnings
from collections.abc import Callable

import fork_server

#: Imported by the server, so that no child imports them again.
WARM_MODULES = (
    "numpy",
    "jax",
    "jax.numpy",
    "jaxpp_mlir",
    "jaxpp_mlir.partition",
    "jaxpp_mlir.launch",
    "jaxpp_mlir.runtime.execution.executor",
    "jaxpp_mlir.runtime.multiprocess.distributed",
)
OPTIONAL_WARM_MODULES = ("optax",)  # imported where installed

PRELOADED_MODULE_WARNING = ".* found in sys.modules after import of package"
#: jax variables read when used, not when jax is imported: they may differ.
READ_LATER_PREFIXES = ("JAX_COORDINATOR_",)
#: jax options a child sets from its environment (``jax.config.update``) before its run.
UPDATABLE: dict[str, Callable[[str], object]] = {
    "JAX_PLATFORMS": str,
    "JAX_COMPILATION_CACHE_DIR": str,
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": float,
    "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": int,
}
SERVER_FILES = (__file__, "<frozen runpy>", runpy.__file__)  # frames above the script's


def _jax_variables(env: dict[str, str]) -> dict[str, str]:
    return {
        k: v
        for k, v in env.items()
        if k.startswith("JAX_") and not k.startswith(READ_LATER_PREFIXES)
    }


def refusal(request_env: dict[str, str], server_env: dict[str, str]) -> str | None:
    """Why a child with ``request_env`` cannot be forked from this server (None: it can)."""
    wanted, have = _jax_variables(request_env), _jax_variables(server_env)
    for name in sorted(set(wanted) | set(have)):
        if wanted.get(name) == have.get(name):
            continue
        if name in UPDATABLE and name in wanted:
            continue
        return f"{name} differs from the server's (read when jax is imported)"
    return None


def python_argv(argv: list[str]) -> tuple[str, str]:
    """What ``python ARGV`` runs: ("path", script), ("module", name) or ("code", source)."""
    if not argv:
        raise ValueError("no script, -m module or -c code to run")
    if argv[0] == "-m" and len(argv) > 1:
        return "module", argv[1]
    if argv[0] == "-c" and len(argv) > 1:
        return "code", argv[1]
    if argv[0].startswith("-"):
        raise ValueError(f"interpreter option {argv[0]!r} is not supported")
    return "path", argv[0]


class PythonForkServer(fork_server.ForkServer):
    """A child per request runs ``python ARGV``: the client first learns the child's pid
    (``pid N``), then how it ended (``exit N`` or ``signal N``); a request whose jax
    environment differs is refused (``refused REASON``). ``serve`` returns the request in
    each child, which runs it once out of the server's loop."""

    def admit(self, conn: socket.socket, request: dict) -> bool:
        request["run"] = python_argv(request["argv"])
        reason = refusal(request["env"], dict(os.environ))
        if reason is None:
            return True
        with contextlib.suppress(OSError):
            conn.sendall(f"refused {reason}\n".encode())
        return False

    def start_child(self, request: dict, fds: list[int]) -> dict:
        become_child(request, fds)
        return request

    def child_started(self, conn: socket.socket, pid: int) -> None:
        try:
            conn.sendall(f"pid {pid}\n".encode())
        except OSError:
            os.kill(pid, signal.SIGKILL)  # the client is gone already

    def ending(self, wait_status: int) -> bytes:
        if os.WIFSIGNALED(wait_status):
            return f"signal {os.WTERMSIG(wait_status)}\n".encode()
        return f"exit {os.WEXITSTATUS(wait_status)}\n".encode()


def become_child(request: dict, fds: list[int]) -> None:
    """In the forked child: the client's session-less process, streams, directory,
    environment and signal dispositions, and jax's updatable options."""
    os.setsid()  # not in the server's process group: only its client's signals reach it
    fork_server.adopt_client(request, fds)
    if os.environ.get("PYTHONUNBUFFERED"):  # what `python -u` makes of stdout and stderr
        for name, fd in (("stdout", 1), ("stderr", 2)):
            old = getattr(sys, name)
            raw = io.FileIO(fd, "w", closefd=False)
            setattr(sys, name, io.TextIOWrapper(raw, old.encoding, old.errors, write_through=True))
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    jax = sys.modules["jax"]
    for name, parse in UPDATABLE.items():
        if name in os.environ:
            jax.config.update(name.lower(), parse(os.environ[name]))


def run(kind: str, target: str, argv: list[str]) -> None:
    """Runs ``python ARGV`` in this process (``kind`` and ``target`` from ``python_argv``):
    a script or ``-c`` code in a new ``__main__`` module, a module as ``-m`` runs it."""
    if kind == "module":
        sys.argv = [target, *argv[2:]]  # run_module puts the module's file name first
        sys.path[0] = os.getcwd()
        with warnings.catch_warnings():  # the server imported it: run anew as __main__
            warnings.filterwarnings("ignore", PRELOADED_MODULE_WARNING, RuntimeWarning)
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        return
    main = types.ModuleType("__main__")
    main.__builtins__ = builtins
    if kind == "path":
        sys.argv = list(argv)
        sys.path[0] = os.path.dirname(os.path.abspath(target))
        main.__file__ = target
        with open(target, "rb") as source:
            code = compile(source.read(), target, "exec")
    else:
        sys.argv = ["-c", *argv[2:]]
        sys.path[0] = ""
        code = compile(target, "<string>", "exec")
    sys.modules["__main__"] = main
    exec(code, vars(main))  # noqa: S102 - what the interpreter does with a script


def warm_up() -> None:
    for name in WARM_MODULES:
        importlib.import_module(name)
    for name in OPTIONAL_WARM_MODULES:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    gc.collect()
    gc.freeze()  # children's collections leave the server's objects (and pages) alone


def main(argv: list[str] | None = None) -> int:
    args = fork_server.server_arguments(
        "python tests/fork_servers/python_server.py", __doc__.split("\n")[0], argv
    )
    warm_up()
    listener = fork_server.listen(args.socket_path)
    request = PythonForkServer(listener, args.socket_path, args.idle_timeout).serve()
    if request is None:
        return 0
    kind, target = request["run"]
    try:
        run(kind, target, request["argv"])
    except SystemExit:
        raise
    except BaseException as error:  # reported as the interpreter reports it
        report_uncaught(error)
    return 0


def report_uncaught(error: BaseException) -> None:
    """What the interpreter does with an exception that escapes a script: ``sys.excepthook``
    (the traceback from the script's first frame on), exit code 1, or death by SIGINT for a
    KeyboardInterrupt."""
    traceback_ = error.__traceback__
    while traceback_ is not None and traceback_.tb_frame.f_code.co_filename in SERVER_FILES:
        traceback_ = traceback_.tb_next
    sys.excepthook(type(error), error.with_traceback(traceback_), traceback_)
    if isinstance(error, KeyboardInterrupt):
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    sys.exit(1)


if __name__ == "__main__":
    sys.exit(main())
