"""Several processes (jax.distributed on 127.0.0.1, gloo on CPU): the same pipelined step.

Each multi-process test starts worker processes (``multiprocess/worker.py``, or
the main job through ``jaxpp_mlir.launch``) with a hard timeout, and leaves no
process behind. The scenarios that can share processes share one launch per
process layout (``SHARED``), which ends with one of its processes killed.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time

import jax
import numpy as np
import pytest
from jaxpp_mlir.runtime.instructions import receive, run, send
from jaxpp_mlir.runtime.multiprocess.distributed import plan_transfers, rank_processes

import jaxpp_mlir as pp
from jaxpp_mlir.distributed.child_setup import child_env, free_port

HERE = pathlib.Path(__file__).parents[1] / "support" / "multiprocess"
WORKER = str(HERE / "worker.py")
LIMITS = {  # bounded waits inside the workers
    "JAXPP_SETUP_TIMEOUT": "60",
    "JAXPP_MLIR_TRANSFER_TIMEOUT": "60",
    "JAXPP_MLIR_PEER_TIMEOUT": "15",
    "JAXPP_MLIR_HEARTBEAT_TIMEOUT": "15",
}


def _load_model():
    spec = importlib.util.spec_from_file_location("jaxpp_multiprocess_model", HERE / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


model = _load_model()


# The workers started directly (every launch ends with one of them killed): a killed
# peer is named after two seconds, not LIMITS' 15, heartbeats four times a second.
KILL_LIMITS = {
    **LIMITS,
    "JAXPP_MLIR_PEER_TIMEOUT": "2",
    "JAXPP_MLIR_HEARTBEAT_INTERVAL": "0.25",
    "JAXPP_MLIR_HEARTBEAT_TIMEOUT": "5",  # jax's own check stays later than the watchdog's
}


def _env(limits: dict[str, str] = LIMITS) -> dict[str, str]:
    return {**os.environ, **limits}


@pytest.fixture(scope="module")
def reference() -> dict[str, tuple[list[np.ndarray], np.ndarray]]:
    """Parameters and losses of the same steps in this single process (8 devices)."""
    result = {}
    for name in model.SCHEDULES:
        program = model.partition(name, np.array(jax.devices()[: model.NUM_RANKS]))
        _, params, history = model.train(program)
        result[name] = ([np.asarray(p) for p in params], np.stack([np.asarray(h) for h in history]))
    return result


# Launches that several tests read: every scenario that can share the processes runs,
# then the processes step in a loop until one (the victim) is killed, as in
# test_killing_a_process_mid_step_stops_the_others: a peer (process 1) in one, the
# process hosting the coordination service (process 0) in the other.
# (nproc, devices) -> (mode, victim)
SHARED = {(2, 4): ("all", 1), (4, 2): ("train_loop", 0)}


class SharedLaunches:
    """The launches of ``SHARED``, each started when a test first asks for it."""

    def __init__(self, root: pathlib.Path, python):
        self._root = root
        self._python = python  # conftest.PythonServer
        self._runs: dict[tuple[int, int], tuple[KilledLaunch, pathlib.Path]] = {}

    def __call__(self, nproc: int, devices: int) -> tuple[KilledLaunch, pathlib.Path]:
        if (nproc, devices) not in self._runs:
            mode, victim = SHARED[nproc, devices]
            out = self._root / f"{nproc}x{devices}"
            out.mkdir()
            run = run_and_kill(self._python, nproc, devices, victim, mode, str(out))
            self._runs[nproc, devices] = (run, out)
        return self._runs[nproc, devices]


@pytest.fixture(scope="module")
def shared(tmp_path_factory, python_server) -> SharedLaunches:
    return SharedLaunches(tmp_path_factory.mktemp("shared_launches"), python_server)


def assert_scenarios_done(run: KilledLaunch) -> None:
    """Every process finished its scenarios (an exception would have ended it before)."""
    for p, out in enumerate(run.out):
        assert "scenarios done" in out, f"process {p}:\n{run.err[p][-3000:]}"


# ------------------------------------------------------------------ training


@pytest.mark.slow
@pytest.mark.parametrize(("nproc", "devices"), [(2, 4), (4, 2)], ids=["2x4", "4x2"])
def test_training_matches_single_process_bit_for_bit(nproc, devices, reference, shared):
    run, out = shared(nproc, devices)
    assert_scenarios_done(run)
    for name, (params, losses) in reference.items():
        got = np.load(out / f"{name}.npz")
        for i, p in enumerate(params):
            np.testing.assert_array_equal(got[f"arr_{i}"], p, err_msg=f"{name} param {i}")
        np.testing.assert_array_equal(got["losses"], losses, err_msg=f"{name} losses")
    refusals = "".join(run.out).count("remote outputs read (small) or refused (large)")
    assert refusals == nproc * len(model.SCHEDULES)


@pytest.mark.slow
def test_sharded_ranks_match_single_process_bit_for_bit(shared):
    # 2 processes x 4 devices: rank 0 on two devices of process 0, rank 1 on two of process 1.
    run, out = shared(2, 4)
    assert_scenarios_done(run)
    assert "".join(run.out).count("sharded: done") == 2
    program = model.partition_sharded(np.array(jax.devices()[:4]).reshape(2, 2))
    _, params, history = model.train(program)
    got = np.load(out / "sharded.npz")
    for i, p in enumerate(params):
        np.testing.assert_array_equal(got[f"arr_{i}"], np.asarray(p), err_msg=f"param {i}")
    np.testing.assert_array_equal(got["losses"], np.stack([np.asarray(h) for h in history]))


@pytest.mark.slow
def test_set_up_exchanges_only_its_barriers_when_the_plan_knows_every_layout(shared):
    # Two processes: the plan fingerprints, "compiled" and "ready" are the only rounds
    # through the key-value store; the layouts of transferred values and outputs come
    # from the plan (one device per rank, and two devices per rank with every layout
    # fixed by the compiler). Reading them from the executables took 4 and 6 rounds.
    run, _ = shared(2, 4)
    assert_scenarios_done(run)
    for p, out in enumerate(run.out):
        names = (*model.SCHEDULES, "sharded")
        # Not anchored at a line start: a C++ library may leave a partial line on stdout.
        pattern = rf"({'|'.join(names)}): (\d+) key-value exchanges"
        counts = dict(re.findall(pattern, out))
        expected = {name: "3" for name in names}
        assert counts == expected, f"process {p}:\n{out[-3000:]}\n{run.err[p][-2000:]}"


@pytest.mark.slow
def test_main_job_as_two_processes_prints_the_single_process_losses(python_server):
    # examples/train_mlp.py, the README's main job: one pipelined training over both
    # processes (ranks 0, 1 in process 0; 2, 3 in process 1) prints the same losses as
    # the same script in one process (both check against jax.jit themselves).
    script = str(pathlib.Path(__file__).parents[3] / "examples" / "train_mlp.py")
    command = [
        sys.executable, "-m", "jaxpp_mlir.launch", "--nproc", "2", "--devices-per-proc", "4",
        "--timeout", "150", script, "--steps", "2",
    ]  # fmt: skip
    # The single-process run goes on beside the launch (whose processes often wait).
    single = subprocess.Popen(
        [*python_server.command, script, "--steps", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={
            **{k: v for k, v in _env().items() if not k.startswith(("JAXPP_", "JAX_COORD"))},
            **python_server.env,
        },
    )
    try:
        two = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=180,
            env={**_env(), **python_server.env},
        )
        one_stdout, one_stderr = single.communicate(timeout=150)
    finally:
        single.kill()
        single.communicate()
    one = subprocess.CompletedProcess(single.args, single.returncode, one_stdout, one_stderr)
    assert two.returncode == 0, two.stderr[-3000:]
    # Process 0's lines; another writer of its stdout (Gloo) may share a line with one.
    said = [line for line in two.stdout.splitlines() if line.startswith("[p0] ")]
    plan = "2 processes; DistributedPlan(program 0, process 0 of 2, ranks 0, 1,"
    assert any(plan in line for line in said)
    assert any("pipelined training matches jax.jit" in line for line in said)
    assert one.returncode == 0, one.stderr[-3000:]
    assert "processes;" not in one.stdout

    def losses(stdout: str, prefix: str) -> list[str]:
        # Within the line: a library's own output (Gloo's "connected to 1 peer ranks") may
        # land on the same line of the shared stdout.
        loss_line = r"step \d+: pipelined loss \S+\s+jax\.jit loss \S+\s+\w+"
        lines = [line for line in stdout.splitlines() if line.startswith(prefix)]
        return [found for line in lines for found in re.findall(loss_line, line)]

    assert len(losses(one.stdout, "")) == 2
    assert losses(two.stdout, "[p0] ") == losses(one.stdout, "")
    assert not losses(two.stdout, "[p1] ")  # process 0 prints for both


# ------------------------------------------------------------------ failures


KILL_AT_STEP = 20  # late enough for every heartbeat to carry "program 0, call N"


class _Worker:
    """A worker process started without the launcher, its output collected by threads."""

    def __init__(self, python, process: int, nproc: int, port: int, devices: int, *args: str):
        env = child_env({**_env(KILL_LIMITS), **python.env}, process, nproc, port, devices)
        self.proc = subprocess.Popen(
            [*python.command, WORKER, *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.out: list[str] = []
        self.err: list[str] = []
        self.step = threading.Event()
        self._threads = [
            threading.Thread(target=self._read, args=(self.proc.stdout, self.out), daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stderr, self.err), daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _read(self, stream, lines: list[str]) -> None:
        for line in stream:
            lines.append(line)
            if line.strip() == f"step {KILL_AT_STEP}":
                self.step.set()

    def kill(self) -> None:
        for kill in (lambda: os.killpg(self.proc.pid, signal.SIGKILL), lambda: self.proc.kill()):
            try:
                kill()
            except (ProcessLookupError, PermissionError):
                pass
        self.proc.wait(timeout=10)
        for t in self._threads:
            t.join(timeout=5)
        for stream in (self.proc.stdout, self.proc.stderr):
            stream.close()


@dataclasses.dataclass(frozen=True)
class KilledLaunch:
    """Processes started without the launcher that stepped until ``victim`` was killed."""

    victim: int
    reached_kill_step: bool
    stopped_in_time: tuple[bool, ...]  # per process: ended within 30 s of the kill
    took: float  # seconds from the kill until the others ended (or gave up waiting)
    out: tuple[str, ...]
    err: tuple[str, ...]
    returncodes: tuple[int | None, ...]


def run_and_kill(python, nproc: int, devices: int, victim: int, *args: str) -> KilledLaunch:
    """Starts ``nproc`` workers with ``args`` (through ``python``, a conftest.PythonServer);
    SIGKILLs ``victim`` once it prints "step KILL_AT_STEP"; waits (at most 30 s) for the
    others to end by themselves."""
    port = free_port()
    workers = [_Worker(python, p, nproc, port, devices, *args) for p in range(nproc)]
    stopped = [True] * nproc
    took = float("inf")
    try:
        deadline = time.monotonic() + 240
        reached = False
        while not reached and time.monotonic() < deadline:
            reached = workers[victim].step.wait(timeout=0.5)
            if any(w.proc.poll() is not None for w in workers):
                break  # a process ended before the kill: the launch is broken
        if reached:
            # The victim keeps stepping; after a few heartbeat periods every peer has read
            # a "program 0, call N" state from it (states are published at most every 0.1 s).
            time.sleep(1.5)
            os.kill(workers[victim].proc.pid, signal.SIGKILL)
            killed = time.monotonic()
            for p, w in enumerate(workers):
                if p == victim:
                    continue
                try:
                    w.proc.wait(timeout=max(0.1, 30 - (time.monotonic() - killed)))
                except subprocess.TimeoutExpired:
                    stopped[p] = False
            took = time.monotonic() - killed
    finally:
        for w in workers:
            w.kill()  # joins the readers
    return KilledLaunch(
        victim=victim,
        reached_kill_step=reached,
        stopped_in_time=tuple(stopped),
        took=took,
        out=tuple("".join(w.out) for w in workers),
        err=tuple("".join(w.err) for w in workers),
        returncodes=tuple(w.proc.returncode for w in workers),
    )


@pytest.mark.slow
@pytest.mark.parametrize(("nproc", "devices"), [(2, 4), (4, 2)], ids=["2x4-kill-1", "4x2-kill-0"])
def test_killing_a_process_mid_step_stops_the_others(nproc, devices, shared):
    # Process 0 hosts jax.distributed's coordination service: when it dies, jax aborts
    # the others at once; the watchdog's SIGABRT handler names process 0 first.
    run, _ = shared(nproc, devices)  # killed after the scenarios of other tests
    victim = run.victim
    assert run.reached_kill_step, run.err[victim][-3000:]
    reports = []
    for p, err in enumerate(run.err):
        if p == victim:
            continue
        assert run.stopped_in_time[p], (
            f"process {p} still ran 30 s after process {victim} was killed"
        )
        assert run.returncodes[p] != 0, f"process {p} exited with 0:\n{err[-3000:]}"
        names_the_victim = re.search(
            rf"process {victim} \([^)]*\) is probably lost|lost peer process {victim}\b", err
        )
        assert names_the_victim, f"process {p} does not name process {victim}:\n{err[-3000:]}"
        reports += re.findall(r"it last reported: ([^);]*)", err)
    # The heartbeat is current: the victim was running calls, not setting up.
    assert any(r.startswith("program 0, call ") for r in reports), reports
    assert run.took < 30
    assert all(code is not None for code in run.returncodes)


# ------------------------------------------------------------------ deadlocks


@pytest.mark.slow
def test_deadlocking_transfer_order_is_rejected_in_every_process(shared):
    run, _ = shared(2, 4)
    assert_scenarios_done(run)
    rejected = "".join(run.out).count(
        "REJECTED: the cross-process transfers of this plan would deadlock"
    )
    assert rejected == 2


@pytest.fixture(scope="module")
def std1f1b_plan():
    return model.partition("std1f1b", np.array(jax.devices()[: model.NUM_RANKS])).plan


def test_plan_in_global_order_is_deadlock_free(std1f1b_plan):
    for process_of, nproc in (((0, 0, 1, 1), 2), ((0, 1, 2, 3), 4), ((0, 1, 1, 0), 2)):
        groups = plan_transfers(std1f1b_plan, process_of, nproc)
        crossing = {(g.src_rank, g.dst_rank) for g in groups}
        assert all(process_of[a] != process_of[b] for a, b in crossing)
        assert groups


def test_per_process_order_is_rejected_with_both_waits(std1f1b_plan):
    plan = model.per_process_order(std1f1b_plan)
    with pytest.raises(pp.ScheduleError, match="would deadlock") as info:
        plan_transfers(plan, (0, 0, 1, 1), 2)
    message = str(info.value)
    assert "process 0 waits in the transfer of value" in message
    assert "process 1 waits in the transfer of value" in message


def test_send_issued_before_its_value_exists_is_rejected(std1f1b_plan):
    # A plan listing a cross-process send and its receive before the run that
    # produces the value: the sender would issue the transfer without the value.
    plan = std1f1b_plan
    sent = next(i for i in plan.instructions if i.kind == send.KIND and (i.rank, i.peer) == (1, 2))
    received = next(
        i for i in plan.instructions if i.kind == receive.KIND and i.channel == sent.channel
    )
    rest = [i for i in plan.instructions if i is not sent and i is not received]
    assert any(i.kind == run.KIND and sent.value in i.outputs for i in rest)
    bad = dataclasses.replace(plan, instructions=(sent, received, *rest))
    with pytest.raises(pp.ScheduleError, match=f"rank 1 does not hold value {sent.value}"):
        plan_transfers(bad, (0, 0, 1, 1), 2)


def test_rank_spanning_processes_is_rejected():
    @dataclasses.dataclass(frozen=True)
    class FakeDevice:
        id: int
        process_index: int

    with pytest.raises(pp.MeshError, match="rank 1's devices \\[2, 2048\\] belong to processes"):
        rank_processes([[FakeDevice(0, 0)], [FakeDevice(2, 0), FakeDevice(2048, 1)]])


# ------------------------------------------------------------------ launcher


@pytest.mark.slow
@pytest.mark.parametrize(
    ("ending", "code", "how"),
    [("sys.exit(3)", 3, "exited with code 3"), ("os.kill(os.getpid(), 9)", 137, "SIGKILL")],
    ids=["exit-3", "sigkill"],
)
def test_launcher_propagates_the_exit_code_and_kills_the_rest(tmp_path, ending, code, how):
    script = tmp_path / "job.py"
    script.write_text(
        "import os, sys, time\n"
        "if os.environ['JAXPP_PROCESS_ID'] == '1':\n"
        "    time.sleep(0.5)\n"
        f"    {ending}\n"
        "print('pid', os.getpid(), flush=True)\n"
        "time.sleep(120)\n"
    )
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "jaxpp_mlir.launch", "--nproc", "2", "--grace", "1", str(script)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == code
    assert time.monotonic() - start < 30
    pid = int(re.search(r"\[p0\] pid (\d+)", result.stdout).group(1))
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    # The summary: the first failure and how, then the fate of the others.
    summary = [line for line in result.stderr.splitlines() if line.startswith("jaxpp.launch: ")]
    assert re.match(rf"jaxpp.launch: process 1 \(pid \d+\) failed first: .*{how}", summary[-3])
    assert re.match(
        r"jaxpp.launch: process 0 \(pid \d+\): killed by the launcher \(SIGTERM\), "
        r"[\d.]+ s after process 1 failed",
        summary[-2],
    )
    assert summary[-1].startswith(f"jaxpp.launch: exit code {code}: process 1 ")


def test_launcher_lines_stay_whole_when_a_child_ends_mid_line(tmp_path):
    # Both children leave a last line without a newline on both streams, then fail: every
    # child line keeps its own prefixed line and the summary lines start their own lines.
    script = tmp_path / "job.py"
    script.write_text(
        "import os, sys\n"
        "sys.stdout.write('half a line on stdout'); sys.stdout.flush()\n"
        "sys.stderr.write('half a line on stderr'); sys.stderr.flush()\n"
        "os._exit(4)\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "jaxpp_mlir.launch", "--nproc", "2", "--grace", "1", str(script)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 4
    for process in (0, 1):
        assert f"[p{process}] half a line on stdout\n" in result.stdout
        assert f"[p{process}] half a line on stderr\n" in result.stderr
    summary = [line for line in result.stderr.splitlines() if "jaxpp.launch: " in line]
    assert summary and all(line.startswith("jaxpp.launch: ") for line in summary), summary
    assert any(re.match(r"jaxpp.launch: process \d \(pid \d+\) failed first", s) for s in summary)
