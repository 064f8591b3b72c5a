"""``PreparedTasks.summarize``: a planner's view of a simulation (makespan, bubble, busy
times, peaks, launches), the same floats as ``simulate`` gives for the same costs."""

from __future__ import annotations

import random

import pytest

from jaxpp_mlir.errors import ScheduleError
from jaxpp_mlir.planner.segment_costs import SegmentCosts
from jaxpp_mlir.planner.stage_split import DEFAULT_MACHINE, _SplitSimulator, candidate_splits
from jaxpp_mlir.schedules import (
    AutoFused,
    CustomSchedule,
    DualPipeV,
    GPipe,
    Interleaved1F1B,
    Std1F1B,
    ZeroBubble,
)
from jaxpp_mlir.schedules.task import BWD, FWD, Task

SCHEDULES = [
    GPipe(4),
    Std1F1B(4),
    Interleaved1F1B(8, mpmd_dim=4),
    ZeroBubble(4),
    DualPipeV(8, mpmd_dim=4),
    AutoFused(Std1F1B(4)),  # fused items: their parts run back to back
]


def _same_numbers(prepared, costs, *, transfer_cost, launch_cost):
    by_task = dict(zip(prepared.arrays.tasks, costs, strict=True))
    full = prepared.simulate(
        lambda task: by_task[task], transfer_cost=transfer_cost, launch_cost=launch_cost
    )
    summary = prepared.summarize(costs, transfer_cost=transfer_cost, launch_cost=launch_cost)
    assert summary.num_ranks == full.num_ranks
    assert summary.makespan == full.makespan
    assert summary.bubble_fraction == full.bubble_fraction
    assert summary.busy_time == full.busy_time
    assert summary.peak_in_flight == full.peak_in_flight
    assert summary.launches == full.launches


@pytest.mark.parametrize("schedule", SCHEDULES, ids=repr)
@pytest.mark.parametrize("launch_cost", [0.0, 5e-5])
def test_summary_is_the_simulations_numbers(schedule, launch_cost):
    prepared = schedule.prepare(8)
    generator = random.Random(repr(schedule))
    for _ in range(5):
        costs = [generator.uniform(0.5, 2.0) for _ in prepared.arrays.tasks]
        _same_numbers(prepared, costs, transfer_cost=0.1, launch_cost=launch_cost)


@pytest.mark.parametrize("schedule", SCHEDULES, ids=repr)
def test_free_tasks_take_the_peaks_from_the_tasks_times(schedule):
    # Zero-cost tasks (and no launch cost) can end when a later task starts: the peaks
    # then come from the times, not from the lists' order.
    prepared = schedule.prepare(8)
    generator = random.Random(repr(schedule))
    costs = [generator.choice([0.0, 1.0]) for _ in prepared.arrays.tasks]
    for launch_cost in (0.0, 1.0):
        _same_numbers(prepared, costs, transfer_cost=0.0, launch_cost=launch_cost)


def test_a_bad_cost_names_its_task():
    prepared = Std1F1B(2).prepare(2)
    first = prepared.arrays.tasks[0]
    count = len(prepared.arrays.tasks)
    with pytest.raises(ScheduleError, match=rf"cost of {first} is negative: -1.0"):
        prepared.summarize([-1.0] + [1.0] * (count - 1))
    with pytest.raises(ScheduleError, match=rf"cost of {first} is not a number"):
        prepared.summarize([float("nan")] + [1.0] * (count - 1))
    with pytest.raises(ScheduleError, match=rf"3 task costs for {count} tasks"):
        prepared.summarize([1.0] * 3)
    with pytest.raises(ScheduleError, match="launch_cost must be >= 0"):
        prepared.summarize([1.0] * count, launch_cost=-1.0)


def _stuck() -> CustomSchedule:
    """Rank 0 waits for stage 1's backward of microbatch 0 before it sends microbatch 1's
    forward, which rank 1 waits for first."""

    def forward(stage, microbatch):
        return Task(stage, FWD, microbatch)

    def backward(stage, microbatch):
        return Task(stage, BWD, microbatch)

    return CustomSchedule(
        [
            [forward(0, 0), backward(0, 0), forward(0, 1), backward(0, 1)],
            [forward(1, 0), forward(1, 1), backward(1, 0), backward(1, 1)],
        ],
        num_stages=2,
    )


def test_a_deadlock_is_the_same_error_from_summaries():
    prepared = _stuck().prepare(2)
    with pytest.raises(ScheduleError) as full:
        prepared.simulate()
    assert "deadlock" in str(full.value)
    count = len(prepared.arrays.tasks)
    with pytest.raises(ScheduleError) as summary:
        prepared.summarize([1.0] * count)
    with pytest.raises(ScheduleError) as many:
        prepared.summarize_many([[1.0] * count], transfer_costs=[0.0])
    assert str(summary.value) == str(many.value) == str(full.value)


