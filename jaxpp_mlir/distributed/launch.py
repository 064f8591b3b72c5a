"""Run one script as several ``jax.distributed`` processes on this machine.

    python -m jaxpp_mlir.launch --nproc 2 --devices-per-proc 4 script.py args...

starts ``script.py args...`` ``--nproc`` times (with this interpreter, or the command
in ``JAXPP_MLIR_LAUNCH_PYTHON``), each process with
``--devices-per-proc`` CPU devices, a coordinator on 127.0.0.1 at a free port,
and these environment variables:

- ``JAX_COORDINATOR_ADDRESS`` / ``JAX_COORDINATOR_BIND_ADDRESS``: ``127.0.0.1:PORT``
  (``jax.distributed.initialize`` reads both),
- ``JAXPP_NUM_PROCESSES``, ``JAXPP_PROCESS_ID``: the process count and this
  process's id, read by ``initialize_from_env``,
- ``XLA_FLAGS`` with ``--xla_force_host_platform_device_count`` and
  ``JAX_PLATFORMS=cpu``.

The script calls ``jaxpp_mlir.launch.initialize_from_env()`` first (it also
works under Slurm or Open MPI, and alone, without any of these variables).
Output lines are prefixed with ``[pN]``, each child line kept whole; Gloo's
connection messages (``[Gloo] Rank 0 is connected to 1 peer ranks...``, one per
collective set-up) are dropped unless ``--gloo-log`` is given. When a process fails, the others get
``--grace`` seconds to stop by themselves (the runtime's watchdog makes them
exit), then every process still running is killed by PID; the launcher exits
with the first failing process's code (128 + signal for a signal). At the end
it prints a summary on stderr: which process failed first and how (exit code
or signal), and what became of every other one (exited by itself, how long
after, or killed by the launcher). A process the launcher stops gets SIGTERM, then
SIGKILL ``JAXPP_MLIR_KILL_GRACE`` seconds later (3 by default). Once one process
has exited with 0, the others have ``JAXPP_MLIR_SHUTDOWN_TIMEOUT`` seconds (300 by
default: the longest a finished process waits for its peers) to exit too; a process
still running then has stalled (say, before its first jaxpp call, where no watchdog
watches it): the launcher names it, kills every process left and exits with 124.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import IO

import numpy as np

from jaxpp_mlir.distributed import launch_args
from jaxpp_mlir.runtime import options

_DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"


# ------------------------------------------------------------------ in the script


def initialize_from_env(*, heartbeat_timeout_s: int | None = None) -> bool:
    """Initializes ``jax.distributed`` from the launcher's (or a cluster's) environment.

    - ``JAXPP_NUM_PROCESSES`` and ``JAXPP_PROCESS_ID`` set (this launcher, or
      any launcher that sets them with ``JAX_COORDINATOR_ADDRESS``): initializes
      with them;
    - otherwise, under Slurm or Open MPI, or with ``JAX_COORDINATOR_ADDRESS``
      set: ``jax.distributed.initialize()``, which detects the rest;
    - otherwise: a single process, nothing to do.

    Returns whether several processes run. Also starts the jaxpp watchdog,
    which stops this process with a clear message when a peer is lost.
    ``heartbeat_timeout_s`` (default ``JAXPP_HEARTBEAT_TIMEOUT`` or 20) is how
    long jax's coordination service waits for a silent process;
    ``JAXPP_INIT_TIMEOUT`` (300) how long processes wait for each other to start.
    """
    import jax

    from jaxpp_mlir.runtime import watchdog

    env = os.environ
    if heartbeat_timeout_s is None:
        heartbeat_timeout_s = options.HEARTBEAT_TIMEOUT.value()
    cluster = any(k in env for k in ("SLURM_JOB_ID", "OMPI_MCA_orte_hnp_uri", "PMIX_RANK"))
    timeouts = {
        "heartbeat_timeout_seconds": heartbeat_timeout_s,
        "initialization_timeout": options.INIT_TIMEOUT.value(),
    }
    process_id, num_processes = options.PROCESS_ID.value(), options.NUM_PROCESSES.value()
    if process_id is not None and num_processes is not None:
        jax.distributed.initialize(
            coordinator_address=env.get("JAX_COORDINATOR_ADDRESS"),
            num_processes=num_processes,
            process_id=process_id,
            **timeouts,
        )
    elif cluster or "JAX_COORDINATOR_ADDRESS" in env:
        jax.distributed.initialize(**timeouts)
    else:
        return False
    if jax.process_count() > 1:
        watchdog.ensure_started()
    return jax.process_count() > 1


def pipeline_devices(num_ranks: int, devices_per_rank: int = 1) -> np.ndarray:
    """Devices for ``num_ranks`` pipeline ranks, as an array ``[num_ranks, devices_per_rank]``.

    Ranks are spread evenly over the processes, in order (process 0 holds the
    first ranks), and every rank's devices belong to one process, as the
    multi-process runtime requires. In one process: the first devices.
    """
    import jax

    count = jax.process_count()
    if num_ranks % count:
        raise ValueError(f"{num_ranks} ranks do not split evenly over {count} processes")
    per_process = num_ranks // count
    grid = []
    for process in range(count):
        local = sorted((d for d in jax.devices() if d.process_index == process), key=lambda d: d.id)
        need = per_process * devices_per_rank
        if len(local) < need:
            raise ValueError(
                f"process {process} has {len(local)} devices; {per_process} ranks of "
                f"{devices_per_rank} devices need {need}"
            )
        for r in range(per_process):
            grid.append(local[r * devices_per_rank : (r + 1) * devices_per_rank])
    result = np.empty((num_ranks, devices_per_rank), dtype=object)
    for r, devices in enumerate(grid):
        for i, d in enumerate(devices):
            result[r, i] = d
    return result


# ------------------------------------------------------------------ the launcher


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_env(
    base: dict[str, str], process: int, nproc: int, port: int, devices_per_proc: int | None
) -> dict[str, str]:
    """The environment of process ``process``."""
    env = dict(base)
    address = f"127.0.0.1:{port}"
    env["JAX_COORDINATOR_ADDRESS"] = address
    env["JAX_COORDINATOR_BIND_ADDRESS"] = address
    for option, value in ((options.NUM_PROCESSES, nproc), (options.PROCESS_ID, process)):
        env[option.env] = str(value)
        env[option.legacy_env] = str(value)  # for scripts that still read the old name
    env["PYTHONUNBUFFERED"] = "1"
    if devices_per_proc is not None:
        flags = re.sub(rf"{_DEVICE_COUNT_FLAG}=\S+", "", env.get("XLA_FLAGS", "")).split()
        env["XLA_FLAGS"] = " ".join([*flags, f"{_DEVICE_COUNT_FLAG}={devices_per_proc}"])
        env.setdefault("JAX_PLATFORMS", "cpu")
    return env


# One writer at a time on the launcher's stdout and stderr, a whole line each: the
# children's prefixed lines and the launcher's own messages never share a line.
_OUTPUT_LOCK = threading.Lock()


# Gloo (the CPU collectives) prints one of these per connection set up, from C++.
GLOO_CHATTER = re.compile(
    rb"\[Gloo\] Rank \d+ is connected to \d+ peer ranks\. "
    rb"Expected number of connected peer ranks is : \d+"
)


def _pump(stream: IO[bytes], out: IO[bytes], prefix: bytes, drop_gloo: bool = True) -> None:
    for line in iter(stream.readline, b""):
        if drop_gloo and GLOO_CHATTER.search(line):
            # The message may share a line with the child's own output (two writers, one fd).
            line = GLOO_CHATTER.sub(b"", line)
            if not line.strip():
                continue
        if not line.endswith(b"\n"):  # a child's last words without a newline
            line += b"\n"
        with _OUTPUT_LOCK:
            out.write(prefix + line)
            out.flush()
    stream.close()


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
                            target=_pump,
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
        own = [(at, i) for at, i in failed if not self._peer_caused(i)]
        return min(own or failed)[1] if failed else None

    def _peer_caused(self, process: int) -> bool:
        return os.path.exists(os.path.join(self._notes, f"peer_caused.{process}"))

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
                if failed_at is None and any(c not in (None, 0) for c in codes):
                    failed_at = now
                if finished_at is None and 0 in codes:
                    finished_at = now
                if all(c is not None for c in codes):
                    break
                if failed_at is None and finished_at is not None and now - finished_at > stall_s:
                    _say(self._stalled(codes, stall_s))
                    timed_out = True
                    self.kill()
                    break
                if failed_at is not None and now - failed_at > grace_s:
                    _say(
                        f"processes still running {grace_s:.0f} s after process "
                        f"{self.first_failure()} failed; killing them"
                    )
                    self.kill()
                    break
                if timeout_s is not None and now - self.started > timeout_s:
                    _say(f"timeout after {timeout_s:.0f} s; killing every process")
                    timed_out = True
                    self.kill()
                    break
                time.sleep(0.05)
        finally:
            self.kill()
        for line in self.summary():
            _say(line)
        first = self.first_failure()
        shutil.rmtree(self._notes, ignore_errors=True)
        if timed_out:
            return 124
        if first is None:
            return 0
        code = self.ends[first].code
        return 128 - code if code < 0 else code

    def _stalled(self, codes: list[int | None], stall_s: float) -> str:
        running = [str(i) for i, code in enumerate(codes) if code is None]
        done = codes.index(0)
        return (
            f"process {', '.join(running)} still running {stall_s:.0f} s after process {done} "
            f"exited with 0 (limit {options.SHUTDOWN_TIMEOUT.env}): stalled, maybe before its "
            f"first jaxpp call; killing it"
        )

    def summary(self) -> list[str]:
        """What became of every process: the first failure, then the others."""
        first = self.first_failure()
        lines = []
        order = sorted(range(len(self.procs)), key=lambda i: (i != first, i))
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
            if i == first:
                lines.append(f"{who} failed first: {how} after {end.at:.1f} s")
            elif first is None:
                lines.append(f"{who}: {how} after {end.at:.1f} s")
            else:
                after = end.at - self.ends[first].at
                lines.append(f"{who}: {how}, {after:.1f} s after process {first} failed")
        if first is not None:
            code = self.ends[first].code
            exit_code = 128 - code if code < 0 else code
            lines.append(f"exit code {exit_code}: process {first} {describe_exit(code)}")
        return lines


def python_command() -> list[str]:
    """The command that starts a process's Python: ``JAXPP_MLIR_LAUNCH_PYTHON`` (split as a
    shell would), else this interpreter."""
    command = options.LAUNCH_PYTHON.value()
    return shlex.split(command) if command else [sys.executable]


def _signal(pid: int, sig: int, group_only: bool = False) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        if not group_only:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass


def _say(message: str) -> None:
    with _OUTPUT_LOCK:
        sys.stderr.write(f"jaxpp.launch: {message}\n")
        sys.stderr.flush()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m jaxpp_mlir.launch",
        description="Run a script as several jax.distributed processes on this machine.",
    )
    parser.add_argument(
        "--nproc",
        type=launch_args.count(launch_args.MAX_PROCESSES),
        required=True,
        help="number of processes",
    )
    parser.add_argument(
        "--devices-per-proc",
        type=launch_args.count(launch_args.MAX_DEVICES_PER_PROCESS),
        default=None,
        help="CPU devices per process",
    )
    parser.add_argument(
        "--port", type=launch_args.port, default=None, help="coordinator port (default: free)"
    )
    parser.add_argument(
        "--grace",
        type=launch_args.non_negative_seconds,
        default=30.0,
        help="seconds the others get to exit after a process fails (default 30)",
    )
    parser.add_argument(
        "--timeout", type=launch_args.positive_seconds, default=None, help="limit for the whole run"
    )
    parser.add_argument("--no-prefix", action="store_true", help="do not prefix output lines")
    parser.add_argument(
        "--gloo-log",
        action="store_true",
        help="keep Gloo's connection messages (dropped by default)",
    )
    parser.add_argument("script", help="the Python script every process runs")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    ns = parser.parse_args(argv)
    if not os.path.isfile(ns.script):
        parser.error(f"script {ns.script!r} is not a file")
    launch = Launch(
        [*python_command(), ns.script, *ns.args],
        ns.nproc,
        devices_per_proc=ns.devices_per_proc,
        port=ns.port,
        prefix=not ns.no_prefix,
        gloo_log=ns.gloo_log,
    )

    def stop(signum: int, _frame: object) -> None:
        _say(f"got signal {signum}; killing every process")
        launch.kill()
        sys.exit(128 + signum)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    return launch.wait(grace_s=ns.grace, timeout_s=ns.timeout)


if __name__ == "__main__":
    sys.exit(main())
