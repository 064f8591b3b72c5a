"""More marked segments than stages: partition merges neighbouring segments (issue 29).

A model of 8 marked segments of 1, 1, 4, 4, 1, 1, 1, 1 layers on a 4-stage schedule:
merging two segments per stage (the equal-count split) puts 8 layers in one stage;
the balanced split keeps every stage at 4 layers at most (with 16 microbatches, where
the slowest stage sets the pace; with as many microbatches as stages, 1F1B's first
rank idles enough that loading it more is what the simulation prefers). Forced splits
are honoured, and the merged program computes what plain jax.jit computes.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
import toolkit

import jaxpp_mlir as pp

pytestmark = pytest.mark.numerics

LAYERS = (1, 1, 4, 4, 1, 1, 1, 1)
WIDTH = 32
MICROBATCHES = 16


def _loss(params, microbatch, *, marks: bool = True):
    x, y = microbatch
    layer = 0
    for count in LAYERS:
        for _ in range(count):
            x = jnp.tanh(x @ params[layer])
            layer += 1
        if marks:
            x = pp.pipeline_enter_stage(x)
    return jnp.mean((x - y) ** 2)


def _step(params, xs, ys):
    return pp.treduce(lambda mb: jax.value_and_grad(_loss)(params, mb), (xs, ys), operation=pp.Add)


def _reference(params, xs, ys):
    def body(carry, mb):
        value = jax.value_and_grad(lambda p, m: _loss(p, m, marks=False))(params, mb)
        return jax.tree.map(jnp.add, carry, value), None

    zeros = (jnp.zeros(()), jax.tree.map(jnp.zeros_like, params))
    return jax.lax.scan(body, zeros, (xs, ys))[0]


@pytest.fixture(scope="module")
def case():
    params = [toolkit.normal((WIDTH, WIDTH), seed=i, scale=WIDTH**-0.5) for i in range(sum(LAYERS))]
    xs = toolkit.normal((MICROBATCHES, 4, WIDTH), seed=100)
    ys = toolkit.normal((MICROBATCHES, 4, WIDTH), seed=101)
    lowered = jax.jit(_step).lower(params, xs, ys)
    expected = jax.jit(_reference)(params, xs, ys)
    return lowered, (params, xs, ys), expected, toolkit.make_mesh(4)


def _layers_per_stage(split: tuple[int, ...]) -> list[int]:
    bounds = [sum(split[:s]) for s in range(len(split) + 1)]
    return [sum(LAYERS[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]


def test_balanced_split_keeps_stages_at_four_layers_and_matches_jit(case):
    lowered, args, expected, mesh = case
    program = pp.partition(lowered, mesh=mesh, schedule=pp.Std1F1B(4))
    assert program.num_stages == 4
    assert sum(program.stage_split) == len(LAYERS)
    assert max(_layers_per_stage(program.stage_split)) <= 4, program.stage_split
    assert max(_layers_per_stage((2, 2, 2, 2))) == 8  # what the equal-count split gives
    summary = program.summary()
    assert "segments 0-1" in summary or "segment 0" in summary
    assert "estimated fwd" in summary
    last = program.num_stages - 1
    first_of_last = sum(program.stage_split[:last])
    assert program.stage_ir(last).startswith(
        f"// stage {last}: marked segments {first_of_last}-7 of 8; estimated forward "
    )
    toolkit.assert_matches_reference(program.compile()(*args), expected, toolkit.SEPARATE_PROGRAMS)


@pytest.mark.parametrize("split", [(2, 1, 1, 4), (5, 1, 1, 1)])
def test_forced_split_is_honoured_and_matches_jit(case, split):
    lowered, args, expected, mesh = case
    program = pp.partition(lowered, mesh=mesh, schedule=pp.Std1F1B(4), stage_split=split)
    assert program.stage_split == split
    assert f"segments 0-{split[0] - 1}" in program.summary()
    toolkit.assert_matches_reference(program.compile()(*args), expected, toolkit.SEPARATE_PROGRAMS)


def test_no_merge_records_one_segment_per_stage(case):
    lowered, _, _, _ = case
    program = pp.partition(lowered, mesh=toolkit.make_mesh(8), schedule=pp.Std1F1B(8))
    assert program.stage_split == (1,) * 8
    assert program.stage_estimate is None


@pytest.mark.parametrize(
    ("split", "message"),
    [
        ((2, 2, 2), "makes 3 stages but the schedule"),
        ((3, 3, 3, 3), "covers 12 marked segments but the program has 8"),
    ],
)
def test_bad_split_is_refused_with_its_cause(case, split, message):
    lowered, _, _, mesh = case
    with pytest.raises((pp.ScheduleError, pp.PartitionError), match=message):
        pp.partition(lowered, mesh=mesh, schedule=pp.Std1F1B(4), stage_split=split)


def test_a_stage_of_no_segment_is_refused_by_the_options(case):
    lowered, _, _, mesh = case
    with pytest.raises(ValueError, match="stage_split must be a non-empty tuple of positive ints"):
        pp.partition(lowered, mesh=mesh, schedule=pp.Std1F1B(4), stage_split=(2, 0, 2, 4))


def test_memory_limit_excludes_splits_over_it(case):
    lowered, _, _, mesh = case
    schedule = pp.Std1F1B(4)
    free = pp.partition(lowered, mesh=mesh, schedule=schedule)
    peak = max(free.stage_estimate.peak_bytes)
    at_limit = pp.partition(lowered, mesh=mesh, schedule=schedule, memory_limit_bytes=peak)
    assert max(at_limit.stage_estimate.peak_bytes) <= peak
    # The balanced split here also has the least peak: below it, nothing fits.
    with pytest.raises(pp.ScheduleError, match=f"the least estimated peak is {peak} bytes"):
        pp.partition(lowered, mesh=mesh, schedule=schedule, memory_limit_bytes=peak - 1)


def test_plan_pipeline_ranks_the_layouts_that_fit_the_mesh(case):
    lowered, _, _, mesh = case
    plan = pp.plan_pipeline(lowered, mesh=mesh)
    kinds = {type(c.schedule).__name__ for c in plan}
    assert {"GPipe", "Std1F1B", "Interleaved1F1B"} <= kinds
    assert all(c.schedule.mpmd_dim == 4 and sum(c.stage_split) == 8 for c in plan)
    assert all(len(c.stage_split) == c.schedule.num_stages for c in plan)
    steps = [c.step_s for c in plan]
    assert steps == sorted(steps)
    assert all(len(c.peak_bytes) == 4 and c.launches > 0 and 0 <= c.bubble < 1 for c in plan)
    table = str(plan)
    assert table.splitlines()[0] == "pipeline plans for 8 marked segments, 16 microbatches"
    assert repr(plan.best.schedule) in table.splitlines()[2]


def test_plan_pipeline_puts_layouts_over_the_memory_limit_last(case):
    lowered, _, _, mesh = case
    free = pp.plan_pipeline(lowered, mesh=mesh)
    limit = min(max(c.peak_bytes) for c in free)
    limited = pp.plan_pipeline(lowered, mesh=mesh, memory_limit_bytes=limit)
    assert limited.best.fits and max(limited.best.peak_bytes) <= limit
    fits = [c.fits for c in limited]
    assert fits == sorted(fits, reverse=True)
    assert "(over the memory limit)" in str(limited) or all(fits)


def test_auto_schedule_takes_the_best_plan_and_matches_jit(case):
    lowered, args, expected, mesh = case
    best = pp.plan_pipeline(lowered, mesh=mesh).best
    program = pp.partition(lowered, mesh=mesh, schedule="auto")
    assert repr(program.schedule) == repr(best.schedule)
    assert program.stage_split == best.stage_split
    toolkit.assert_matches_reference(program.compile()(*args), expected, toolkit.SEPARATE_PROGRAMS)
    with pytest.raises(pp.ScheduleError, match='schedule="auto" chooses the stage split'):
        pp.partition(lowered, mesh=mesh, schedule="auto", stage_split=(2, 2, 2, 2))


def test_calibrated_plan_runs_on_measured_segment_times(case):
    lowered, _, _, mesh = case
    plan = pp.plan_pipeline(lowered, mesh=mesh, calibrate=True)
    forward, backward = plan.costs.measured_forward_s, plan.costs.measured_backward_s
    assert len(forward) == len(backward) == len(LAYERS)
    assert all(seconds > 0 for seconds in (*forward, *backward)), (forward, backward)
    assert "measured segment costs" in str(plan).splitlines()[0]
    assert all(sum(c.stage_split) == len(LAYERS) for c in plan)


def test_calibration_needs_the_lowered_step(case):
    lowered, _, _, mesh = case
    with pytest.raises(TypeError, match="calibrate=True runs the step"):
        pp.plan_pipeline(lowered.as_text(), mesh=mesh, calibrate=True)
