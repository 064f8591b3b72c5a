"""treduce training steps partitioned with every schedule, against plain jax.jit."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
import toolkit
from toolkit import (
    lower_cached,
    make_mesh,
    mlp_batch,
    mlp_loss,
    mlp_params,
    mlp_train_step,
)

import jaxpp_mlir as pp

# Compares numbers with plain jax.jit or between runs: CI runs it under capped ISAs too.
pytestmark = pytest.mark.numerics

# Each stage runs the same StableHLO ops as the jitted step, and gradients are
# accumulated in microbatch order on every schedule: results are compared bit for bit.


shared_stage_compiles = toolkit.stage_compiles_shared_by_file()


CASES = [
    # (schedule, num_ranks, num_microbatches)
    (pp.GPipe(2), 2, 4),
    (pp.Std1F1B(2), 2, 4),
    (pp.Std1F1B(2), 2, 3),  # not a multiple of the stage count (ZeroBubble(2)'s lowering)
    (pp.Std1F1B(4), 4, 8),
    (pp.Eager1F1B(2), 2, 4),
    (pp.Eager1F1B(4), 4, 6),
    (pp.Eager1F1B(4), 4, 8),
    (pp.GPipe(4), 4, 6),
    (pp.GPipe(4), 4, 8),
    (pp.Interleaved1F1B(8, 4), 4, 8),
    (pp.Interleaved1F1B(8, 4, fuse_steady_state=True), 4, 8),
    (pp.Interleaved1F1B(4, 2), 2, 6),
    (pp.ZeroBubble(4), 4, 4),
    (pp.ZeroBubble(4), 4, 8),
    (pp.ZeroBubble(2), 2, 3),
    (pp.ZeroBubble(2), 2, 4),
    (pp.DualPipeV(6, 3), 3, 6),
    (pp.DualPipeV(6, 3), 3, 7),  # not a multiple of the stage count
]


@pytest.mark.parametrize(("schedule", "num_ranks", "num_microbatches"), CASES, ids=str)
def test_schedule_matches_jax_jit(schedule, num_ranks, num_microbatches):
    params = mlp_params(schedule.num_stages)
    batch = mlp_batch(num_microbatches)
    lowered = lower_cached(mlp_train_step, params, batch)
    program = pp.partition(lowered, mesh=make_mesh(num_ranks), schedule=schedule)
    compiled = program.compile()
    toolkit.assert_matches_reference(
        compiled(params, batch), jax.jit(mlp_train_step)(params, batch), toolkit.SEPARATE_PROGRAMS
    )


def test_default_schedule_and_state_fed_back():
    params, batch = mlp_params(2), mlp_batch(4)
    program = pp.partition(lower_cached(mlp_train_step, params, batch), mesh=make_mesh(2))
    assert isinstance(program.schedule, pp.Std1F1B)
    compiled = program.compile()
    ours, reference = params, params
    for _ in range(3):
        ours, losses = compiled(ours, batch)
        reference, reference_losses = jax.jit(mlp_train_step)(reference, batch)
        toolkit.assert_matches_reference(losses, reference_losses, toolkit.SEVERAL_STEPS)
    toolkit.assert_matches_reference(ours, reference, toolkit.SEVERAL_STEPS)
    for rank, w in enumerate(ours):
        assert w.devices() == {jax.devices()[rank]}


def step_with_treduce_schedule(schedule):
    def step(params, batch):
        losses, grads = pp.treduce(
            lambda mb: jax.value_and_grad(mlp_loss)(params, mb),
            batch,
            schedule=schedule,
            operation=(pp.Concat(), pp.Add),
        )
        return [p - 0.1 * g for p, g in zip(params, grads, strict=True)], losses

    return step


@pytest.mark.parametrize("text", [False, True], ids=["lowered", "mlir_text"])
def test_schedule_given_to_treduce_is_used(text):
    """treduce records its schedule in the module: a module read back as text keeps it."""
    params, batch = mlp_params(4), mlp_batch(4)
    step = step_with_treduce_schedule(pp.Interleaved1F1B(4, 2))
    lowered = jax.jit(step).lower(params, batch)
    program = pp.partition(lowered.as_text() if text else lowered, mesh=make_mesh(2))
    assert repr(program.schedule) == repr(pp.Interleaved1F1B(4, 2))
    args = jax.tree_util.tree_leaves((params, batch)) if text else (params, batch)
    outputs = program.compile()(*args)  # a module read as text gives flat outputs
    leaves = jax.tree_util.tree_leaves
    toolkit.assert_matches_reference(
        leaves(outputs), leaves(jax.jit(step)(params, batch)), toolkit.SEPARATE_PROGRAMS
    )


def test_schedule_name_given_to_treduce():
    params, batch = mlp_params(2), mlp_batch(4)
    lowered = jax.jit(step_with_treduce_schedule("GPipe")).lower(params, batch)
    program = pp.partition(lowered, mesh=make_mesh(2), schedule=pp.GPipe(2))
    assert isinstance(program.schedule, pp.GPipe)
    assert isinstance(pp.partition(lowered, mesh=make_mesh(2)).schedule, pp.GPipe)


def test_conflicting_schedules_in_treduce_and_partition():
    params, batch = mlp_params(2), mlp_batch(4)
    lowered = jax.jit(step_with_treduce_schedule(pp.GPipe(2))).lower(params, batch)
    with pytest.raises(
        pp.ScheduleError,
        match=r"treduce was given the schedule GPipe\(num_stages=2\) but partition was "
        r"given ZeroBubble\(num_stages=2\)",
    ):
        pp.partition(lowered, mesh=make_mesh(2), schedule=pp.ZeroBubble(2))


def test_custom_schedule_given_to_treduce_is_recorded_with_its_tasks():
    params, batch = mlp_params(2), mlp_batch(2)
    # GPipe's task lists with the ranks swapped: stage 0 on rank 1, stage 1 on rank 0.
    custom = pp.CustomSchedule(pp.GPipe(2).tasks(2)[::-1], num_stages=2, stage_rank=[1, 0])
    lowered = jax.jit(step_with_treduce_schedule(custom)).lower(params, batch)
    for program in (
        pp.partition(lowered, mesh=make_mesh(2)),
        pp.partition(lowered, mesh=make_mesh(2), schedule=custom),
    ):
        assert isinstance(program.schedule, pp.CustomSchedule)
        assert program.schedule.tasks(2) == custom.tasks(2)
        assert [program.schedule.stage_rank(s) for s in range(2)] == [1, 0]
    other = pp.CustomSchedule(pp.Std1F1B(2).tasks(2)[::-1], num_stages=2, stage_rank=[1, 0])
    with pytest.raises(pp.ScheduleError, match="treduce was given the schedule CustomSchedule"):
        pp.partition(lowered, mesh=make_mesh(2), schedule=other)


def test_fused_task_is_one_executable():
    schedule = pp.Interleaved1F1B(4, 2)
    params, batch = mlp_params(4), mlp_batch(4)
    program = pp.partition(
        lower_cached(mlp_train_step, params, batch), mesh=make_mesh(2), schedule=schedule
    )
    fused = [name for name, e in program.plan.executables.items() if e.fused_parts]
    assert fused == ["fused__stage3_fwd__stage3_bwd"]
    assert program.plan.executables[fused[0]].fused_parts == ("stage3_fwd", "stage3_bwd")
    runs = [i for i in program.plan.instructions if getattr(i, "executable", "") == fused[0]]
    assert len(runs) == 4 and runs[0].label.startswith("FusedTask(fwd_3__0, bwd_3__0")


def test_zero_bubble_splits_the_backward():
    params, batch = mlp_params(2), mlp_batch(2)
    program = pp.partition(
        lower_cached(mlp_train_step, params, batch), mesh=make_mesh(2), schedule=pp.ZeroBubble(2)
    )
    names = set(program.stage_modules)
    assert {"stage1_bwd_i", "stage1_bwd_w", "stage0_bwd_w"} <= names
    assert not any(name.endswith("_bwd") for name in names)


@pytest.mark.parametrize("num_microbatches", [4, 64])
def test_ir_does_not_grow_with_microbatches(num_microbatches):
    params, batch = mlp_params(2), mlp_batch(num_microbatches)
    program = pp.partition(lower_cached(mlp_train_step, params, batch), mesh=make_mesh(2))
    assert program.ir().count('"jaxpp.task"') == 2 + 2 + 4  # pre, post, fwd+bwd per stage
    runs = [i for i in program.plan.instructions if hasattr(i, "executable")]
    assert len(runs) == 2 + 2 + 4 * num_microbatches


def test_forward_only_loop():
    params, batch = mlp_params(2), mlp_batch(4)

    def evaluate(params, batch):
        def per_microbatch(mb):
            x, _ = mb
            for w in params:
                x = pp.pipeline_enter_stage(jnp.tanh(x @ w))
            return jnp.sum(x)

        return pp.treduce(per_microbatch, batch, operation=pp.Add)

    program = pp.partition(
        jax.jit(evaluate).lower(params, batch), mesh=make_mesh(2), schedule=pp.GPipe(2)
    )
    toolkit.assert_matches_reference(
        program.compile()(params, batch),
        jax.jit(evaluate)(params, batch),
        toolkit.SEPARATE_PROGRAMS,
    )


# ------------------------------------------------------------------ errors


def test_schedule_with_fewer_stages_than_markers_merges_neighbouring_segments():
    params, batch = mlp_params(4), mlp_batch(4)
    program = pp.partition(
        lower_cached(mlp_train_step, params, batch), mesh=make_mesh(2), schedule=pp.Std1F1B(2)
    )
    assert program.num_stages == 2 and program.stage_split == (2, 2)  # 4 equal segments
    toolkit.assert_matches_reference(
        program.compile()(params, batch),
        jax.jit(mlp_train_step)(params, batch),
        toolkit.SEPARATE_PROGRAMS,
    )


def test_schedule_needs_more_ranks_than_the_mesh():
    params, batch = mlp_params(4), mlp_batch(4)
    with pytest.raises(pp.ScheduleError, match="needs 4 ranks but the mesh has 2"):
        pp.partition(
            lower_cached(mlp_train_step, params, batch), mesh=make_mesh(2), schedule=pp.Std1F1B(4)
        )


def test_more_stages_than_ranks_without_a_schedule():
    params, batch = mlp_params(4), mlp_batch(4)
    with pytest.raises(pp.ScheduleError, match="4 stages but the mesh has only 2"):
        pp.partition(lower_cached(mlp_train_step, params, batch), mesh=make_mesh(2))


def test_schedule_without_a_loop():
    params = mlp_params(2)
    x = mlp_batch(1)[0][0]

    def forward(params, x):
        for w in params:
            x = pp.pipeline_enter_stage(x @ w)
        return x

    with pytest.raises(pp.ScheduleError, match="the step has none"):
        pp.partition(jax.jit(forward).lower(params, x), mesh=make_mesh(2), schedule=pp.GPipe(2))


def test_dual_pipe_v_with_too_few_microbatches():
    params, batch = mlp_params(4), mlp_batch(2)
    with pytest.raises(pp.ScheduleError, match="microbatch"):
        pp.partition(
            lower_cached(mlp_train_step, params, batch),
            mesh=make_mesh(2),
            schedule=pp.DualPipeV(4, 2),
        )


def test_schedule_out_of_microbatch_order_for_an_accumulator_is_rejected():
    params, batch = mlp_params(1), mlp_batch(2)
    t = pp.Task
    schedule = pp.CustomSchedule(
        [[t(0, "fwd", 1), t(0, "fwd", 0), t(0, "bwd", 1), t(0, "bwd", 0)]], num_stages=1
    )
    with pytest.raises(pp.ScheduleError, match="broken dependency order") as info:
        pp.partition(
            lower_cached(mlp_train_step, params, batch), mesh=make_mesh(1), schedule=schedule
        )
    assert "bwd_0__1 needs bwd_0__0, which comes later on the same rank" in str(info.value)
    assert "rank 0 |>>F0.1   F0.0 >>B0.1   B0.0" in str(info.value)


def test_same_tasks_fused_with_two_wirings():
    """fwd+bwd of the last stage fused within one microbatch, and across two microbatches
    (the backward then reads the residuals of an earlier forward): two executables."""
    params, batch = mlp_params(2), mlp_batch(3)
    t, fused = pp.Task, pp.FusedTask
    schedule = pp.CustomSchedule(
        [
            [t(0, "fwd", 0), t(0, "fwd", 1), t(0, "fwd", 2)]
            + [t(0, "bwd", 0), t(0, "bwd", 1), t(0, "bwd", 2)],
            [
                fused((t(1, "fwd", 0), t(1, "bwd", 0))),
                t(1, "fwd", 1),
                fused((t(1, "fwd", 2), t(1, "bwd", 1))),
                t(1, "bwd", 2),
            ],
        ],
        num_stages=2,
    )
    program = pp.partition(
        lower_cached(mlp_train_step, params, batch), mesh=make_mesh(2), schedule=schedule
    )
    assert len([e for e in program.plan.executables.values() if e.fused_parts]) == 2
    toolkit.assert_matches_reference(
        program.compile()(params, batch),
        jax.jit(mlp_train_step)(params, batch),
        toolkit.SEPARATE_PROGRAMS,
    )
