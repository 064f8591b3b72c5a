"""The launcher's supervision of its children: ``Launch`` starts them, reaps them, kills
them by PID after a failure, a stall or a timeout, and says what became of each."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence

from jaxpp_mlir.distributed.child_output import pump_lines, say
from jaxpp_mlir.distributed.child_setup import child_env, free_port
from jaxpp_mlir.runtime import options


@dataclasses.dataclass
class _End:
    code: int
    at: float  # seconds after the launch started
    killed_by_launcher: int | None = None  # the signal the launcher sent, if it did


def describe_exit(code: int) -> str:
    """``exited with code 3``, ``killed by signal 9 (SIGKILL)``."""
    if code >= 0:
        return f"exited with code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = "unknown signal"
    return f"killed by signal {-code} ({name})"


class Launch:
    """Child processes of one launch; ``wait`` supervises them, ``kill`` ends them."""

    def __init__(
        self,
        command: Sequence[str],
        nproc: int,
        *,
        devices_per_proc: int | None = None,
        port: int | None = None,
        prefix: bool = True,
        env: dict[str, str] | None = None,
        gloo_log: bool = False,
    ):
        self.port = port or free_port()
        self.started = time.monotonic()
        self.procs: list[subprocess.Popen] = []
        self.ends: dict[int, _End] = {}  # filled by the reaper threads
        self._signalled: dict[int, int] = {}  # process -> signal the launcher sent
        self.stalled: list[int] = []  # named as stalled by the verdict (exit code 124)
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._notes = tempfile.mkdtemp(prefix="jaxpp_launch_")  # options.FAILURE_NOTES
        base = dict(os.environ if env is None else env)
        base[options.FAILURE_NOTES.env] = self._notes
        try:
            for i in range(nproc):
                pipe = subprocess.PIPE if prefix else None
                proc = subprocess.Popen(
                    list(command),
                    env=child_env(base, i, nproc, self.port, devices_per_proc),
                    stdout=pipe,
                    stderr=pipe,
                    start_new_session=True,  # its own process group, killed with it
                )
                self.procs.append(proc)
                threading.Thread(target=self._reap, args=(i, proc), daemon=True).start()
                if prefix:
                    tag = f"[p{i}] ".encode()
                    for stream, out in ((proc.stdout, sys.stdout), (proc.stderr, sys.stderr)):
                        t = threading.Thread(
                            target=pump_lines,
                            args=(stream, out.buffer, tag, not gloo_log),
                            daemon=True,
                        )
                        t.start()
                        self._threads.append(t)
        except BaseException:
            self.kill()
            raise

    def _reap(self, i: int, proc: subprocess.Popen) -> None:
        """Waits for child ``i``; records when it ended (to the millisecond) and how."""
        code = proc.wait()
        with self._lock:
            self.ends[i] = _End(code, time.monotonic() - self.started, self._signalled.get(i))

    def poll(self) -> list[int | None]:
        with self._lock:
            return [self.ends[i].code if i in self.ends else None for i in range(len(self.procs))]

    def first_failure(self) -> int | None:
        """The process that failed first (by the time it ended), if any failed by itself.

        A process that noted that its failure follows a peer's (``FAILURE_NOTES``) comes
        after every process that did not: one's exit can break the other's transfer, and
        the two then end within milliseconds, in either order."""
        with self._lock:
            failed = [
                (e.at, i)
                for i, e in self.ends.items()
                if e.code != 0 and e.killed_by_launcher is None
            ]
        failed = [(at, i) for at, i in failed if i not in self.finished_waiting()]
        own = [(at, i) for at, i in failed if not self._peer_caused(i)]
        return min(own or failed)[1] if failed else None

    def _peer_caused(self, process: int) -> bool:
        return os.path.exists(os.path.join(self._notes, f"peer_caused.{process}"))

    def finished_waiting(self) -> dict[int, list[int]]:
        """The processes that finished their work, waited ``JAXPP_MLIR_SHUTDOWN_TIMEOUT``
        for peers that still ran, and then exited with the watchdog's code (their note,
        ``FAILURE_NOTES``): each with those peers. Their exit code is no failure of theirs."""
        with self._lock:
            ended = [i for i, e in self.ends.items() if e.code != 0]
        waited = {}
        for i in ended:
            try:
                with open(os.path.join(self._notes, f"stalled_peers.{i}")) as handle:
                    text = handle.read()
            except OSError:
                continue
            waited[i] = [int(p) for p in text.split(",") if p.strip().isdigit()]
        return waited

    def kill(self, grace_s: float | None = None) -> None:
        """SIGTERM, then SIGKILL after ``grace_s`` (default ``JAXPP_MLIR_KILL_GRACE``, 3 s),
        to every child still running (by PID, with its process group)."""
        if grace_s is None:
            grace_s = options.KILL_GRACE.value()
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
            alive = [i for i, p in enumerate(self.procs) if p.poll() is None]
            if not alive:
                break
            for i in alive:
                with self._lock:
                    if i not in self.ends:
                        self._signalled.setdefault(i, sig)
                _signal(self.procs[i].pid, sig)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and any(self.procs[i].poll() is None for i in alive):
                time.sleep(0.05)
        for proc in self.procs:  # children that exited may leave a process group behind
            _signal(proc.pid, signal.SIGKILL, group_only=True)
        deadline = time.monotonic() + 5.0  # the reapers record the ends
        while len(self.ends) < len(self.procs) and time.monotonic() < deadline:
            time.sleep(0.01)
        for t in self._threads:
            t.join(timeout=1.0)

    def wait(
        self,
        *,
        grace_s: float = 30.0,
        timeout_s: float | None = None,
        stall_s: float | None = None,
    ) -> int:
        """Waits for every child; returns the launch's exit code.

        After the first failure, the others have ``grace_s`` to exit; then they
        are killed. After the first success, the others have ``stall_s`` (default
        ``JAXPP_MLIR_SHUTDOWN_TIMEOUT``); those still running then are named as stalled
        and every process left is killed (exit code 124). ``timeout_s`` bounds the
        whole launch (exit code 124).
        """
        stall_s = options.SHUTDOWN_TIMEOUT.value() if stall_s is None else stall_s
        failed_at = finished_at = None
        timed_out = False
        try:
            while True:
                codes = self.poll()
                now = time.monotonic()
                waited = self.finished_waiting()
                if failed_at is None and any(
                    c not in (None, 0) and i not in waited for i, c in enumerate(codes)
                ):
                    failed_at = now
                if finished_at is None and (0 in codes or waited):
                    finished_at = now
                if all(c is not None for c in codes):
                    break
                # A process that waited for its peers already gave them the shutdown timeout.
                stalled = sorted({p for peers in waited.values() for p in peers})
                if failed_at is None and any(codes[p] is None for p in stalled):
                    say(self._stalled_peers(codes, waited, stall_s))
                    timed_out = True
                    self.kill()
                    break
                if failed_at is None and finished_at is not None and now - finished_at > stall_s:
                    say(self._stalled(codes, stall_s))
                    timed_out = True
                    self.kill()
                    break
                if failed_at is not None and now - failed_at > grace_s:
                    say(
                        f"processes still running {grace_s:.0f} s after process "
                        f"{self.first_failure()} failed; killing them"
                    )
                    self.kill()
                    break
                if timeout_s is not None and now - self.started > timeout_s:
                    say(f"timeout after {timeout_s:.0f} s; killing every process")
                    timed_out = True
                    self.kill()
                    break
                time.sleep(0.05)
        finally:
            self.kill()
        if not self.stalled:  # a stalled peer that ended by itself before it was seen
            self.stalled = sorted({p for peers in self.finished_waiting().values() for p in peers})
            timed_out = timed_out or bool(self.stalled)
        for line in self.summary():
            say(line)
        first = self.first_failure()
        shutil.rmtree(self._notes, ignore_errors=True)
        if timed_out:
            return 124
        if first is None:
            return 0
        code = self.ends[first].code
        return 128 - code if code < 0 else code

    def _stalled(self, codes: list[int | None], stall_s: float) -> str:
        running = [i for i, code in enumerate(codes) if code is None]
        self.stalled = running
        done = codes.index(0)
        return (
            f"process {', '.join(map(str, running))} still running {stall_s:.0f} s after "
            f"process {done} exited with 0 (limit {options.SHUTDOWN_TIMEOUT.env}): stalled, "
            f"maybe before its first jaxpp call; killing it"
        )

    def _stalled_peers(
        self, codes: list[int | None], waited: dict[int, list[int]], stall_s: float
    ) -> str:
        """The verdict when a finished process waited for peers still running: they stalled."""
        self.stalled = sorted({p for peers in waited.values() for p in peers if codes[p] is None})
        done = min(waited)
        return (
            f"process {', '.join(map(str, self.stalled))} still running {stall_s:.0f} s after "
            f"process {done} finished (limit {options.SHUTDOWN_TIMEOUT.env}; process {done} "
            f"waited for it, then exited with code {codes[done]}): stalled, maybe before its "
            f"first jaxpp call; killing it"
        )

    def summary(self) -> list[str]:
        """What became of every process: the first failure (or the stalled ones), then the
        others."""
        first = None if self.stalled else self.first_failure()
        waited = self.finished_waiting()
        lines = []
        order = sorted(range(len(self.procs)), key=lambda i: (i not in self.stalled, i != first, i))
        for i in order:
            proc, end = self.procs[i], self.ends.get(i)
            who = f"process {i} (pid {proc.pid})"
            if end is None:
                lines.append(f"{who}: still running (could not be killed)")
                continue
            how = describe_exit(end.code)
            if end.killed_by_launcher is not None:
                sent = signal.Signals(end.killed_by_launcher).name
                if end.code == -end.killed_by_launcher:
                    how = f"killed by the launcher ({sent})"
                else:
                    how = f"{how} (after the launcher sent {sent})"
            if i in self.stalled:
                lines.append(f"{who} stalled: still running after its peers finished; {how}")
            elif i in waited:
                peers = ", ".join(map(str, waited[i]))
                lines.append(
                    f"{who} finished, waited for process {peers} (limit "
                    f"{options.SHUTDOWN_TIMEOUT.env}), then {how} after {end.at:.1f} s"
                )
            elif i == first:
                lines.append(f"{who} failed first: {how} after {end.at:.1f} s")
            elif first is None:
                lines.append(f"{who}: {how} after {end.at:.1f} s")
            else:
                after = end.at - self.ends[first].at
                lines.append(f"{who}: {how}, {after:.1f} s after process {first} failed")
        if self.stalled:
            stalled = ", ".join(map(str, self.stalled))
            lines.append(f"exit code 124: process {stalled} stalled")
        elif first is not None:
            code = self.ends[first].code
            exit_code = 128 - code if code < 0 else code
            lines.append(f"exit code {exit_code}: process {first} {describe_exit(code)}")
        return lines


def _signal(pid: int, sig: int, group_only: bool = False) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        if not group_only:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
