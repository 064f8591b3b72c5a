"""The process-global hooks of a multi-process run, installed with the first watchdog.

When an exception escapes the script, the exit hook publishes it (peers stop
within ``grace_s``), prints what the watchdog knows (a failed transfer, a lost
peer) under the traceback, and exits at once rather than wait in
``jax.distributed``'s shutdown barrier for peers that may be gone. Process 0
hosts the coordination service, so it first waits (at most ``grace_s`` + a few
seconds) for the others to stop, letting them report their own errors. A clean
exit publishes ``bye``.

``jax.distributed`` aborts every process (C++ ``LOG(FATAL)``, SIGABRT) when its
coordination service reports an error: at once when process 0, which hosts
the service, dies, and ``heartbeat_timeout_seconds`` after a process stops
(dies during setup, freezes). Its Python callback cannot be used in jax 0.10
(the status argument does not convert), so the watchdog installs a SIGABRT
handler: it names the lost peer (process 0 when the service's port refuses
connections or the service stopped answering, else the peer whose heartbeat
stopped), lets the main thread raise its own error for ``grace_s`` (a
runtime call raises ``RuntimeFailure``, a transfer with the lost peer fails),
then exits with ``EXIT_CODE``. The key-value store is not used after that (its
calls would hang). An abort with no lost peer in sight (a crash elsewhere in
XLA) is left to proceed, after a line saying so.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import time
from typing import Any

from .. import options
from ..multiprocess import coordination
from .stderr import write as _write
from .stderr import write_fd as _write_fd
from .watchdog import _HEARTBEAT_DIR, EXIT_CODE, Watchdog


def install_exit_hooks(dog: Watchdog) -> None:
    """Tells peers how this process ended: ``bye`` at a clean exit, ``failed`` otherwise."""
    previous = sys.excepthook

    def excepthook(kind, value, traceback):  # an exception escapes the script
        diagnosis = dog.diagnose()
        if diagnosis is not None:
            note_peer_caused_failure(dog.process)
        dog.close(f"failed: {kind.__name__}: {value}"[:2000])
        previous(kind, value, traceback)
        if diagnosis is not None:
            prefix = "" if diagnosis.startswith("jaxpp:") else f"jaxpp: process {dog.process}: "
            _write(f"{prefix}{diagnosis}\n")
        _write("")
        if dog.process == 0:  # the coordination service lives here: let peers report first
            dog.wait_for_peers(dog.options.grace_s + 5.0)
        # jax.distributed's shutdown barrier would wait for peers that may be lost.
        os._exit(1)

    sys.excepthook = excepthook
    _record_exit_codes()
    # Registered after jax's own atexit (jax.distributed.shutdown), so it runs first.
    atexit.register(_at_exit, dog)


def note_peer_caused_failure(process: int) -> None:
    """Tells the launcher (``FAILURE_NOTES``) that this process fails because a peer did:
    two processes can end within milliseconds of each other, in either order, when one's
    failure breaks the other's transfer, and the launcher must name the cause."""
    _note(f"peer_caused.{process}", "")


def note_stalled_peers(process: int, peers: list[int]) -> None:
    """Tells the launcher that this process finished but ``peers`` still ran after
    ``JAXPP_MLIR_SHUTDOWN_TIMEOUT``: its exit code ``EXIT_CODE`` is theirs to answer for."""
    _note(f"stalled_peers.{process}", ",".join(map(str, peers)))


def _note(name: str, text: str) -> None:
    directory = options.FAILURE_NOTES.value()
    if not directory:
        return
    try:
        with open(os.path.join(directory, name), "w") as handle:
            handle.write(text)
    except OSError:  # the launcher is gone or its directory too: nothing to tell
        return


_exit_code: list[Any] = []  # the code given to sys.exit, if the script called it


def _record_exit_codes() -> None:
    """Wraps ``sys.exit`` so the exit hook can tell ``sys.exit(3)`` from a clean finish
    (a ``SystemExit`` reaches neither ``sys.excepthook`` nor ``atexit``'s arguments)."""
    original = sys.exit
    if getattr(original, "_jaxpp_recorded", False):
        return

    def exit(code: Any = None) -> None:
        _exit_code[:] = [code]
        original(code)

    exit._jaxpp_recorded = True  # type: ignore[attr-defined]
    sys.exit = exit


def _failed_exit_code() -> int | None:
    """The process's exit status when it leaves through ``sys.exit`` with a failure."""
    if not _exit_code:
        return None
    code = _exit_code[0]
    if code is None or code == 0:
        return None
    return code if isinstance(code, int) else 1


