"""Tests of the pipeline schedules (plain Python data) and their simulator.

Expected figures come from the textbook formulas (p ranks, m microbatches, v virtual
stages per rank): bubble fraction (p-1)/(m+p-1) for GPipe and 1F1B, (p-1)/(v*m+p-1) for
interleaved 1F1B, ZB-H1 bubble (p-1)(F+B-2W), and hand-derived orders for small cases.
"""

from __future__ import annotations

import itertools

import pytest

from jaxpp_mlir.errors import ScheduleError
from jaxpp_mlir.schedules import (
    AutoFused,
    CustomSchedule,
    DualPipeV,
    Eager1F1B,
    FusedTask,
    GPipe,
    Interleaved1F1B,
    Schedule,
    Std1F1B,
    Task,
    ZeroBubble,
)
from jaxpp_mlir.schedules.deps import dependencies
from jaxpp_mlir.schedules.record import (
    name_record,
    recordable,
    schedule_from_record,
    schedule_record,
)

EQUAL = {"fwd": 1, "bwd": 1}
ZB_COSTS = {"fwd": 1, "bwd": 2, "bwd_i": 1, "bwd_w": 1}


def F(stage: int, mb: int) -> Task:
    return Task(stage, "fwd", mb)


def B(stage: int, mb: int) -> Task:
    return Task(stage, "bwd", mb)


def I(stage: int, mb: int) -> Task:  # noqa: E743
    return Task(stage, "bwd_i", mb)


def W(stage: int, mb: int) -> Task:
    return Task(stage, "bwd_w", mb)


def parts(row) -> list[Task]:
    return [task for item in row for task in item.parts]


def _cases() -> list[tuple[Schedule, int]]:
    cases: list[tuple[Schedule, int]] = []
    for stages, mbs in itertools.product((1, 2, 3, 4, 5), (1, 2, 3, 5, 7, 8)):
        for cls in (GPipe, Std1F1B, Eager1F1B, ZeroBubble):
            cases.append((cls(stages), mbs))
    for stages, ranks in ((1, 1), (2, 1), (4, 2), (6, 2), (6, 3), (4, 4), (8, 4), (12, 3)):
        for rounds in (1, 2, 3):
            for fuse in (False, True):
                cases.append(
                    (Interleaved1F1B(stages, ranks, fuse_steady_state=fuse), rounds * ranks)
                )
    for ranks in (1, 2, 3, 4):
        for extra in (0, 1, 3):
            for split, fuse in itertools.product((True, False), repeat=2):
                cases.append((DualPipeV(2 * ranks, ranks, split, fuse), 2 * ranks + extra))
    return cases


CASES = _cases()
CASE_IDS = [f"{sched!r}-m{mbs}" for sched, mbs in CASES]


# -- tasks --------------------------------------------------------------------------------


def test_task_str() -> None:
    assert str(Task(2, "fwd", 0)) == "fwd_2__0"
    assert str(Task(0, "bwd_w", 11)) == "bwd_w_0__11"
    assert str(FusedTask((F(3, 0), B(3, 0)))) == "FusedTask(fwd_3__0, bwd_3__0)"
    assert FusedTask([F(3, 0), B(3, 0)]).tasks == (F(3, 0), B(3, 0))
    assert Task(1, "bwd_i", 2).label == "I1.2"


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: Task(0, "forward", 0), "kind must be one of"),
        (lambda: Task(-1, "fwd", 0), "stage must be a non-negative int"),
        (lambda: Task(0, "fwd", 1.0), "microbatch must be a non-negative int"),
        (lambda: FusedTask(()), "at least one Task"),
        (lambda: FusedTask((F(0, 0), "bwd_0__0")), "parts must be Task"),
        (lambda: FusedTask((F(0, 0), F(0, 0))), "same task twice"),
    ],
)
def test_task_rejects_bad_fields(make, match: str) -> None:
    with pytest.raises(ScheduleError, match=match):
        make()


# -- every schedule ------------------------------------------------------------------------


