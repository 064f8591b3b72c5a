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

A process blocked inside XLA cannot be interrupted by an exception, so the
watchdog ends it with ``os._exit`` instead of letting it hang; a runtime call
made after a failure was detected raises ``RuntimeFailure``. When an exception
escapes the script, the exit hook publishes it (peers stop within ``grace_s``),
prints what the watchdog knows (a failed transfer, a lost peer) under the
traceback, and exits at once rather than wait in ``jax.distributed``'s
shutdown barrier for peers that may be gone. Process 0 hosts the coordination
service, so it first waits (at most ``grace_s`` + a few seconds) for the others
to stop, letting them report their own errors.

``jax.distributed``'s coordination service also terminates every process
(SIGABRT, naming the unhealthy task) once a process misses heartbeats for
``heartbeat_timeout_seconds``; the watchdog covers stalls, peers that exited
early, and gives a jaxpp-level message first.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

from jaxpp_mlir.errors import RuntimeFailure

from . import coordination

EXIT_CODE = 70
_HEARTBEAT_DIR = f"{coordination.ROOT}/hb/"


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

    @classmethod
    def from_env(cls) -> WatchdogOptions:
        """``JAXPP_HEARTBEAT_INTERVAL``, ``JAXPP_PEER_TIMEOUT``, ``JAXPP_TRANSFER_TIMEOUT``."""
        return cls(
            interval_s=_env_float("JAXPP_HEARTBEAT_INTERVAL", cls.interval_s),
            peer_timeout_s=_env_float("JAXPP_PEER_TIMEOUT", cls.peer_timeout_s),
            transfer_timeout_s=_env_float("JAXPP_TRANSFER_TIMEOUT", cls.transfer_timeout_s),
            grace_s=cls.grace_s,
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
        self._counter = 0
        self._peers: dict[int, _Peer] = {}
        self._pending: deque[tuple[float, Any, str, int]] = deque()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._exiting = False
        self._kv_down_since: float | None = None
        self._peer_failed_at: float | None = None
        self._thread = threading.Thread(target=self._run, name="jaxpp-watchdog", daemon=True)

    # ------------------------------------------------------------ main thread
    def start(self) -> None:
        self._beat()
        self._thread.start()

    def set_state(self, state: str) -> None:
        """What this process does now (shown to peers in failure messages)."""
        self._state = state

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
            value = coordination.client().key_value_try_get(f"{_HEARTBEAT_DIR}{peer}")
            state = value.partition("|")[2]
        except Exception:  # the store may be gone
            info = self._peers.get(peer)
            state = info.state if info is not None else ""
        if state.startswith("failed"):
            return f"{self._describe(peer)} {state}"
        if state == "bye":
            return f"{self._describe(peer)} exited"
        return f"{self._describe(peer)} is probably lost (it last reported: {state or 'nothing'})"

    def wait_for_peers(self, timeout_s: float) -> None:
        """Waits until every peer has stopped (a final state, or silent for 2 intervals)."""
        deadline = time.monotonic() + timeout_s
        silent_after = 2 * self.options.interval_s + 1.0
        while time.monotonic() < deadline:
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

    # ------------------------------------------------------------ the thread
    def _run(self) -> None:
        while not self._stop.wait(self.options.interval_s):
            try:
                self._beat()
                self._check_peers()
                self._check_transfers()
            except Exception as e:  # the watchdog must not die silently
                self._fatal(f"the jaxpp watchdog failed: {type(e).__name__}: {e}")

    def _publish(self, state: str) -> None:
        self._counter += 1
        try:
            coordination.client().key_value_set(
                f"{_HEARTBEAT_DIR}{self.process}", f"{self._counter}|{state}", True
            )
        except Exception:  # the store may be gone
            pass

    def _beat(self) -> None:
        self._counter += 1
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
    # Registered after jax's own atexit (jax.distributed.shutdown), so it runs first.
    atexit.register(dog.close)
