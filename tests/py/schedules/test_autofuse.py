"""Automatic task fusion decided on schedules alone (no JAX): which items become one launch."""

from __future__ import annotations

import pytest

import jaxpp_mlir as pp
from jaxpp_mlir.schedules import UNIT_COSTS, autofuse
from jaxpp_mlir.schedules.autofuse import AutoFused, fuse_schedule_tasks
from jaxpp_mlir.schedules.check import check_tasks
from jaxpp_mlir.schedules.task import BWD, BWD_I, BWD_W, FWD, FusedTask, Task

LAUNCH = autofuse.DEFAULT_LAUNCH_COST


def groups(rows) -> list[list[tuple[Task, ...]]]:
    """Each rank's fused items, as tuples of tasks."""
    return [[item.parts for item in row if isinstance(item, FusedTask)] for row in rows]


def check_fusion_is_sound(schedule: pp.Schedule, num_microbatches: int) -> None:
    """The fused lists pass the checks, keep each rank's task order and delay nothing."""
    plain = schedule.tasks(num_microbatches)
    fused = AutoFused(schedule)
    rows = fused.tasks(num_microbatches)
    check_tasks(
        rows,
        num_stages=schedule.num_stages,
        num_microbatches=num_microbatches,
        stage_rank=schedule.stage_rank,
    )
    fused.validate(num_microbatches)
    for before, after in zip(plain, rows, strict=True):
        assert [t for item in after for t in item.parts] == [t for i in before for t in i.parts]
    baseline = schedule.simulate(num_microbatches, launch_cost=LAUNCH)
    result = fused.simulate(num_microbatches, launch_cost=LAUNCH)
    for task, start in baseline.start_times.items():
        assert result.start_times[task] <= start + 1e-9, task
    launches_saved = sum(map(len, plain)) - sum(map(len, rows))
    assert result.makespan <= baseline.makespan + 1e-9
    busy_saved = sum(baseline.busy_time) - sum(result.busy_time)
    assert busy_saved == pytest.approx(LAUNCH * launches_saved)


SCHEDULES = [
    (pp.GPipe(4), 8),
    (pp.GPipe(2), 3),
    (pp.Std1F1B(4), 8),
    (pp.Std1F1B(2), 5),
    (pp.Eager1F1B(4), 8),
    (pp.Interleaved1F1B(8, 4), 8),
    (pp.Interleaved1F1B(8, 4, fuse_steady_state=True), 8),
    (pp.Interleaved1F1B(2, 1), 4),
    (pp.ZeroBubble(4), 8),
    (pp.ZeroBubble(2), 3),
    (pp.DualPipeV(6, 3), 6),
    (pp.Std1F1B(1), 4),
]


@pytest.mark.parametrize(("schedule", "num_microbatches"), SCHEDULES, ids=str)
def test_fused_schedule_is_valid_and_delays_nothing(schedule, num_microbatches):
    check_fusion_is_sound(schedule, num_microbatches)


def test_std1f1b_fuses_last_stage_pairs_and_stage0_steady_state():
    """The last stage's forward feeds only its own backward: each (F, B) pair fuses.
    Stage 0's backward sends nothing and its forward receives nothing, so each
    steady-state backward of rank 0 fuses with the forward after it. The middle ranks'
    backwards are awaited upstream and their forwards wait for input: nothing fuses."""
    rows = AutoFused(pp.Std1F1B(4)).tasks(8)
    found = groups(rows)
    assert found[3] == [(Task(3, FWD, m), Task(3, BWD, m)) for m in range(8)]
    assert found[0] == [(Task(0, BWD, m), Task(0, FWD, m + 4)) for m in range(4)]
    assert found[1] == found[2] == []


def test_gpipe_fuses_only_the_turn_of_the_last_stage():
    """GPipe's last rank turns from its last forward straight to its first backward,
    which needs nothing from another rank; every other back-to-back pair either waits
    for input or holds back an output another rank waits for."""
    found = groups(AutoFused(pp.GPipe(4)).tasks(8))
    assert found == [[], [], [], [(Task(3, FWD, 7), Task(3, BWD, 0))]]


def test_interleaved_fuses_each_microbatch_of_the_last_stage():
    found = groups(AutoFused(pp.Interleaved1F1B(8, 4)).tasks(8))
    assert found[3] == [(Task(7, FWD, m), Task(7, BWD, m)) for m in range(8)]


def test_zero_bubble_fuses_weight_gradients_that_nobody_waits_for():
    """Stage 0's input gradient goes nowhere, so each bwd_i of rank 0 fuses with the
    bwd_w after it; the last stage's forward feeds only its own bwd_i."""
    rows = AutoFused(pp.ZeroBubble(4)).tasks(8)
    items = {task: item.parts for row in rows for item in row for task in item.parts}
    for m in range(8):
        assert Task(0, BWD_W, m) in items[Task(0, BWD_I, m)]
        assert Task(3, BWD_I, m) in items[Task(3, FWD, m)]
    # the last stage's input gradients are awaited by stage 2: never held back by a forward
    for m in range(7):
        assert Task(3, FWD, m + 1) not in items[Task(3, BWD_I, m)]