@pytest.mark.parametrize("sched, mbs", CASES, ids=CASE_IDS)
def test_rank_lists_hold_exactly_their_stages(sched: Schedule, mbs: int) -> None:
    per_rank = sched.tasks(mbs)
    assert len(per_rank) == sched.mpmd_dim
    for rank, row in enumerate(per_rank):
        tasks = parts(row)
        assert len(tasks) == len(set(tasks)), f"rank {rank} runs a task twice"
        stages = {stage for stage in range(sched.num_stages) if sched.stage_rank(stage) == rank}
        assert {task.stage for task in tasks} == stages
        for stage, mb in itertools.product(stages, range(mbs)):
            kinds = {task.kind for task in tasks if (task.stage, task.microbatch) == (stage, mb)}
            assert kinds in ({"fwd", "bwd"}, {"fwd", "bwd_i", "bwd_w"}), (stage, mb, kinds)
            if not sched.splits_backward:
                assert kinds == {"fwd", "bwd"}
            elif not isinstance(sched, DualPipeV):  # DualPipeV splits only some backwards
                assert kinds == {"fwd", "bwd_i", "bwd_w"}
        assert {task.microbatch for task in tasks} == set(range(mbs))


@pytest.mark.parametrize("sched, mbs", CASES, ids=CASE_IDS)
def test_validate_and_dependencies_hold_in_simulation(sched: Schedule, mbs: int) -> None:
    sched.validate(mbs)
    result = sched.simulate(mbs, costs=ZB_COSTS, transfer_cost=0.5)
    present = set(result.start_times)
    for task, start in result.start_times.items():
        for dep in dependencies(task, sched.num_stages, present):
            hop = 0.5 if sched.stage_rank(dep.stage) != sched.stage_rank(task.stage) else 0.0
            assert start >= result.end_times[dep] + hop - 1e-9, (task, dep)
    for rank, timeline in enumerate(result.timeline):
        assert [item for _, _, item in timeline] == sched.tasks(mbs)[rank]
        for (_, end, _), (start, _, _) in itertools.pairwise(timeline):
            assert start >= end  # one item at a time, in list order
    idle = result.num_ranks * result.makespan - sum(result.busy_time)
    assert result.bubble_fraction == pytest.approx(idle / (result.num_ranks * result.makespan))


def test_placements() -> None:
    assert [Interleaved1F1B(8, 4).stage_rank(s) for s in range(8)] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert [DualPipeV(8, 4).stage_rank(s) for s in range(8)] == [0, 1, 2, 3, 3, 2, 1, 0]
    assert [Std1F1B(3).stage_rank(s) for s in range(3)] == [0, 1, 2]
    assert DualPipeV(8, 4).stages_on_rank(0) == [0, 7]
    with pytest.raises(ScheduleError, match="stage 4 out of range"):
        Std1F1B(4).stage_rank(4)


def test_repr() -> None:
    assert repr(Std1F1B(4)) == "Std1F1B(num_stages=4)"
    assert repr(Interleaved1F1B(8, 4)) == (
        "Interleaved1F1B(num_stages=8, mpmd_dim=4, fuse_steady_state=False)"
    )
    assert "DualPipeV(num_stages=8, mpmd_dim=4" in repr(DualPipeV(8, 4))


# -- hand-derived orders -------------------------------------------------------------------


def test_gpipe_order() -> None:
    assert GPipe(2).tasks(3) == [
        [F(0, 0), F(0, 1), F(0, 2), B(0, 0), B(0, 1), B(0, 2)],
        [F(1, 0), F(1, 1), F(1, 2), B(1, 0), B(1, 1), B(1, 2)],
    ]


def test_std_1f1b_order() -> None:
    # warm-up min(p-1-r, m) forwards, then 1F1B, then cool-down (p=3, m=4)
    assert Std1F1B(3).tasks(4) == [
        [F(0, 0), F(0, 1), F(0, 2), B(0, 0), F(0, 3), B(0, 1), B(0, 2), B(0, 3)],
        [F(1, 0), F(1, 1), B(1, 0), F(1, 2), B(1, 1), F(1, 3), B(1, 2), B(1, 3)],
        [F(2, 0), B(2, 0), F(2, 1), B(2, 1), F(2, 2), B(2, 2), F(2, 3), B(2, 3)],
    ]


