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

Run: ``python -m jaxpp_mlir.tools.opt_server SOCKET_PATH``.
"""

from __future__ import annotations

import argparse
import array
import contextlib
import importlib
import json
import logging
import os
import selectors
import signal
import socket
import sys
import time
import traceback

from jaxpp_mlir.ir_context import make_context
from jaxpp_mlir.tools import opt

logger = logging.getLogger("jaxpp_mlir.tools.opt_server")

REGISTRY_MODULE = "jaxpp_mlir.passes.registry"
FILECHECK_MODULE = "filecheck.main"
FILECHECK_COLORS_MODULE = "filecheck.colors"
OPT_TOOL = "jaxpp-opt"
FILECHECK_TOOL = "filecheck"
EXIT_USAGE = 2
MAX_REQUEST_BYTES = 1 << 20
LENGTH_BYTES = 8
NUM_STREAMS = 3  # stdin, stdout, stderr
ACCEPT_BACKLOG = 64
POLL_SECONDS = 0.2
DEFAULT_IDLE_TIMEOUT = 1800.0


def receive_request(conn: socket.socket) -> tuple[dict, list[int]]:
    """Reads one request: the client's three stream fds with a length-prefixed JSON header
    (argv, cwd, env)."""
    fds = array.array("i")
    message, ancillary, _, _ = conn.recvmsg(
        MAX_REQUEST_BYTES, socket.CMSG_SPACE(NUM_STREAMS * fds.itemsize)
    )
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            usable = len(data) - len(data) % fds.itemsize
            fds.frombytes(data[:usable])
    try:
        if len(fds) != NUM_STREAMS:
            raise ValueError(f"expected {NUM_STREAMS} file descriptors, got {len(fds)}")
        return read_header(conn, message), list(fds)
    except (OSError, ValueError):
        for fd in fds:
            os.close(fd)
        raise


#: Seconds a client may take to send its whole request (argv, cwd, environment, streams).
REQUEST_TIMEOUT_S = 30.0


def read_header(conn: socket.socket, message: bytes) -> dict:
    length = int.from_bytes(message[:LENGTH_BYTES], "big")
    if length > MAX_REQUEST_BYTES:
        raise ValueError(f"a request of {length} bytes (at most {MAX_REQUEST_BYTES})")
    body = bytearray(message[LENGTH_BYTES:])
    while len(body) < length:
        chunk = conn.recv(length - len(body))
        if not chunk:
            raise ValueError("the client closed the connection inside its request")
        body += chunk
    return json.loads(body.decode("utf-8"))


def run_child(request: dict, fds: list[int]) -> int:
    """In the forked child: take over the client's streams, directory and environment; run."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    reopen_standard_streams()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
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


def reopen_standard_streams() -> None:
    """New ``sys.stdin/stdout/stderr`` over the client's descriptors: the server's own
    objects describe the server's streams (a seekable file, a terminal), not the client's."""
    for name, fd, mode in (("stdin", 0, "r"), ("stdout", 1, "w"), ("stderr", 2, "w")):
        old = getattr(sys, name)
        line_buffered = name == "stderr" or os.isatty(fd)
        stream = open(  # noqa: SIM115 - replaces a standard stream for the child's lifetime
            fd,
            mode,
            buffering=1 if line_buffered else -1,
            encoding=old.encoding,
            errors=old.errors,
            closefd=False,
        )
        setattr(sys, name, stream)


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


def exit_status(wait_status: int) -> int:
    """A shell's view of a child's wait status: its exit code, or 128 + the signal."""
    if os.WIFSIGNALED(wait_status):
        return 128 + os.WTERMSIG(wait_status)
    return os.WEXITSTATUS(wait_status)