@pytest.mark.parametrize("schedule", [Std1F1B(4), ZeroBubble(4), AutoFused(GPipe(4))], ids=repr)
def test_split_estimates_cost_each_task_as_its_stage(schedule):
    # The planner's per-task costs: a forward its stage's forward seconds, a backward
    # its backward, each half of a split backward half of it.
    generator = random.Random(0)
    segments = 7
    costs = SegmentCosts(
        forward_flops=tuple(generator.uniform(1e6, 1e8) for _ in range(segments)),
        backward_flops=tuple(generator.uniform(1e6, 1e8) for _ in range(segments)),
        forward_bytes=(1e5,) * segments,
        backward_bytes=(1e5,) * segments,
        param_bytes=(1000,) * segments,
        activation_bytes=(100,) * segments,
        boundary_bytes=(64,) * (segments - 1),
    )
    simulator = _SplitSimulator(schedule, costs, 8, DEFAULT_MACHINE)
    prepared = simulator.prepared
    for split in candidate_splits(costs, schedule.num_stages)[:20]:
        estimate = simulator.estimate(split)
        fwd, bwd = estimate.stage_forward_s, estimate.stage_backward_s

        def cost(task: Task, fwd=fwd, bwd=bwd) -> float:
            if task.kind == FWD:
                return fwd[task.stage]
            return bwd[task.stage] if task.kind == BWD else bwd[task.stage] / 2

        full = prepared.simulate(
            cost,
            transfer_cost=DEFAULT_MACHINE.link_latency_s + 64 / DEFAULT_MACHINE.link_bytes_per_s,
            launch_cost=DEFAULT_MACHINE.launch_s,
        )
        assert estimate.bubble == full.bubble_fraction
        assert estimate.launches == full.launches
        assert estimate.step_s == max(
            full.makespan,
            sum(full.busy_time) / full.num_ranks,
            full.launches * DEFAULT_MACHINE.launch_s,
        )


@pytest.mark.parametrize("schedule", SCHEDULES, ids=repr)
@pytest.mark.parametrize("launch_cost", [0.0, 5e-5])
def test_many_costings_at_once_are_each_costings_summary(schedule, launch_cost):
    prepared = schedule.prepare(8)
    generator = random.Random(repr(schedule) + str(launch_cost))
    count = len(prepared.arrays.tasks)
    rows = [[generator.uniform(0.5, 2.0) for _ in range(count)] for _ in range(5)]
    rows.append([generator.choice([0.0, 1.0]) for _ in range(count)])  # free tasks too
    transfers = [generator.uniform(0.0, 0.3) for _ in rows]
    many = prepared.summarize_many(rows, transfer_costs=transfers, launch_cost=launch_cost)
    for row, transfer, summary in zip(rows, transfers, many, strict=True):
        assert summary == prepared.summarize(row, transfer_cost=transfer, launch_cost=launch_cost)


def test_many_costings_check_their_inputs():
    prepared = Std1F1B(2).prepare(2)
    count = len(prepared.arrays.tasks)
    first = prepared.arrays.tasks[0]
    assert prepared.summarize_many([[1.0] * count][:0], transfer_costs=[]) == []
    with pytest.raises(ScheduleError, match=rf"cost of {first} is negative: -2.0"):
        prepared.summarize_many(
            [[1.0] * count, [-2.0] + [1.0] * (count - 1)], transfer_costs=[0, 0]
        )
    with pytest.raises(ScheduleError, match="one row of task costs and one transfer cost"):
        prepared.summarize_many([[1.0] * count], transfer_costs=[0.0, 0.0])
    with pytest.raises(ScheduleError, match="one row of task costs and one transfer cost"):
        prepared.summarize_many([[1.0] * (count + 1)], transfer_costs=[0.0])
    with pytest.raises(ScheduleError, match="transfer_cost must be >= 0"):
        prepared.summarize_many([[1.0] * count], transfer_costs=[-1.0])


def test_many_costings_are_timed_in_bounded_chunks(monkeypatch):
    from jaxpp_mlir.schedules import simulate

    prepared = Std1F1B(4).prepare(8)
    items = len(prepared.arrays.items)
    monkeypatch.setattr(simulate, "_BATCH_ELEMENTS", 2 * items)  # two costings a chunk
    chunks = []
    real = simulate.PreparedTasks._summarize_many
    monkeypatch.setattr(
        simulate.PreparedTasks,
        "_summarize_many",
        lambda self, costs, *rest: chunks.append(len(costs)) or real(self, costs, *rest),
    )
    generator = random.Random(5)
    rows = [[generator.uniform(0.5, 2.0) for _ in prepared.arrays.tasks] for _ in range(5)]
    many = prepared.summarize_many(rows, transfer_costs=[0.1] * 5, launch_cost=1e-3)
    assert chunks == [2, 2, 1]
    assert many == [prepared.summarize(r, transfer_cost=0.1, launch_cost=1e-3) for r in rows]


def test_the_schedules_a_planner_weighs_share_their_splits_stages(monkeypatch):
    from jaxpp_mlir.planner import plan_pipeline, stage_split

    made = []
    real = stage_split.SplitStages._stage
    monkeypatch.setattr(
        stage_split.SplitStages,
        "_stage",
        lambda self, split: made.append(split) or real(self, split),
    )
    segments = 9
    costs = SegmentCosts(
        forward_flops=tuple(float(1e6 * (1 + k % 3)) for k in range(segments)),
        backward_flops=tuple(float(2e6 * (1 + k % 3)) for k in range(segments)),
        forward_bytes=(1e5,) * segments,
        backward_bytes=(1e5,) * segments,
        param_bytes=(1000,) * segments,
        activation_bytes=(100,) * segments,
        boundary_bytes=(64,) * (segments - 1),
    )
    plan = plan_pipeline.plan_candidates(costs, 8, 2)
    assert len({len(c.stage_split) for c in plan}) > 1  # schedules of several stage counts
    assert len(made) == len(set(made))  # each split's stages made once
    kinds = list(plan_pipeline.schedule_kinds(segments, 2))
    weighed = sum(len(stage_split.candidate_splits(costs, k.num_stages)) for k in kinds)
    assert len(made) < weighed  # the schedules of one stage count shared them