def test_eager_1f1b_order() -> None:
    # warm-up min(2(p-1-r)+1, m) forwards, then alternate B/F, then drain (p=2, m=4)
    assert Eager1F1B(2).tasks(4) == [
        [F(0, 0), F(0, 1), F(0, 2), B(0, 0), F(0, 3), B(0, 1), B(0, 2), B(0, 3)],
        [F(1, 0), B(1, 0), F(1, 1), B(1, 1), F(1, 2), B(1, 2), F(1, 3), B(1, 3)],
    ]


def test_interleaved_order_and_last_stage_fusion() -> None:
    # p=2, v=2, m=2: rank 0 warms up (v-1)p + 2(p-1) = 4 = all its forwards; rank 1 warms
    # up 2 forwards, then pairs F3/B3 (last stage, fused), then drains chunk 0.
    fused = [FusedTask((F(3, 0), B(3, 0))), FusedTask((F(3, 1), B(3, 1)))]
    assert Interleaved1F1B(4, 2).tasks(2) == [
        [F(0, 0), F(0, 1), F(2, 0), F(2, 1), B(2, 0), B(2, 1), B(0, 0), B(0, 1)],
        [F(1, 0), F(1, 1), *fused, B(1, 0), B(1, 1)],
    ]


@pytest.mark.parametrize("stages, ranks, mbs", [(4, 2, 4), (8, 4, 8), (6, 3, 6), (4, 4, 8)])
def test_interleaved_fusion(stages: int, ranks: int, mbs: int) -> None:
    last = stages - 1
    default = Interleaved1F1B(stages, ranks).tasks(mbs)
    fused = [item for row in default for item in row if isinstance(item, FusedTask)]
    assert fused == [FusedTask((F(last, mb), B(last, mb))) for mb in range(mbs)]
    steady = Interleaved1F1B(stages, ranks, fuse_steady_state=True).tasks(mbs)
    for row, plain in zip(steady, default, strict=True):
        assert parts(row) == parts(plain)  # same order, only grouped
        for item in row:
            if isinstance(item, FusedTask):
                assert [task.kind for task in item.tasks] == ["fwd", "bwd"]
    assert sum(isinstance(item, FusedTask) for row in steady for item in row) > len(fused)


def test_zero_bubble_order() -> None:
    # ZB-H1 (p=3, m=4): rank r defers r weight gradients; 1F1B warm-up.
    rows = ZeroBubble(3).tasks(4)
    assert rows[0] == [
        *(F(0, 0), F(0, 1), F(0, 2)),
        *(I(0, 0), W(0, 0), F(0, 3)),
        *(I(0, 1), W(0, 1), I(0, 2), W(0, 2), I(0, 3), W(0, 3)),
    ]
    assert rows[2] == [
        *(F(2, 0), I(2, 0), F(2, 1), I(2, 1), F(2, 2)),
        *(I(2, 2), W(2, 0), F(2, 3), I(2, 3), W(2, 1), W(2, 2), W(2, 3)),
    ]
    assert ZeroBubble(3).splits_backward and not Std1F1B(3).splits_backward


# -- textbook figures ----------------------------------------------------------------------

P_M = [(p, m) for p in (1, 2, 3, 4, 6) for m in (1, 2, 3, 4, 5, 8, 12)]


@pytest.mark.parametrize("p, m", P_M)
@pytest.mark.parametrize("cls", [GPipe, Std1F1B, Eager1F1B])
def test_gpipe_1f1b_bubble(cls, p: int, m: int) -> None:
    for costs in (EQUAL, None):
        result = cls(p).simulate(m, costs=costs)
        assert result.bubble_fraction == pytest.approx((p - 1) / (m + p - 1))
    assert cls(p).simulate(m, costs=EQUAL).makespan == 2 * (m + p - 1)


