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
made after a failure was detected raises ``RuntimeFailure``. The
process-global hooks (an exception escaping the script, jax.distributed's
SIGABRT) are installed with the first watchdog, see ``exit_hooks``.

The heartbeat carries what the process does now: a change of state (every
call of a program) wakes the thread, which publishes it (at most every
``STATE_GAP_S``) and reads the peers' states, so a lost peer's last report is
current.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

from .. import options
from ..errors import RuntimeFailure
from ..multiprocess import coordination
from .stderr import write as _write
from .watchdog_options import WatchdogOptions

EXIT_CODE = 70
STATE_GAP_S = 0.1  # the least time between two heartbeats published for a change of state
_HEARTBEAT_DIR = f"{coordination.ROOT}/hb/"
_REPORT_TIMEOUT_MS = 500


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
        # Held while a heartbeat is written: the final state is never overwritten by a
        # heartbeat of the thread that carried the state before it.
        self._writing = threading.Lock()
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
        # Bounded: the thread may be inside a key-value call to a coordinator that is gone.
        held = self._writing.acquire(timeout=2 * self.options.interval_s + 1.0)
        try:
            self._state = state
            self._publish(state)
        finally:
            if held:
                self._writing.release()

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
            with self._writing:
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
                f"{options.TRANSFER_TIMEOUT.env}={self.options.transfer_timeout_s:.0f} s); peer "
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
            reason = coordination.probe_coordinator()
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

    def peer_states(self) -> str:
        """Every peer's last report, as this process read it (for a message)."""
        return "; ".join(f"{self._describe(p)}: {self._last_state(p)}" for p in sorted(self._peers))

    def stop_reporting(self) -> None:
        """The watchdog thread reports nothing more (the process is ending)."""
        self._exiting = True

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
            from . import exit_hooks

            exit_hooks.install_exit_hooks(dog)
            exit_hooks.install_abort_handler(dog)
            _current = dog
        return _current
