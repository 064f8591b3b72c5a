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

from .stderr import write as _write
from .stderr import write_fd as _write_fd
from .watchdog import EXIT_CODE, Watchdog


def install_exit_hooks(dog: Watchdog) -> None:
    """Tells peers how this process ended: ``bye`` at a clean exit, ``failed`` otherwise."""
    previous = sys.excepthook

    def excepthook(kind, value, traceback):  # an exception escapes the script
        diagnosis = dog.diagnose()
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
    # Registered after jax's own atexit (jax.distributed.shutdown), so it runs first.
    atexit.register(dog.close)


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