@pytest.mark.parametrize("p, m", P_M)
def test_peak_in_flight(p: int, m: int) -> None:
    assert GPipe(p).simulate(m).peak_in_flight == [m] * p
    assert Std1F1B(p).simulate(m).peak_in_flight == [min(m, p - r) for r in range(p)]
    eager = Eager1F1B(p).simulate(m).peak_in_flight
    assert eager == [min(m, 2 * (p - 1 - r) + 1) for r in range(p)]


@pytest.mark.parametrize("p, v, rounds", list(itertools.product((2, 3, 4), (2, 3), (1, 2, 3))))
def test_interleaved_bubble(p: int, v: int, rounds: int) -> None:
    m = rounds * p
    for fuse in (False, True):
        result = Interleaved1F1B(v * p, p, fuse_steady_state=fuse).simulate(m, costs=EQUAL)
        assert result.bubble_fraction == pytest.approx((p - 1) / (v * m + p - 1))
        assert result.bubble_fraction < Std1F1B(p).simulate(m, costs=EQUAL).bubble_fraction


@pytest.mark.parametrize("p, m", P_M)
def test_zero_bubble_beats_1f1b(p: int, m: int) -> None:
    zb = ZeroBubble(p).simulate(m, costs=ZB_COSTS)
    std = Std1F1B(p).simulate(m, costs=ZB_COSTS)
    assert std.makespan == 3 * (m + p - 1)  # 1F1B bubble (p-1)(F+B)
    if p > 1:
        assert zb.makespan < std.makespan
    if m >= p:
        assert zb.makespan == 3 * m + (p - 1)  # ZB-H1 bubble (p-1)(F+B-2W)
    assert max(zb.peak_in_flight) == max(std.peak_in_flight) == min(m, p)


def test_dual_pipe_v_beats_1f1b_on_same_stages() -> None:
    # 8 stages: DualPipeV on 4 ranks against 1F1B on 8 ranks; compare per-rank idle share.
    dpv = DualPipeV(8, 4).simulate(16, costs=ZB_COSTS)
    std = Std1F1B(8).simulate(16, costs=ZB_COSTS)
    assert dpv.bubble_fraction < std.bubble_fraction
    assert DualPipeV(8, 4).splits_backward and not DualPipeV(8, 4, False).splits_backward


# -- simulator -----------------------------------------------------------------------------


@pytest.mark.parametrize("p, m, hop", [(2, 3, 0.5), (4, 8, 1.0), (3, 1, 2.0)])
def test_transfer_cost(p: int, m: int, hop: float) -> None:
    # fill, drain and every hop of the first and last microbatch pay one transfer
    result = GPipe(p).simulate(m, costs=EQUAL, transfer_cost=hop)
    assert result.makespan == pytest.approx(2 * (m + p - 1) + 2 * (p - 1) * hop)


def test_costs_and_fused_tasks() -> None:
    sched = CustomSchedule([[FusedTask((F(0, 0), B(0, 0))), F(0, 1), B(0, 1)]], num_stages=1)
    result = sched.simulate(2)
    assert result.makespan == 6  # fused task costs 1 + 2, then 1 + 2
    assert result.start_times[B(0, 0)] == 1 and result.end_times[B(0, 0)] == 3
    by_stage = GPipe(2).simulate(1, costs=lambda task: 1 + task.stage)
    assert by_stage.makespan == 1 + 2 + 2 + 1
    with pytest.raises(ScheduleError, match="unknown task kind"):
        GPipe(2).simulate(1, costs={"forward": 1})
    with pytest.raises(ScheduleError, match="negative"):
        GPipe(2).simulate(1, costs={"fwd": -1})


def test_fused_outputs_ready_at_group_end() -> None:
    # rank 0 fuses fwd_0 with an unrelated task: rank 1 waits for the whole group
    sched = CustomSchedule(
        [[FusedTask((F(0, 0), F(0, 1))), B(0, 0), B(0, 1)], [F(1, 0), B(1, 0), F(1, 1), B(1, 1)]],
        num_stages=2,
    )
    result = sched.simulate(2, costs=EQUAL)
    assert result.start_times[F(1, 0)] == 2


