"""Failure detection for a multi-process run: heartbeats, stalled transfers, lost peers.

One daemon thread per process. Every ``interval_s`` it publishes a heartbeat
(a counter and what the process is doing, e.g. ``program 0, call 3``) in the
``jax.distributed`` key-value store and reads everyone else's. It ends the
process, with a message on stderr naming the peer and exit code ``EXIT_CODE``,
when:

- a peer's heartbeat has not changed for ``peer_timeout_s`` (the peer died,
  froze, or its host became unreachable),
- a peer reported that it failed (an exception escaped its script), after
  ``grace_s`` for this process to fail by itself first,
- a peer finished (exited cleanly) while this process still waits in a
  transfer with it,
- a transfer this process issued completed with an error (the peer's
  connection closed), or has not completed after ``transfer_timeout_s``,
- the key-value store has been unreachable for ``peer_timeout_s`` (the
  coordinator, process 0, is gone).

A transfer is watched from before its blocking collective starts (``waiting``),
so the transfer timeout and the rule above fire while the process is blocked in
it. ``sys.exit`` with a failure is published as ``failed`` (the exit hook never
reports it as a clean finish) and exits at once with its code; a clean finish
waits at most ``shutdown_timeout_s`` for the peers to finish, then names the
ones still running and exits with ``EXIT_CODE``.

A process blocked inside XLA cannot be interrupted by an exception, so the
watchdog ends it with ``os._exit`` instead of letting it hang; a runtime call
made after a failure was detected raises ``RuntimeFailure``. When an exception
escapes the script, the exit hook publishes it (peers stop within ``grace_s``),
prints what the watchdog knows (a failed transfer, a lost peer) under the
traceback, and exits at once rather than wait in ``jax.distributed``'s
shutdown barrier for peers that may be gone. Process 0 hosts the coordination
service, so it first waits (at most ``grace_s`` + a few seconds) for the others
to stop, letting them report their own errors.

The heartbeat carries what the process does now: a change of state (every
call of a program) wakes the thread, which publishes it (at most every
``STATE_GAP_S``) and reads the peers' states, so a lost peer's last report is
current.

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
import contextlib
import dataclasses
import os
import signal
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

from jaxpp_mlir.errors import RuntimeFailure

from . import coordination

EXIT_CODE = 70
STATE_GAP_S = 0.1  # the least time between two heartbeats published for a change of state
_HEARTBEAT_DIR = f"{coordination.ROOT}/hb/"
_REPORT_TIMEOUT_MS = 500


def _env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    return float(value) if value else default


@dataclasses.dataclass(frozen=True)
class WatchdogOptions:
    """Timeouts of the failure detection (seconds); environment variables override."""

    interval_s: float = 1.0
    peer_timeout_s: float = 20.0
    transfer_timeout_s: float = 300.0
    grace_s: float = 3.0
    shutdown_timeout_s: float = 300.0

    @classmethod
    def from_env(cls) -> WatchdogOptions:
        """``JAXPP_HEARTBEAT_INTERVAL``, ``JAXPP_PEER_TIMEOUT``, ``JAXPP_TRANSFER_TIMEOUT``,
        ``JAXPP_SHUTDOWN_TIMEOUT``."""
        return cls(
            interval_s=_env_float("JAXPP_HEARTBEAT_INTERVAL", cls.interval_s),
            peer_timeout_s=_env_float("JAXPP_PEER_TIMEOUT", cls.peer_timeout_s),
            transfer_timeout_s=_env_float("JAXPP_TRANSFER_TIMEOUT", cls.transfer_timeout_s),
            grace_s=cls.grace_s,
            shutdown_timeout_s=_env_float("JAXPP_SHUTDOWN_TIMEOUT", cls.shutdown_timeout_s),
        )


@dataclasses.dataclass
class _Peer:
    counter: str = ""
    state: str = ""
    changed: float = 0.0  # monotonic time of the last change


class _Wait:
    """Stands for a blocking wait in the pending list: ready once the wait ends."""

    def __init__(self) -> None:
        self.done = False

    def is_ready(self) -> bool:
        return self.done

    def block_until_ready(self) -> None:
        pass


class Watchdog:
    """The heartbeat thread of this process; see the module docstring."""

    def __init__(self, process: int, num_processes: int, options: WatchdogOptions):
        self.process = process
        self.num_processes = num_processes
        self.options = options
        self.failure: str | None = None  # set once a failure is detected
        self.peer_roles: dict[int, str] = {}  # process -> "ranks 2, 3", for messages
        self._state = "started"
        self._changed = threading.Event()  # the state changed: publish it now
        self._counter = 0
        self._peers: dict[int, _Peer] = {}
        self._pending: deque[tuple[float, Any, str, int]] = deque()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._exiting = False
        self._kv_down_since: float | None = None
        self._kv_ok_at = time.monotonic()  # the last key-value round trip that succeeded
        self.kv_lost = False  # jax.distributed is aborting: its key-value calls would hang
        self._peer_failed_at: float | None = None
        self._thread = threading.Thread(target=self._run, name="jaxpp-watchdog", daemon=True)

    # ------------------------------------------------------------ main thread
    def start(self) -> None:
        self._beat()
        self._thread.start()

    def set_state(self, state: str) -> None:
        """What this process does now (shown to peers in failure messages); published
        by the thread at once (at most every ``STATE_GAP_S``)."""
        self._state = state
        self._changed.set()

    def check(self) -> None:
        """Raises ``RuntimeFailure`` if a failure was detected (called at runtime entry)."""
        if self.failure is not None:
            raise RuntimeFailure(self.failure)

    def track(self, array: Any, description: str, peer: int) -> None:
        """Watches a transfer's result until it is ready (results complete in issue order)."""
        with self._lock:
            while (
                self._pending
                and self._pending[0][1].is_ready()
                and not _failed(self._pending[0][1])
            ):
                self._pending.popleft()
            self._pending.append((time.monotonic(), array, description, peer))

    @contextlib.contextmanager
    def waiting(self, description: str, peer: int) -> Iterator[None]:
        """Watches a blocking wait (a collective of all processes) like a transfer."""
        marker = _Wait()
        self.track(marker, description, peer)
        try:
            yield
        finally:
            marker.done = True

    def close(self, state: str = "bye") -> None:
        """Publishes the final state (``bye`` or ``failed: ...``) and stops the thread."""
        if self._exiting:
            return
        self._exiting = True
        self._stop.set()
        self._publish(state)

    def diagnose(self) -> str | None:
        """What went wrong, as far as the watchdog knows: a failed transfer or a lost peer."""
        if self.failure is not None:
            return self.failure
        with self._lock:
            pending = list(self._pending)
        for _, array, description, peer in pending:
            if array.is_ready() and _failed(array):
                return f"the {description} failed: peer {self.peer_report(peer)}"
        now = time.monotonic()
        for peer, info in sorted(self._peers.items()):
            silent = now - info.changed > 2 * self.options.interval_s + 1.0
            if info.state.startswith("failed") or (silent and info.state != "bye"):
                return f"peer {self.peer_report(peer)}"
        return None

    def peer_report(self, peer: int) -> str:
        """What ``peer`` last published, read now: "process 1 (ranks 2, 3) failed: ...",
        "... exited" or "... is probably lost (it last reported: ...)"."""
        try:
            if self.kv_lost or peer < 0:
                raise RuntimeFailure("no heartbeat to read")
            # Bounded: a plain read waits for a coordination service that may be gone.
            value = coordination.client().blocking_key_value_get(
                f"{_HEARTBEAT_DIR}{peer}", _REPORT_TIMEOUT_MS
            )
            state = value.partition("|")[2]
            last = state or "nothing"
        except Exception:  # the store may be gone: what this process read last
            info = self._peers.get(peer)
            state = info.state if info is not None else ""
            last = self._last_state(peer)
        if state.startswith("failed"):
            return f"{self._describe(peer)} {state}"
        if state == "bye":
            return f"{self._describe(peer)} exited"
        return f"{self._describe(peer)} is probably lost (it last reported: {last})"

    def wait_for_peers(self, timeout_s: float) -> None:
        """Waits until every peer has stopped (a final state, or silent for 2 intervals)."""
        deadline = time.monotonic() + timeout_s
        silent_after = 2 * self.options.interval_s + 1.0
        while time.monotonic() < deadline and not self.kv_lost:
            try:
                entries = coordination.client().key_value_dir_get(_HEARTBEAT_DIR)
            except Exception:
                return
            now = time.monotonic()
            running = False
            for _, info in self._update_peers(entries, now):
                final = info.state == "bye" or info.state.startswith("failed")
                if not final and now - info.changed < silent_after:
                    running = True
            if not running:
                return
            time.sleep(0.2)

    def running_peers(self, timeout_s: float) -> list[int]:
        """Waits until every peer has finished, failed or gone silent; returns the peers
        still running (heartbeating without a final state) after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        silent_after = 2 * self.options.interval_s + 1.0
        running: list[int] = []
        while not self.kv_lost:
            try:
                entries = coordination.client().key_value_dir_get(_HEARTBEAT_DIR)
            except Exception:
                return []
            now = time.monotonic()
            seen = dict(self._update_peers(entries, now))
            # A peer without a heartbeat yet is still starting its watchdog.
            running = [
                peer
                for peer in range(self.num_processes)
                if peer != self.process
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

    # ------------------------------------------------------------ the thread
    def _run(self) -> None:
        interval = self.options.interval_s
        next_check = time.monotonic() + interval
        while not self._stop.is_set():
            changed = self._changed.wait(max(0.0, next_check - time.monotonic()))
            if self._stop.is_set():
                return
            try:
                self._changed.clear()
                self._beat()
                if time.monotonic() >= next_check:
                    self._check_peers()
                    self._check_transfers()
                    next_check = time.monotonic() + interval
                elif changed:
                    self._stop.wait(STATE_GAP_S)
            except Exception as e:  # the watchdog must not die silently
                self._fatal(f"the jaxpp watchdog failed: {type(e).__name__}: {e}")

    def _publish(self, state: str) -> None:
        self._counter += 1
        if self.kv_lost:
            return
        try:
            coordination.client().key_value_set(
                f"{_HEARTBEAT_DIR}{self.process}", f"{self._counter}|{state}", True
            )
        except Exception:  # the store may be gone
            pass

    def _beat(self) -> None:
        self._counter += 1
        if self.kv_lost:
            return
        kv = coordination.client()
        try:
            kv.key_value_set(
                f"{_HEARTBEAT_DIR}{self.process}", f"{self._counter}|{self._state}", True
            )
            entries = kv.key_value_dir_get(_HEARTBEAT_DIR)
        except Exception as e:
            if self._exiting:
                return
            now = time.monotonic()
            if self._kv_down_since is None:
                self._kv_down_since = now
            elif now - self._kv_down_since > self.options.peer_timeout_s:
                self._fatal(
                    f"lost the jax.distributed coordination service (hosted by process 0) for "
                    f"{now - self._kv_down_since:.0f} s: {e}"
                )
            return
        self._kv_down_since = None
        self._kv_ok_at = time.monotonic()
        for _ in self._update_peers(entries, time.monotonic()):
            pass

    def _update_peers(self, entries: list, now: float) -> list[tuple[int, _Peer]]:
        """Records each peer's heartbeat entry; returns the peers with their state."""
        updated = []
        for key, value in entries:
            peer = int(key.rsplit("/", 1)[1])
            if peer == self.process:
                continue
            counter, _, state = value.partition("|")
            info = self._peers.setdefault(peer, _Peer(changed=now))
            if counter != info.counter:
                info.counter, info.changed = counter, now
            info.state = state
            updated.append((peer, info))
        return updated

    def _describe(self, peer: int) -> str:
        if peer < 0:
            return "processes"
        role = self.peer_roles.get(peer)
        return f"process {peer}" + (f" ({role})" if role else "")

    def _check_peers(self) -> None:
        if self._exiting:
            return
        now = time.monotonic()
        for peer, info in sorted(self._peers.items()):
            if info.state.startswith("failed"):
                message = f"peer {self._describe(peer)} {info.state}"
                if self._peer_failed_at is None:
                    self._peer_failed_at = now
                    self.failure = f"jaxpp: process {self.process}: {message}"
                elif now - self._peer_failed_at > self.options.grace_s:
                    self._fatal(message)
            elif info.state == "bye":
                continue
            elif now - info.changed > self.options.peer_timeout_s:
                self._fatal(
                    f"lost peer {self._describe(peer)}: no heartbeat for "
                    f"{now - info.changed:.0f} s (it last reported: {info.state or 'nothing'}); "
                    f"it died, froze or became unreachable"
                )

    def _check_transfers(self) -> None:
        if self._exiting:
            return
        with self._lock:
            while self._pending and self._pending[0][1].is_ready():
                _, array, description, peer = self._pending.popleft()
                if _failed(array):
                    self._fatal(f"the {description} failed: peer {self.peer_report(peer)}")
            if not self._pending:
                return
            started, _, description, peer = self._pending[0]
        waited = time.monotonic() - started
        info = self._peers.get(peer)
        if info is not None and info.state == "bye":
            self._fatal(
                f"peer {self._describe(peer)} exited while this process still waits in the "
                f"{description} (for {waited:.0f} s): the processes did not run the same "
                f"sequence of steps"
            )
        if waited > self.options.transfer_timeout_s:
            state = info.state if info is not None else "unknown"
            self._fatal(
                f"the {description} has not completed after {waited:.0f} s (limit "
                f"JAXPP_TRANSFER_TIMEOUT={self.options.transfer_timeout_s:.0f} s); peer "
                f"{self._describe(peer)} is alive and reports: {state}"
            )

    def lost_peer(self) -> str | None:
        """Which peer is lost, from what this process can still see without the
        key-value store: process 0 when its coordination service refuses connections or
        stopped answering, else the peer that reported a failure or whose heartbeat
        stopped. None when every peer looks alive."""
        now = time.monotonic()
        silent_after = 2 * self.options.interval_s + 1.0
        if self.process != 0:
            reason = _probe_coordinator()
            quiet = now - self._kv_ok_at
            if reason is None and quiet > silent_after:
                reason = f"it has not answered for {quiet:.0f} s"
            if reason is not None:
                return (
                    f"lost peer {self._describe(0)}, which hosts jax.distributed's "
                    f"coordination service: {reason}; it died, froze or became unreachable "
                    f"(it last reported: {self._last_state(0)})"
                )
        for peer, info in sorted(self._peers.items()):
            if info.state.startswith("failed"):
                return f"peer {self._describe(peer)} {info.state}"
        silent = [
            (now - info.changed, peer)
            for peer, info in self._peers.items()
            if info.state != "bye" and now - info.changed > silent_after
        ]
        if silent:
            quiet, peer = max(silent)
            return (
                f"lost peer {self._describe(peer)}: no heartbeat for {quiet:.0f} s (it last "
                f"reported: {self._last_state(peer)}); it died, froze or became unreachable"
            )
        return None

    def _last_state(self, peer: int) -> str:
        """The state ``peer`` published last, as this process read it, with its age."""
        info = self._peers.get(peer)
        if info is None or not info.state:
            return "nothing"
        return f"{info.state}, {time.monotonic() - info.changed:.2f} s ago"

    def on_abort(self) -> None:
        """Called in the thread that jax.distributed aborts (SIGABRT); see the module
        docstring. Does not return when a lost peer is found."""
        self.kv_lost = True
        try:
            lost = self.lost_peer()
        except Exception as e:  # the handler must not fail
            lost = None
            _write_fd(f"jaxpp: process {self.process}: no diagnosis: {type(e).__name__}: {e}\n")
        me = f"jaxpp: process {self.process}"
        if lost is None:
            states = "; ".join(
                f"{self._describe(p)}: {self._last_state(p)}" for p in sorted(self._peers)
            )
            _write_fd(
                f"\n{me}: aborted (SIGABRT; jax.distributed aborts a process when its "
                f"coordination service reports an error, logged above); no peer looks lost "
                f"(last reports: {states or 'none'})\n"
            )
            return
        text = f"{me}: {lost}"
        if self.failure is None:
            self.failure = text
        self._exiting = True  # the watchdog thread reports nothing more
        _write_fd(
            f"\n{text}\n{me}: jax.distributed aborts this process (its coordination "
            f"service reported the error logged above); exiting with code {EXIT_CODE} "
            f"unless the main thread raises first\n"
        )
        time.sleep(self.options.grace_s)  # the main thread may raise and exit meanwhile
        _write_fd(f"{me} exits with code {EXIT_CODE}\n")
        os._exit(EXIT_CODE)

    def _fatal(self, message: str) -> None:
        """Reports ``message`` and ends the process (it may be blocked inside XLA)."""
        if self._exiting:
            return
        text = f"jaxpp: process {self.process}: {message}"
        self.failure = text
        self.close(f"failed: {message}"[:2000])
        _write(f"\n{text}\njaxpp: process {self.process} exits with code {EXIT_CODE}\n")
        if self.process == 0:
            self.wait_for_peers(self.options.grace_s + 5.0)
        os._exit(EXIT_CODE)


