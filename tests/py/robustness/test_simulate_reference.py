"""Property test: the simulator gives what the simulator before issue 29 gave.

``simulate_reference.simulate_tasks`` is the simulator as it was before it was made
fast (sweeps over the ranks until none progresses, ``Task`` dicts everywhere). On random
per-rank task lists (valid ones, and ones with one random change, so that both must
also fail alike: same ``ScheduleError`` text, deadlocks included), random per-kind or
per-task costs, transfer and launch costs, both must return equal results, field by
field (the same floats, the same timelines and peaks), and so on the built-in schedules.
"""

from __future__ import annotations

import dataclasses

import pytest
import simulate_reference
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schedule_strategies import RandomSchedule, random_schedules

import jaxpp_mlir as pp
from jaxpp_mlir.schedules import simulate_tasks

EXAMPLES = 400

_KIND_COSTS = st.fixed_dictionaries(
    {},
    optional={
        kind: st.sampled_from([0.0, 0.25, 1.0, 2.5, 3.0])
        for kind in ("fwd", "bwd", "bwd_i", "bwd_w")
    },
)


def _per_task_costs(seed: int):
    return lambda task: ((task.stage * 7 + task.microbatch * 3 + seed) % 5) * 0.3 + 0.1


def _outcome(simulate, s: RandomSchedule, **options):
    try:
        return simulate(
            s.rows,
            num_stages=s.num_stages,
            num_microbatches=s.num_microbatches,
            stage_rank=s.placement.__getitem__,
            **options,
        )
    except pp.ScheduleError as error:
        return str(error)


def _fields(result) -> object:
    if isinstance(result, str):
        return result
    return {field.name: getattr(result, field.name) for field in dataclasses.fields(result)}


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    random_schedules(),
    st.one_of(st.none(), _KIND_COSTS, st.integers(0, 9).map(_per_task_costs)),
    st.sampled_from([0.0, 0.5, 3.0]),
    st.sampled_from([0.0, 0.1, 1.0]),
)
def test_simulator_matches_the_one_before(s, costs, transfer_cost, launch_cost):
    options = {"costs": costs, "transfer_cost": transfer_cost, "launch_cost": launch_cost}
    new = _outcome(simulate_tasks, s, **options)
    old = _outcome(simulate_reference.simulate_tasks, s, **options)
    assert _fields(new) == _fields(old)


_BUILT_IN_CASES = [
    (schedule, num_microbatches)
    for schedule in (
        pp.GPipe(4),
        pp.Std1F1B(5),
        pp.Eager1F1B(4),
        pp.Interleaved1F1B(8, 4),
        pp.Interleaved1F1B(6, 3, fuse_steady_state=True),
        pp.KimiK2(8, 4),
        pp.ZeroBubble(4),
        pp.DualPipeV(8, 4),
    )
    for num_microbatches in (1, 7, 16)
    # DualPipeV runs an even count of at least its rank count: 16 only.
    if not (isinstance(schedule, pp.DualPipeV) and num_microbatches < 16)
]


def test_dual_pipe_v_refuses_the_counts_left_out():
    for num_microbatches in (1, 7):
        with pytest.raises(pp.ScheduleError):
            pp.DualPipeV(8, 4).tasks(num_microbatches)


@pytest.mark.parametrize(("schedule", "num_microbatches"), _BUILT_IN_CASES, ids=lambda v: repr(v))
def test_built_in_schedules_match_the_simulator_before(schedule, num_microbatches):
    per_rank = schedule.tasks(num_microbatches)
    options = {
        "num_stages": schedule.num_stages,
        "num_microbatches": num_microbatches,
        "stage_rank": schedule.stage_rank,
        "costs": {"fwd": 1.0, "bwd": 2.25, "bwd_i": 1.5, "bwd_w": 0.75},
        "transfer_cost": 0.3,
        "launch_cost": 0.05,
    }
    new = simulate_tasks(per_rank, **options)
    old = simulate_reference.simulate_tasks(per_rank, **options)
    assert _fields(new) == _fields(old)
