"""What the fork servers (``opt_server.py``, ``python_server.py``) share: a Unix socket
server that forks one child per request and tells the client how its child ended.

A request is a length-prefixed JSON header (at least ``argv``, ``cwd`` and ``env``)
sent with the client's stdin, stdout and stderr as ``SCM_RIGHTS`` descriptors
(``fork_client.py`` sends it). The server forks a child per request; the child takes
over the client's streams, directory and environment (``adopt_client``) and runs what
the subclass's ``start_child`` makes of the request. Each child holds the write end of
a pipe whose end of file wakes the server when the child exits, and the server sends
the client the subclass's ``ending`` of the child's wait status. A client that closes
its connection before its child ends (it was killed) takes the child with it.

The server stops when its parent process ends, when its socket is removed, or after
``idle_timeout`` seconds without a request and with no child running.
"""

from __future__ import annotations

import argparse
import array
import contextlib
import json
import logging
import os
import selectors
import signal
import socket
import sys
import time
import traceback

logger = logging.getLogger("jaxpp_mlir.tools.fork_server")

MAX_REQUEST_BYTES = 1 << 20
LENGTH_BYTES = 8
NUM_STREAMS = 3  # stdin, stdout, stderr
ACCEPT_BACKLOG = 64
POLL_SECONDS = 0.2
DEFAULT_IDLE_TIMEOUT = 1800.0
#: Seconds a client may take to send its whole request (argv, cwd, environment, streams).
REQUEST_TIMEOUT_S = 30.0
#: A child's exit status where it failed before its run began.
EXIT_CHILD_SETUP_FAILED = 2


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
        close_all(fds)
        raise


def read_header(conn: socket.socket, message: bytes) -> dict:
    """The JSON header whose length prefix and first bytes are ``message``; reads the rest."""
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


def close_all(fds) -> None:
    for fd in fds:
        os.close(fd)


def adopt_client(request: dict, fds: list[int]) -> None:
    """In a forked child: the client's standard streams (``fds``), directory and
    environment."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    reopen_standard_streams()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])


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


def exit_status(wait_status: int) -> int:
    """A shell's view of a child's wait status: its exit code, or 128 + the signal."""
    if os.WIFSIGNALED(wait_status):
        return 128 + os.WTERMSIG(wait_status)
    return os.WEXITSTATUS(wait_status)


def server_arguments(prog: str, description: str, argv: list[str] | None) -> argparse.Namespace:
    """A fork server's command line: ``SOCKET_PATH [--idle-timeout SECONDS]``."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("socket_path", help="the Unix socket to listen on (must not exist)")
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=DEFAULT_IDLE_TIMEOUT,
        help="exit after this many seconds without a request",
    )
    return parser.parse_args(argv)


def listen(socket_path: str) -> socket.socket:
    """A listening Unix socket at ``socket_path``, bound and listening under a temporary
    name first: a client that sees the path can connect."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    pending_path = f"{socket_path}.pending"
    listener.bind(pending_path)
    listener.listen(ACCEPT_BACKLOG)
    os.rename(pending_path, socket_path)
    return listener


class ForkServer:
    """Accepts requests on ``listener``; one forked child per request. ``serve`` returns
    None in the server when it stops, and ``start_child``'s result in each child.

    Subclasses say what a child does (``start_child``) and may refuse a request
    (``admit``), greet the client once its child runs (``child_started``) and word
    the child's ending (``ending``)."""

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

    # -- hooks ---------------------------------------------------------------------------

    def admit(self, conn: socket.socket, request: dict) -> bool:
        """Whether to fork a child for ``request`` (raise ValueError or KeyError for a
        malformed one). A subclass that refuses one answers its client here."""
        return True

    def start_child(self, request: dict, fds: list[int]):
        """In the forked child, its server sockets closed: the run, or what ``serve``
        returns in the child to run it. Must never return into the server's loop."""
        raise NotImplementedError

    def child_started(self, conn: socket.socket, pid: int) -> None:
        """In the server, once the child ``pid`` runs."""

    def ending(self, wait_status: int) -> bytes:
        """What the client is told when its child has ended with ``wait_status``."""
        return str(exit_status(wait_status)).encode("ascii")

    # -- the loop ------------------------------------------------------------------------

    def serve(self):
        try:
            return self._serve()
        except BaseException:
            if self.selector.get_map() is not None:  # in the server, not in a child
                self.shutdown()
            raise

    def _serve(self):
        while self.should_continue():
            for key, _ in self.selector.select(POLL_SECONDS):
                if key.fileobj is self.listener:
                    forked = self.accept()
                    if forked is not None:
                        return forked[0]  # in a child
                elif key.data is not None:
                    self.child_ended(key.data)
                else:
                    self.client_left(key.fileobj)
            self.reap()
        self.shutdown()
        return None

    def should_continue(self) -> bool:
        if os.getppid() != self.parent or not os.path.exists(self.socket_path):
            return False
        idle = time.monotonic() - self.last_activity
        return bool(self.children) or idle < self.idle_timeout

    def accept(self) -> tuple[object] | None:
        """Takes one request and forks its child: None in the server, a 1-tuple of
        ``start_child``'s result in the child."""
        conn, _ = self.listener.accept()
        self.last_activity = time.monotonic()
        conn.settimeout(REQUEST_TIMEOUT_S)  # a client stalled inside its request never blocks us
        fds: list[int] = []
        try:
            request, fds = receive_request(conn)
            admitted = self.admit(conn, request)
            conn.settimeout(None)
        except (OSError, ValueError, KeyError) as exc:
            logger.warning("dropped a malformed request: %s", exc)
            admitted = False
        if not admitted:
            close_all(fds)
            conn.close()
            return None
        sys.stdout.flush()
        sys.stderr.flush()
        exit_read, exit_write = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(exit_read)  # exit_write stays open until the child exits
                self.close_inherited(conn)
                return (self.start_child(request, fds),)
            except BaseException:  # noqa: BLE001 - the child must never return into the server
                traceback.print_exc()
                sys.stderr.flush()
                os._exit(EXIT_CHILD_SETUP_FAILED)
        os.close(exit_write)
        close_all(fds)
        self.child_started(conn, pid)
        self.children[pid] = conn
        self.exit_pipes[pid] = exit_read
        self.selector.register(conn, selectors.EVENT_READ)
        self.selector.register(exit_read, selectors.EVENT_READ, pid)
        return None

    def close_inherited(self, conn: socket.socket) -> None:
        """In a child: closes the server's sockets and pipes, so that no other client
        waits on this child."""
        self.selector.close()
        self.listener.close()
        conn.close()
        for other in self.children.values():
            other.close()
        close_all(self.exit_pipes.values())

    def client_left(self, conn) -> None:
        """The client closed its connection before its child ended (it was killed): stop
        the run."""
        for pid, child_conn in self.children.items():
            if child_conn is conn:
                with contextlib.suppress(ProcessLookupError):
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
        """Sends a reaped child's ending to its client."""
        conn = self.children.pop(pid)
        exit_read = self.exit_pipes.pop(pid)
        with contextlib.suppress(KeyError):
            self.selector.unregister(exit_read)
        os.close(exit_read)
        with contextlib.suppress(KeyError):  # not registered once the client has left
            self.selector.unregister(conn)
        with contextlib.suppress(OSError):  # the client is gone
            conn.sendall(self.ending(wait_status))
        conn.close()
        self.last_activity = time.monotonic()

    def shutdown(self) -> None:
        for pid in self.children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        self.listener.close()
        if os.path.exists(self.socket_path):
            os.unlink(self.socket_path)