def test_render_std_1f1b() -> None:
    # p=2, m=2, unit costs: rank 0 F F . B . B / rank 1 . F B F B .
    text = Std1F1B(2).render(2)
    lines = [line.split("|") for line in text.splitlines() if "|" in line]
    rows = {head.strip(): cells.split() for head, cells in lines}
    assert rows["t"] == ["0", "1", "2", "3", "4", "5"]
    assert rows["rank 0"] == ["F0.0", "F0.1", ".", "B0.0", ".", "B0.1"]
    assert rows["rank 1"] == [".", "F1.0", "B1.0", "F1.1", "B1.1", "."]


def test_render_shows_fusion_and_splits() -> None:
    assert "+B3.0" in Interleaved1F1B(4, 2).render(2)
    text = ZeroBubble(2).render(2)
    assert "I1.0" in text and "W0.1" in text


# -- rejected schedules --------------------------------------------------------------------


def test_deadlock_is_reported_with_grid() -> None:
    # rank 0 waits for bwd_1__0 before sending fwd_0__1; rank 1 waits for fwd_0__1 first
    sched = CustomSchedule(
        [[F(0, 0), B(0, 0), F(0, 1), B(0, 1)], [F(1, 0), F(1, 1), B(1, 0), B(1, 1)]],
        num_stages=2,
    )
    with pytest.raises(ScheduleError, match="deadlock") as info:
        sched.validate(2)
    message = str(info.value)
    assert "rank 0 step 1: bwd_0__0 waits for bwd_1__0" in message
    assert "rank 1 step 1: fwd_1__1 waits for fwd_0__1" in message
    assert "rank 0 |  F0.0 >>B0.0" in message
    assert "rank 1 |  F1.0 >>F1.1" in message


def test_microbatches_out_of_order_are_reported_with_grid() -> None:
    # The backwards of stage 0 accumulate gradients microbatch after microbatch.
    sched = CustomSchedule(
        [[F(0, 0), F(0, 1), B(0, 1), B(0, 0)], [F(1, 0), B(1, 0), F(1, 1), B(1, 1)]],
        num_stages=2,
    )
    with pytest.raises(ScheduleError, match="broken dependency") as info:
        sched.validate(2)
    message = str(info.value)
    assert "bwd_0__1 needs bwd_0__0, which comes later on the same rank (step 3)" in message
    assert "rank 0 |  F0.0   F0.1 >>B0.1" in message


def test_broken_dependency_is_reported_with_grid() -> None:
    sched = CustomSchedule([[B(0, 0), F(0, 0)], [F(1, 0), B(1, 0)]], num_stages=2)
    with pytest.raises(ScheduleError, match="broken dependency") as info:
        sched.validate(1)
    message = str(info.value)
    assert "bwd_0__0 needs fwd_0__0, which comes later on the same rank (step 1)" in message
    assert "rank 0 |>>B0.0" in message


def test_broken_dependency_inside_fused_task() -> None:
    sched = CustomSchedule([[F(0, 0), B(0, 0)], [FusedTask((B(1, 0), F(1, 0)))]], num_stages=2)
    with pytest.raises(ScheduleError, match="after it in the same fused task"):
        sched.validate(1)


