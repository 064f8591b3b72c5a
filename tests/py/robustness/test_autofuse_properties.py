"""Property test: automatic task fusion on random valid schedules delays no task.

Random per-rank task lists (up to 4 ranks, 8 stages, 6 microbatches; whole and split
backwards, some items already fused) that the validator accepts are fused with
``fuse_schedule_tasks`` under a random transfer and launch cost; the result must pass
the validator, keep every rank's task order, start no task later and end no later
under the same costs, and save exactly one launch cost of busy time per launch saved.
"""

from __future__ import annotations

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from schedule_strategies import RandomSchedule, random_schedules

import jaxpp_mlir as pp
from jaxpp_mlir.schedules import fuse_schedule_tasks, simulate_tasks

EXAMPLES = 300


def _valid(s: RandomSchedule) -> bool:
    try:
        pp.CustomSchedule(s.rows, s.num_stages, stage_rank=s.placement).validate(s.num_microbatches)
    except pp.ScheduleError:
        return False
    return True


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    random_schedules(mutations=("none",)),
    st.sampled_from([0.0, 0.5, 3.0]),
    st.sampled_from([0.0, 0.1, 1.0]),
)
def test_fusion_delays_no_task(s, transfer_cost, launch_cost):
    assume(_valid(s))
    placement = s.placement.__getitem__
    common = {
        "num_stages": s.num_stages,
        "num_microbatches": s.num_microbatches,
        "stage_rank": placement,
        "transfer_cost": transfer_cost,
    }
    fused = fuse_schedule_tasks(s.rows, launch_cost=launch_cost, **common)
    before = simulate_tasks(s.rows, launch_cost=launch_cost, **common)
    after = simulate_tasks(fused, launch_cost=launch_cost, **common)
    for old, new in zip(s.rows, fused, strict=True):
        assert [t for item in new for t in item.parts] == [t for item in old for t in item.parts]
    for task, start in before.start_times.items():
        assert after.start_times[task] <= start + 1e-9
    assert after.makespan <= before.makespan + 1e-9
    saved = sum(map(len, s.rows)) - sum(map(len, fused))
    assert abs(sum(before.busy_time) - sum(after.busy_time) - saved * launch_cost) < 1e-6