def _failed(array: Any) -> bool:
    """Whether a ready array holds an error instead of data."""
    try:
        array.block_until_ready()
    except Exception:
        return True
    return False


def _probe_coordinator() -> str | None:
    """Why the coordination service's address refuses a TCP connection (None if it
    accepts one, or if the address is unknown)."""
    from jax._src import distributed

    address = distributed.global_state.coordinator_address
    if not address or ":" not in address:
        return None
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=1.0):
            return None
    except ConnectionRefusedError:
        return f"{address} refuses connections"
    except (OSError, ValueError) as e:
        return f"{address} is unreachable ({e})"


def _write_fd(text: str) -> None:
    """Writes to stderr's file descriptor, bypassing Python's buffers and locks."""
    try:
        os.write(2, text.encode(errors="replace"))
    except OSError:
        pass


def _write(text: str) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is sys.stderr:
                stream.write(text)
            stream.flush()
        except Exception:  # a closed stream must not hide the exit
            pass


_current: Watchdog | None = None
_start_lock = threading.Lock()


def current() -> Watchdog | None:
    return _current


def ensure_started(options: WatchdogOptions | None = None) -> Watchdog:
    """Starts this process's watchdog once (needs ``jax.distributed`` initialized)."""
    global _current
    with _start_lock:
        if _current is None:
            import jax

            dog = Watchdog(
                jax.process_index(), jax.process_count(), options or WatchdogOptions.from_env()
            )
            dog.start()
            _install_exit_hooks(dog)
            _install_abort_handler(dog)
            _current = dog
        return _current


def _install_exit_hooks(dog: Watchdog) -> None:
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
    _record_exit_codes()
    # Registered after jax's own atexit (jax.distributed.shutdown), so it runs first.
    atexit.register(_at_exit, dog)


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
    running = dog.running_peers(dog.options.shutdown_timeout_s)
    if running:
        names = "; ".join(
            f"{dog._describe(peer)} (alive, it last reported: "
            f"{dog._peers[peer].state if peer in dog._peers else 'nothing'})"
            for peer in running
        )
        _write(
            f"\njaxpp: process {dog.process} finished, but its peers still run after "
            f"{dog.options.shutdown_timeout_s:.0f} s (limit JAXPP_SHUTDOWN_TIMEOUT): {names}\n"
            f"jaxpp: process {dog.process} exits with code {EXIT_CODE}\n"
        )
        os._exit(EXIT_CODE)


_abort_handler: Any = None  # the ctypes callback, kept alive
_abort_lock = threading.Lock()


def _install_abort_handler(dog: Watchdog) -> None:
    """Makes a SIGABRT (jax.distributed's fatal error) call ``dog.on_abort`` first.

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
        dog.on_abort()  # returns when no peer looks lost: abort() then ends the process

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