def _at_exit(dog: Watchdog) -> None:
    """Tells peers how this process ends and never waits for them without a bound.

    ``sys.exit`` with a failure is published as ``failed`` and exits at once with its
    code (peers waiting in a transfer with this process stop within ``grace_s``). A
    clean finish is published as ``bye``; then this process waits at most
    ``shutdown_timeout_s`` for its peers to finish too (jax.distributed's shutdown
    barrier needs them all) and, when one still runs, names it and exits with
    ``EXIT_CODE``.
    """
    if dog._exiting:
        return
    code = _failed_exit_code()
    if code is not None:
        message = _exit_code[0] if not isinstance(_exit_code[0], int) else code
        dog.close(f"failed: exited with sys.exit({message!r})"[:2000])
        _write("")
        if dog.process == 0:
            dog.wait_for_peers(dog.options.grace_s + 5.0)
        os._exit(code)
    dog.close()
    running = running_peers(dog, dog.options.shutdown_timeout_s)
    if running:
        names = "; ".join(
            f"{dog._describe(peer)} (alive, it last reported: "
            f"{dog._peers[peer].state if peer in dog._peers else 'nothing'})"
            for peer in running
        )
        _write(
            f"\njaxpp: process {dog.process} finished, but its peers still run after "
            f"{dog.options.shutdown_timeout_s:.0f} s (limit JAXPP_MLIR_SHUTDOWN_TIMEOUT): "
            f"{names}\njaxpp: process {dog.process} exits with code {EXIT_CODE}\n"
        )
        note_stalled_peers(dog.process, running)
        os._exit(EXIT_CODE)


def running_peers(dog: Watchdog, timeout_s: float) -> list[int]:
    """Waits until every peer has finished, failed or gone silent; returns the peers
    still running (heartbeating without a final state) after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    silent_after = 2 * dog.options.interval_s + 1.0
    running: list[int] = []
    while not dog.kv_lost:
        try:
            entries = coordination.client().key_value_dir_get(_HEARTBEAT_DIR)
        except Exception:
            return []
        now = time.monotonic()
        seen = dict(dog._update_peers(entries, now))
        # A peer without a heartbeat yet is still starting its watchdog.
        running = [
            peer
            for peer in range(dog.num_processes)
            if peer != dog.process
            and (
                peer not in seen
                or (
                    seen[peer].state != "bye"
                    and not seen[peer].state.startswith("failed")
                    and now - seen[peer].changed < silent_after
                )
            )
        ]
        if not running or now >= deadline:
            return running
        time.sleep(0.2)
    return []


_abort_handler: Any = None  # the ctypes callback, kept alive
_abort_lock = threading.Lock()


def install_abort_handler(dog: Watchdog) -> None:
    """Makes a SIGABRT (jax.distributed's fatal error) call ``on_abort(dog)`` first.

    Python's ``signal`` module cannot: its handlers run in the main thread, after
    ``abort`` has ended the process. A C-level handler (ctypes) runs in the aborting
    thread; it takes the GIL like any thread. When it returns, ``abort`` proceeds.
    """
    global _abort_handler
    import ctypes

    def handler(signum: int) -> None:
        if not _abort_lock.acquire(blocking=False):  # another thread aborts too
            time.sleep(dog.options.grace_s + 5.0)  # the first handler ends the process
            os._exit(EXIT_CODE)
        on_abort(dog)  # returns when no peer looks lost: abort() then ends the process

    try:
        kind = ctypes.CFUNCTYPE(None, ctypes.c_int)
        callback = kind(handler)
        libc = ctypes.CDLL(None)
        libc.signal.restype = ctypes.c_void_p
        libc.signal.argtypes = [ctypes.c_int, kind]
        libc.signal(signal.SIGABRT, callback)
    except (OSError, AttributeError):  # no C library to call: jax's abort stays silent
        return
    _abort_handler = callback


def on_abort(dog: Watchdog) -> None:
    """Called in the thread that jax.distributed aborts (SIGABRT); see the module
    docstring. Does not return when a lost peer is found."""
    dog.kv_lost = True
    try:
        lost = dog.lost_peer()
    except Exception as e:  # the handler must not fail
        lost = None
        _write_fd(f"jaxpp: process {dog.process}: no diagnosis: {type(e).__name__}: {e}\n")
    me = f"jaxpp: process {dog.process}"
    if lost is None:
        states = dog.peer_states()
        _write_fd(
            f"\n{me}: aborted (SIGABRT; jax.distributed aborts a process when its "
            f"coordination service reports an error, logged above); no peer looks lost "
            f"(last reports: {states or 'none'})\n"
        )
        return
    text = f"{me}: {lost}"
    note_peer_caused_failure(dog.process)
    if dog.failure is None:
        dog.failure = text
    dog.stop_reporting()
    _write_fd(
        f"\n{text}\n{me}: jax.distributed aborts this process (its coordination "
        f"service reported the error logged above); exiting with code {EXIT_CODE} "
        f"unless the main thread raises first\n"
    )
    time.sleep(dog.options.grace_s)  # the main thread may raise and exit meanwhile
    _write_fd(f"{me} exits with code {EXIT_CODE}\n")
    os._exit(EXIT_CODE)