@pytest.mark.parametrize("schedule", [pp.Std1F1B(1), pp.Interleaved1F1B(2, 1)], ids=str)
def test_single_rank_step_is_one_launch(schedule):
    plain = schedule.tasks(4)
    rows = AutoFused(schedule).tasks(4)
    assert rows == [[FusedTask(tuple(task for item in plain[0] for task in item.parts))]]


def test_max_parts_caps_each_fused_item():
    rows = AutoFused(pp.Std1F1B(1), max_parts=3).tasks(4)
    f, b = FWD, BWD
    assert [item.parts for item in rows[0]] == [
        (Task(0, f, 0), Task(0, b, 0), Task(0, f, 1)),
        (Task(0, b, 1), Task(0, f, 2), Task(0, b, 2)),
        (Task(0, f, 3), Task(0, b, 3)),
    ]


def test_existing_fused_items_are_kept_and_extended():
    schedule = pp.Interleaved1F1B(8, 4, fuse_steady_state=True)
    given = {item for row in schedule.tasks(8) for item in row if isinstance(item, FusedTask)}
    rows = AutoFused(schedule).tasks(8)
    for item in given:
        holder = next(i for row in rows for i in row if item.parts[0] in i.parts)
        start = holder.parts.index(item.parts[0])
        assert holder.parts[start : start + len(item.parts)] == item.parts


def test_transfer_cost_is_part_of_the_decision():
    """A long transfer changes the times the decision reads; the result still saves
    launches and delays nothing under the same transfer cost."""
    schedule = pp.GPipe(2)
    rows = fuse_schedule_tasks(
        schedule.tasks(4),
        num_stages=2,
        num_microbatches=4,
        stage_rank=schedule.stage_rank,
        transfer_cost=3.0,
    )
    baseline = pp.CustomSchedule(schedule.tasks(4), 2).simulate(
        4, transfer_cost=3.0, launch_cost=LAUNCH
    )
    result = pp.CustomSchedule(rows, 2).simulate(4, transfer_cost=3.0, launch_cost=LAUNCH)
    assert result.makespan < baseline.makespan
    for task, start in baseline.start_times.items():
        assert result.start_times[task] <= start + 1e-9


def test_decisions_that_delay_a_task_are_taken_back(monkeypatch):
    """Fusing GPipe's stage-0 forwards would hold back what rank 1 waits for: the
    simulation after the decision catches it and keeps only harmless groups."""
    schedule = pp.GPipe(2)
    plain = schedule.tasks(3)

    def greedy(per_rank, *args):
        return [[[0, 1, 2], [3], [4], [5]], [[0], [1], [2, 3], [4], [5]]]

    monkeypatch.setattr(autofuse, "_decide", greedy)
    rows = AutoFused(schedule).tasks(3)
    assert rows[0] == plain[0]  # the harmful group on rank 0 is dropped
    assert groups(rows)[1] == [(Task(1, FWD, 2), Task(1, BWD, 0))]


def test_launch_cost_in_the_simulator():
    plain = pp.Std1F1B(1)
    costs = UNIT_COSTS
    assert plain.simulate(4, costs=costs).makespan == 8.0
    assert plain.simulate(4, costs=costs, launch_cost=0.5).makespan == 12.0
    assert AutoFused(plain).simulate(4, costs=costs, launch_cost=0.5).makespan == 8.5
    with pytest.raises(pp.ScheduleError, match="launch_cost must be >= 0, got -1"):
        plain.simulate(4, launch_cost=-1)


def test_bad_arguments_are_named():
    with pytest.raises(pp.ScheduleError, match="AutoFused wraps a jaxpp_mlir schedule, got str"):
        AutoFused("Std1F1B")
    with pytest.raises(pp.ScheduleError, match="max_parts must be >= 1, got 0"):
        AutoFused(pp.Std1F1B(2), max_parts=0).tasks(2)
    with pytest.raises(pp.ScheduleError, match="num_microbatches must be >= 1"):
        AutoFused(pp.Std1F1B(2)).tasks(0)


def test_placement_and_repr_follow_the_wrapped_schedule():
    inner = pp.DualPipeV(6, 3)
    fused = AutoFused(inner)
    assert [fused.stage_rank(s) for s in range(6)] == [inner.stage_rank(s) for s in range(6)]
    assert repr(fused) == f"AutoFused({inner!r})"
    assert AutoFused(pp.ZeroBubble(2)).splits_backward
    assert isinstance(pp.AutoFused(inner), pp.Schedule)