class ForkServer:
    """Accepts requests on ``listener``; one forked child per request."""

    def __init__(self, listener: socket.socket, socket_path: str, idle_timeout: float):
        self.listener = listener
        self.socket_path = socket_path
        self.idle_timeout = idle_timeout
        self.parent = os.getppid()
        self.children: dict[int, socket.socket] = {}  # pid -> the client's connection
        # pid -> the read end of a pipe the child holds open until it exits
        self.exit_pipes: dict[int, int] = {}
        self.selector = selectors.DefaultSelector()
        self.selector.register(listener, selectors.EVENT_READ)
        self.last_activity = time.monotonic()

    def serve(self) -> None:
        while self.should_continue():
            for key, _ in self.selector.select(POLL_SECONDS):
                if key.fileobj is self.listener:
                    self.accept()
                elif key.data is not None:
                    self.child_ended(key.data)
                else:
                    self.client_left(key.fileobj)
            self.reap()
        self.shutdown()

    def should_continue(self) -> bool:
        if os.getppid() != self.parent or not os.path.exists(self.socket_path):
            return False
        idle = time.monotonic() - self.last_activity
        return bool(self.children) or idle < self.idle_timeout

    def accept(self) -> None:
        conn, _ = self.listener.accept()
        self.last_activity = time.monotonic()
        conn.settimeout(REQUEST_TIMEOUT_S)  # a client stalled inside its request never blocks us
        try:
            request, fds = receive_request(conn)
            conn.settimeout(None)
        except (OSError, ValueError) as exc:
            logger.warning("dropped a malformed request: %s", exc)
            conn.close()
            return
        sys.stdout.flush()
        sys.stderr.flush()
        exit_read, exit_write = os.pipe()
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                os.close(exit_read)
                self.close_inherited(conn)
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
        os.close(exit_write)
        for fd in fds:
            os.close(fd)
        self.children[pid] = conn
        self.exit_pipes[pid] = exit_read
        self.selector.register(conn, selectors.EVENT_READ)
        self.selector.register(exit_read, selectors.EVENT_READ, pid)

    def close_inherited(self, conn: socket.socket) -> None:
        """In a child: closes the server's sockets, so that no other client waits on this child."""
        self.selector.close()
        self.listener.close()
        conn.close()
        for other in self.children.values():
            other.close()
        for exit_read in self.exit_pipes.values():
            os.close(exit_read)

    def client_left(self, conn) -> None:
        """The client closed its connection before its run ended (it was killed): stop the run."""
        for pid, child_conn in self.children.items():
            if child_conn is conn:
                os.kill(pid, signal.SIGKILL)
                self.selector.unregister(conn)
                return

    def reap(self) -> None:
        for pid in list(self.children):
            done, wait_status = os.waitpid(pid, os.WNOHANG)
            if done != 0:
                self.finish(pid, wait_status)

    def child_ended(self, pid: int) -> None:
        """The child closed its exit pipe, which it does only by exiting: wait for it
        (at most the moment the kernel takes to turn it into a zombie)."""
        _, wait_status = os.waitpid(pid, 0)
        self.finish(pid, wait_status)

    def finish(self, pid: int, wait_status: int) -> None:
        """Sends a reaped child's exit status to its client."""
        conn = self.children.pop(pid)
        exit_read = self.exit_pipes.pop(pid)
        with contextlib.suppress(KeyError):
            self.selector.unregister(exit_read)
        os.close(exit_read)
        if conn in (key.fileobj for key in self.selector.get_map().values()):
            self.selector.unregister(conn)
        try:
            conn.sendall(str(exit_status(wait_status)).encode("ascii"))
        except OSError:
            pass  # the client is gone
        conn.close()
        self.last_activity = time.monotonic()

    def shutdown(self) -> None:
        for pid in self.children:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        self.listener.close()
        if os.path.exists(self.socket_path):
            os.unlink(self.socket_path)


def warm_up() -> None:
    """Loads what every run needs, once: the pass registry and the MLIR dialects."""
    importlib.import_module(REGISTRY_MODULE)
    make_context()
    with contextlib.suppress(ImportError):  # only the lit suite needs it
        importlib.import_module(FILECHECK_MODULE)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="jaxpp-opt-server", description=__doc__.split("\n")[0])
    parser.add_argument("socket_path", help="the Unix socket to listen on (must not exist)")
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=DEFAULT_IDLE_TIMEOUT,
        help="exit after this many seconds without a request",
    )
    args = parser.parse_args(argv)
    warm_up()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # Bound and listening under a temporary name first: a client that sees the path can connect.
    pending_path = f"{args.socket_path}.pending"
    listener.bind(pending_path)
    listener.listen(ACCEPT_BACKLOG)
    os.rename(pending_path, args.socket_path)
    ForkServer(listener, args.socket_path, args.idle_timeout).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