@pytest.mark.parametrize(
    "rows, match",
    [
        ([[F(0, 0), B(0, 0)], [F(1, 0)]], r"missing bwd_1__0 \(or bwd_i and bwd_w\)"),
        ([[F(0, 0), B(0, 0)], [F(1, 0), B(1, 0), F(0, 0)]], "placed on rank 0, not 1"),
        ([[F(0, 0), B(0, 0), B(0, 0)], [F(1, 0), B(1, 0)]], "duplicate"),
        ([[F(0, 0), B(0, 0)], [F(1, 0), I(1, 0)]], "bwd_i_1__0 has no matching bwd_w_1__0"),
        ([[F(0, 0), B(0, 0), W(0, 0)], [F(1, 0), B(1, 0)]], "both a bwd and a split"),
        ([[F(0, 0), B(0, 0), F(2, 0)], [F(1, 0), B(1, 0)]], "stage 2 out of range"),
    ],
)
def test_malformed_custom_schedules(rows, match: str) -> None:
    with pytest.raises(ScheduleError, match=match) as info:
        CustomSchedule(rows, num_stages=2).validate(1)
    assert "rank 0 |" in str(info.value)


def test_custom_schedule() -> None:
    # a V placement on 2 ranks with a split backward on the last stage
    rows = [
        [F(0, 0), FusedTask((F(3, 0), I(3, 0))), W(3, 0), B(0, 0)],
        [F(1, 0), F(2, 0), B(2, 0), B(1, 0)],
    ]
    sched = CustomSchedule(rows, num_stages=4, stage_rank=[0, 1, 1, 0])
    sched.validate(1)
    assert sched.splits_backward and sched.num_microbatches == 1
    assert sched.stage_rank(3) == 0
    with pytest.raises(ScheduleError, match="defined for 1 microbatches, not 2"):
        sched.tasks(2)
    with pytest.raises(ScheduleError, match="only 2 ranks"):
        CustomSchedule(rows, num_stages=4, stage_rank=lambda s: s)
    with pytest.raises(ScheduleError, match="expected Task or FusedTask"):
        CustomSchedule([["fwd_0__0"]], num_stages=1)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: GPipe(0), "num_stages must be >= 1"),
        (lambda: Std1F1B(2.0), "num_stages must be an int"),
        (lambda: Interleaved1F1B(6, 4), r"num_stages \(6\) must be a multiple of mpmd_dim \(4\)"),
        (lambda: Interleaved1F1B(4, 0), "mpmd_dim must be >= 1"),
        (lambda: Interleaved1F1B(4, 8), r"mpmd_dim \(8\) exceeds num_stages \(4\)"),
        (lambda: DualPipeV(6, 4), "num_stages == 2 \\* mpmd_dim"),
        (lambda: DualPipeV(8, 4).tasks(7), r"num_microbatches >= 2 \* mpmd_dim = 8, got 7"),
        (lambda: Std1F1B(4).tasks(0), "num_microbatches must be >= 1"),
        (lambda: GPipe(2).simulate(2, transfer_cost=-1), "transfer_cost must be >= 0"),
    ],
)
def test_invalid_parameters(make, match: str) -> None:
    with pytest.raises(ScheduleError, match=match):
        make()


def test_schedule_errors_are_value_errors() -> None:
    """A bad schedule argument is a configuration error: JaxPP code catches ValueError."""
    with pytest.raises(ValueError, match="num_stages must be >= 1"):
        GPipe(0)


@pytest.mark.parametrize("mpmd_dim, virtual", [(2, 2), (4, 2), (3, 3)])
@pytest.mark.parametrize("num_microbatches", [1, 2, 3, 5, 6, 7])
def test_interleaved_runs_any_microbatch_count(
    mpmd_dim: int, virtual: int, num_microbatches: int
) -> None:
    """Counts that are not a multiple of mpmd_dim go in one or more uneven rounds."""
    schedule = Interleaved1F1B(mpmd_dim * virtual, mpmd_dim)
    schedule.validate(num_microbatches)  # every task once, on its rank, and no deadlock


@pytest.mark.parametrize("num_microbatches", [1, 3, 4, 8])
def test_kimi_k2_warms_up_one_more_forward_per_rank(num_microbatches: int) -> None:
    from jaxpp_mlir.schedules import KimiK2

    def warmup(schedule) -> list[int]:
        flat = [[t for item in row for t in getattr(item, "tasks", (item,))] for row in schedule]
        return [next(i for i, t in enumerate(row) if t.kind != "fwd") for row in flat]

    kimi, base = KimiK2(8, 4), Interleaved1F1B(8, 4)
    kimi.validate(num_microbatches)
    total = 2 * num_microbatches
    expected = [min(w + 1, total) for w in warmup(base.tasks(num_microbatches))]
    assert warmup(kimi.tasks(num_microbatches)) == expected


