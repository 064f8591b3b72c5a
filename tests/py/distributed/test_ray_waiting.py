"""The Ray driver names the cause of a failed step: a worker's death before the error
another worker raised because of it (its transfer to the dead worker failed first)."""

from __future__ import annotations

import jaxpp_mlir as pp
from jaxpp_mlir.ray.waiting import WorkerFailure, _cause_first


def test_a_death_is_the_cause_even_when_a_peer_failed_first():
    peer = pp.RuntimeFailure("worker 0: the transfer to rank 1 failed: peer process 1 is lost")
    death = WorkerFailure("step 1: worker 1 (pid 7) died (killed)", 1, died=True)
    cause = _cause_first([peer, death])
    assert cause is death and cause.worker == 1
    assert any("transfer to rank 1 failed" in note for note in cause.__notes__)


def test_without_a_death_the_first_failure_is_raised():
    first = pp.RuntimeFailure("worker 0: a stage failed")
    second = pp.RuntimeFailure("worker 1: a stage failed")
    assert _cause_first([first, second]) is first
    assert _cause_first([WorkerFailure("stalled", 1, stalled=True)]).stalled
