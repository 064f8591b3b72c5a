"""A fork server for ``jaxpp-opt``: import jax and the passes once, fork a child per run.

Starting ``jaxpp-opt`` costs about 2.5 s, almost all of it importing jax; the
lit suite starts it about 120 times. The server imports the tool once, listens
on a Unix socket, and for each request forks a child that runs
``jaxpp_mlir.tools.opt.main`` with the client's arguments, working directory,
environment and standard streams (the file descriptors themselves are passed
over the socket), so a run through the server behaves as a run of the tool in
the client's place. The child's exit status goes back to the client as soon
as the child ends (each child holds the write end of a pipe whose end of file
wakes the server).

The same server runs FileCheck (the ``filecheck`` package) when a request names
the tool ``filecheck``: the lit suite runs it about 100 times, and a fresh
Python process that imports it costs more than the check itself.

The client is ``opt_client.py`` next to this file, a stdlib-only script that
imports neither jax nor this package. The server exits when its parent process
ends, when the client socket is removed, or after ``--idle-timeout`` seconds
without a request.

Run: ``python tests/fork_servers/opt_server.py SOCKET_PATH``.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import sys
import traceback
from typing import NoReturn

import fork_server

from jaxpp_mlir.ir_context import make_context
from jaxpp_mlir.tools import opt

REGISTRY_MODULE = "jaxpp_mlir.passes.registry"
FILECHECK_MODULE = "filecheck.main"
FILECHECK_COLORS_MODULE = "filecheck.colors"
OPT_TOOL = "jaxpp-opt"
FILECHECK_TOOL = "filecheck"
EXIT_USAGE = 2


class ToolForkServer(fork_server.ForkServer):
    """A child per request runs ``jaxpp-opt`` or FileCheck; the client gets its exit
    status (a shell's: 128 + the signal for a killed child) and the connection closes."""

    def start_child(self, request: dict, fds: list[int]) -> NoReturn:
        status = 1
        try:
            status = run_child(request, fds)
        except SystemExit as done:  # a tool that exits by raising: its status, as Python's
            status = done.code if isinstance(done.code, int) else int(done.code is not None)
            if not isinstance(done.code, int | None):
                sys.stderr.write(f"{done.code}\n")
            sys.stderr.flush()
        except BaseException:  # noqa: BLE001 - the child must never return into the server
            traceback.print_exc()
            sys.stderr.flush()
        finally:
            os._exit(status)


def run_child(request: dict, fds: list[int]) -> int:
    """In the forked child: take over the client's streams, directory and environment; run."""
    fork_server.adopt_client(request, fds)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    tool = request.get("tool", OPT_TOOL)
    sys.argv = [tool, *request["argv"]]
    if tool == OPT_TOOL:
        status = opt.main(request["argv"])
    elif tool == FILECHECK_TOOL:
        status = run_filecheck(sys.argv)
    else:
        sys.stderr.write(f"jaxpp-opt-server: unknown tool {tool!r}\n")
        status = EXIT_USAGE
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    return status


def run_filecheck(argv: list[str]) -> int:
    """FileCheck's command line (``argv[0]`` the program name); its exit status."""
    try:
        filecheck_main = importlib.import_module(FILECHECK_MODULE).main
    except ImportError as exc:
        sys.stderr.write(f"jaxpp-opt-server: cannot run FileCheck: {exc}\n")
        return EXIT_USAGE
    # FileCheck decides on colours when first imported (by the server): decide for this run.
    colors = sys.modules.get(FILECHECK_COLORS_MODULE)
    if colors is not None:
        colors.COLOR_SUPPORT = sys.stdout.isatty()
    try:
        filecheck_main(argv)
    except SystemExit as done:
        if done.code is None or isinstance(done.code, int):
            return done.code or 0
        sys.stderr.write(f"{done.code}\n")
        return 1
    return 0


def warm_up() -> None:
    """Loads what every run needs, once: the pass registry and the MLIR dialects."""
    importlib.import_module(REGISTRY_MODULE)
    make_context()
    with contextlib.suppress(ImportError):  # only the lit suite needs it
        importlib.import_module(FILECHECK_MODULE)


def main(argv: list[str] | None = None) -> int:
    args = fork_server.server_arguments("jaxpp-opt-server", __doc__.split("\n")[0], argv)
    warm_up()
    listener = fork_server.listen(args.socket_path)
    ToolForkServer(listener, args.socket_path, args.idle_timeout).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