def test_interleaved_gpipe_runs_every_forward_first() -> None:
    from jaxpp_mlir.schedules import InterleavedGPipe

    schedule = InterleavedGPipe(4, 2)
    schedule.validate(3)
    for row in schedule.tasks(3):
        kinds = [t.kind for item in row for t in getattr(item, "tasks", (item,))]
        assert kinds == ["fwd"] * 6 + ["bwd"] * 6


def test_interleaved_round_size() -> None:
    schedule = Interleaved1F1B(8, 4)
    assert [schedule.round_size(m) for m in (1, 3, 4, 6, 8, 9, 12)] == [1, 3, 4, 6, 4, 9, 4]


# ------------------------------------------------ schedules recorded in modules


@pytest.mark.parametrize(
    "schedule",
    [
        GPipe(4),
        Std1F1B(3),
        Eager1F1B(4),
        Interleaved1F1B(8, 4),
        Interleaved1F1B(8, 4, fuse_steady_state=True),
        ZeroBubble(4),
        DualPipeV(8, 4),
        AutoFused(Std1F1B(4)),
        AutoFused(GPipe(2), max_parts=3, launch_cost=0.5, costs={"fwd": 1.0, "bwd": 2.0}),
        CustomSchedule(GPipe(2).tasks(2), num_stages=2, stage_rank=[1, 0]),
        CustomSchedule(Interleaved1F1B(4, 2).tasks(4), num_stages=4),  # with fused tasks
    ],
    ids=repr,
)
def test_schedule_from_its_record(schedule):
    record = schedule_record(schedule)
    rebuilt = schedule_from_record(record)
    assert type(rebuilt) is type(schedule) and repr(rebuilt) == repr(schedule)
    microbatches = getattr(schedule, "num_microbatches", 8)  # a CustomSchedule's own count
    assert rebuilt.tasks(microbatches) == schedule.tasks(microbatches)
    stages = range(schedule.num_stages)
    assert [rebuilt.stage_rank(s) for s in stages] == [schedule.stage_rank(s) for s in stages]
    assert rebuilt.splits_backward == schedule.splits_backward


def test_a_record_is_plain_data():
    assert schedule_record(Interleaved1F1B(8, 4)) == {
        "kind": "Interleaved1F1B",
        "num_stages": 8,
        "mpmd_dim": 4,
        "fuse_steady_state": False,
    }
    assert schedule_record(AutoFused(Std1F1B(2))) == {
        "kind": "AutoFused",
        "schedule": {"kind": "Std1F1B", "num_stages": 2},
    }


@pytest.mark.parametrize(
    ("name", "expected"),
    [("GPipe", GPipe(6)), ("Std1F1B", Std1F1B(6)), ("Interleaved1F1B", Interleaved1F1B(6, 3))],
)
def test_schedule_from_a_bare_name(name, expected):
    rebuilt = schedule_from_record(name_record(name), num_stages=6, mpmd_dim=3)
    assert repr(rebuilt) == repr(expected)
    # An older module's text: a bare name is read as that name.
    assert repr(schedule_from_record(name, num_stages=6, mpmd_dim=3)) == repr(expected)


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"kind": "Wavy1F1B", "num_stages": 4}, "unknown schedule 'Wavy1F1B'"),
        ({"kind": "GPipe", "stages": 4}, "unexpected keyword argument 'stages'"),
        ({"num_stages": 4}, "needs a 'kind' name"),
        ({"kind": "GPipe"}, "needs the program's stage count"),
        ({"kind": "AutoFused"}, "needs the 'schedule' it wraps"),
        ("Std1F1B(num_stages=4)", "lower the step again"),
    ],
)
def test_schedule_from_a_bad_record(record, message):
    with pytest.raises(ScheduleError, match=message):
        schedule_from_record(record)


