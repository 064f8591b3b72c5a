"""Every way a peer leaves or stalls ends the whole launch in bounded time, named.

Two processes of two devices each run a 2-rank pipelined step (one rank per
process) under ``jaxpp_mlir.launch``; at step 2 process 1 leaves or stalls (see
``peer_worker.py``) while process 0 waits in a transfer with it. Each case
checks the launcher's exit code, the message naming process 1 and how it
left, the time taken, and that no process is left behind.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import time

import pytest

WORKER = str(pathlib.Path(__file__).parent / "peer_worker.py")
# Every jaxpp timeout of the workers: the steps before the failure wait on their
# transfers for milliseconds (a setup barrier precedes them), so two seconds keep
# the failure the only thing that can time out while the cases stay short (each
# case waits for one or two of these limits plus the launcher's grace).
LIMIT_S = 2
# A transfer waits a second longer than a silent peer is given: a frozen peer is named by
# its missed heartbeats, not by whichever of the two limits a loaded machine hits first.
TRANSFER_LIMIT_S = LIMIT_S + 1
LIMITS = {
    "JAXPP_SETUP_TIMEOUT": "60",
    # Frequent heartbeats: a peer's failure is seen within a fraction of a second.
    "JAXPP_MLIR_HEARTBEAT_INTERVAL": "0.25",
    "JAXPP_MLIR_TRANSFER_TIMEOUT": str(TRANSFER_LIMIT_S),
    "JAXPP_MLIR_PEER_TIMEOUT": str(LIMIT_S),
    "JAXPP_MLIR_SHUTDOWN_TIMEOUT": str(LIMIT_S),
    # jax's own liveness check stays later than the watchdog's, which names the peer.
    "JAXPP_MLIR_HEARTBEAT_TIMEOUT": str(LIMIT_S + 3),
    # A process told of a peer's failure gives its main thread a second to fail first.
    "JAXPP_MLIR_PEER_FAILURE_GRACE": "1",
    # A process the launcher stops is killed half a second after its SIGTERM (a frozen
    # one never ends by itself, and jax.distributed takes SIGTERM as a preemption notice).
    "JAXPP_MLIR_KILL_GRACE": "0.5",
}
GRACE_S = 2 * LIMIT_S  # the launcher's wait for the others after the first failure
# A frozen process 1 cannot end by itself (process 0 fails first, naming it): the grace
# would only delay the launcher's kill.
GRACE_S_BY_MODE = {"freeze": 0.5}
TIMEOUT_S = 150  # the launcher's own limit: reaching it fails the test (exit 124)

PEER = r"process 1 \(ranks 1\)"
STALLED_TRANSFER = (
    rf"has not completed after \d+ s \(limit JAXPP_MLIR_TRANSFER_TIMEOUT={TRANSFER_LIMIT_S} s\); "
    rf"peer {PEER} is alive"
)
CASES = {
    # mode: (launcher exit code, what a process says, the launcher's verdict in its summary)
    "sys_exit": (3, rf"peer {PEER} failed: exited with sys.exit\(3\)", "exited with code 3"),
    "raise": (
        1,
        rf"peer {PEER} failed: RuntimeError: the victim's data loader broke",
        "exited with code 1",
    ),
    # An abrupt exit, as a SIGKILL: the survivor names the peer through whichever of the
    # coordination service and the missed heartbeats tells first (the machine's load decides).
    "os_exit": (5, rf"peer {PEER} is probably lost|lost peer {PEER}", "exited with code 5"),
    "sigkill": (137, rf"peer {PEER} is probably lost|lost peer {PEER}", r"signal 9 \(SIGKILL\)"),
    "sigterm": (70, STALLED_TRANSFER, "exited with code 70"),
    "stall": (70, STALLED_TRANSFER, "exited with code 70"),
    "freeze": (70, rf"lost peer {PEER}: no heartbeat for \d+ s", "exited with code 70"),
}
FIRST_FAILURE = "failed first: .*{how}"
# Process 1 stalls while process 0 finishes: process 0 waits for it, names it and exits
# with code 70; the launcher's verdict blames process 1, the one that stalled.
STALL_AFTER_INIT = (
    124,
    rf"process 0 finished, but its peers still run after {LIMIT_S} s "
    rf"\(limit JAXPP_MLIR_SHUTDOWN_TIMEOUT\): process 1 \(alive, it last reported: started\)",
    r"process 1 \(pid \d+\) stalled: still running after its peers finished",
)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAXPP_", "JAX_COORD"))}
    return {**env, **LIMITS}


@pytest.mark.slow
@pytest.mark.parametrize("mode", [*CASES, "stall_after_init"])
def test_a_peer_that_leaves_or_stalls_ends_the_launch(mode, python_server):
    if mode == "stall_after_init":
        code, message, verdict = STALL_AFTER_INIT
    else:
        code, message, how = CASES[mode]
        verdict = FIRST_FAILURE.format(how=how)
    command = [
        sys.executable, "-m", "jaxpp_mlir.launch", "--nproc", "2", "--devices-per-proc", "2",
        "--grace", str(GRACE_S_BY_MODE.get(mode, GRACE_S)), "--timeout", str(TIMEOUT_S),
        WORKER, mode,
    ]  # fmt: skip
    start = time.monotonic()
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S + 30,
        env={**_env(), **python_server.env},
    )
    took = time.monotonic() - start
    output = result.stdout + result.stderr
    assert result.returncode == code, output[-4000:]
    assert re.search(message, output), output[-4000:]
    summary = [line for line in result.stderr.splitlines() if line.startswith("jaxpp.launch: ")]
    assert re.search(verdict, "\n".join(summary)), summary
    assert "finished all steps" not in result.stdout
    # Bounded: setup, then at most a few of the workers' timeouts and the launcher's grace.
    assert took < 120, f"{took:.0f} s"
    for pid in re.findall(r"\(pid (\d+)\)", "\n".join(summary)):
        with pytest.raises(ProcessLookupError):
            os.kill(int(pid), 0)