def test_a_built_in_with_more_checks_is_recorded_as_the_built_in():
    class CheckedGPipe(GPipe):  # as compat.schedules: a constructor that checks more
        def __init__(self, num_stages: int) -> None:
            assert num_stages > 1
            super().__init__(num_stages)

    assert schedule_record(CheckedGPipe(2)) == {"kind": "GPipe", "num_stages": 2}


def test_what_a_record_cannot_hold_is_refused():
    class OwnOrder(GPipe):  # another task order under a built-in's name
        def _build(self, num_microbatches):
            return [list(reversed(row)) for row in super()._build(num_microbatches)]

    with pytest.raises(ScheduleError, match="OwnOrder\\) cannot be recorded in the module"):
        schedule_record(OwnOrder(2))
    with pytest.raises(ScheduleError, match="cost function, which cannot be recorded"):
        schedule_record(AutoFused(GPipe(2), costs=lambda task: 1.0))
    with pytest.raises(ScheduleError, match="'Wavy' is not a built-in schedule name"):
        name_record("Wavy")


def test_what_a_record_cannot_hold_is_recorded_as_its_task_lists():
    """Where the microbatch count is known (partition, treduce), a schedule of one's own
    and AutoFused with a cost function become the CustomSchedule of their task lists."""

    class OwnOrder(GPipe):  # another task order under a built-in's name
        def _build(self, num_microbatches):
            return [list(reversed(row)) for row in super()._build(num_microbatches)]

    for schedule in (OwnOrder(2), AutoFused(GPipe(2), costs=lambda task: 1.0)):
        record = recordable(schedule, 3)
        assert record["kind"] == "CustomSchedule"
        decoded = schedule_from_record(record)
        assert decoded.tasks(3) == schedule.tasks(3)
        assert [decoded.stage_rank(s) for s in range(2)] == [0, 1]
    assert recordable(GPipe(2), 3) == {"kind": "GPipe", "num_stages": 2}
    with pytest.raises(ScheduleError, match="OwnOrder\\) cannot be recorded in the module"):
        recordable(OwnOrder(2), None)


@pytest.mark.parametrize(
    ("name", "auto", "suggestion"),
    [
        ("1f1b", False, "did you mean 'Std1F1B' or 'Eager1F1B'?"),
        ("gpipe", False, "did you mean 'GPipe'?"),
        ("Auto", True, "did you mean 'auto'?"),
    ],
)
def test_a_misspelt_schedule_name_suggests_the_names_it_resembles(name, auto, suggestion):
    with pytest.raises(ScheduleError) as info:
        name_record(name, auto=auto)
    assert str(info.value).endswith(suggestion)
    assert ("'auto' (the planner's choice)" in str(info.value)) == auto


@pytest.mark.parametrize("sched", [Std1F1B(4), Interleaved1F1B(8, 4), ZeroBubble(4)], ids=repr)
def test_a_prepared_schedule_simulates_each_cost_as_a_fresh_one(sched: Schedule) -> None:
    """``prepare`` checks and links the task lists once (a planner simulates hundreds of
    stage splits); each simulation of it equals a fresh ``simulate`` with the same costs,
    whatever was simulated before on it."""
    prepared = sched.prepare(8)
    for stage_cost in ([1.0, 2.0, 3.0, 4.0], [4.0, 1.0, 1.0, 0.5], [1.0] * 4):

        def cost(task, stage_cost=stage_cost):
            scale = 2.0 if task.kind == "bwd" else 1.0
            return scale * stage_cost[task.stage % 4]

        again = prepared.simulate(cost, transfer_cost=0.25, launch_cost=0.1)
        fresh = sched.simulate(8, costs=cost, transfer_cost=0.25, launch_cost=0.1)
        assert again.makespan == fresh.makespan
        assert again.busy_time == fresh.busy_time
        assert again.peak_in_flight == fresh.peak_in_flight
        assert again.start_times == fresh.start_times
