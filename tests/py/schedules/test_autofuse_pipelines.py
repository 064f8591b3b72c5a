"""Pipelines partitioned with automatic task fusion, against plain jax.jit, bit for bit."""

from __future__ import annotations

import jax
import pytest
import toolkit
from jaxpp_mlir.runtime.instructions import run
from toolkit import lower_cached, make_mesh, mlp_batch, mlp_params, mlp_train_step

import jaxpp_mlir as pp
from jaxpp_mlir import partition_options

# Compares numbers with plain jax.jit or between runs: CI runs it under capped ISAs too.
pytestmark = pytest.mark.numerics

shared_stage_compiles = toolkit.stage_compiles_shared_by_file()


CASES = [
    # (schedule, num_ranks, num_microbatches)
    (pp.Std1F1B(2), 2, 4),
    (pp.GPipe(2), 2, 4),
    (pp.Std1F1B(4), 4, 8),
    (pp.Interleaved1F1B(4, 2), 2, 4),
    (pp.ZeroBubble(2), 2, 4),
    (pp.Std1F1B(1), 1, 4),  # a whole single-rank step: one launch
    (pp.Interleaved1F1B(2, 1), 1, 3),  # two stages on one rank: one launch
]


def launches(program: pp.PartitionedProgram) -> list:
    return [inst for inst in program.plan.instructions if inst.kind == run.KIND]


def task_names(runs: list) -> set[str]:
    """The tasks the launches run, by name (``fwd_1__0``; a fused launch runs several)."""
    return {str(task) for inst in runs for task in inst.tasks}


def launching_items(schedule: pp.Schedule, num_microbatches: int, program_tasks: set[str]) -> int:
    """The schedule's items that run a task of the program (an MLP's stage 0 has no
    input gradient: its ``bwd_i`` alone launches nothing)."""
    return sum(
        any(str(task) in program_tasks for task in item.parts)
        for row in schedule.tasks(num_microbatches)
        for item in row
    )


@pytest.mark.parametrize(("schedule", "num_ranks", "num_microbatches"), CASES, ids=str)
def test_fused_pipeline_matches_jax_jit(schedule, num_ranks, num_microbatches):
    params = mlp_params(schedule.num_stages)
    batch = mlp_batch(num_microbatches)
    lowered = lower_cached(mlp_train_step, params, batch)
    mesh = make_mesh(num_ranks)
    plain = pp.partition(lowered, mesh=mesh, schedule=schedule)
    fused = pp.partition(lowered, mesh=mesh, schedule=schedule, fuse_tasks=True)
    assert isinstance(fused.schedule, pp.AutoFused)
    plain_launches = launches(plain)
    program_tasks = task_names(plain_launches)
    saved = launching_items(schedule, num_microbatches, program_tasks) - launching_items(
        fused.schedule, num_microbatches, program_tasks
    )
    assert saved > 0
    assert len(plain_launches) - len(launches(fused)) == saved
    toolkit.assert_matches_reference(
        fused.compile()(params, batch),
        jax.jit(mlp_train_step)(params, batch),
        toolkit.SEPARATE_PROGRAMS,
    )


def test_state_fed_back_through_a_fused_step():
    params, batch = mlp_params(2), mlp_batch(4)
    lowered = lower_cached(mlp_train_step, params, batch)
    program = pp.partition(lowered, mesh=make_mesh(2), schedule=pp.Std1F1B(2), fuse_tasks=True)
    compiled = program.compile()
    ours, reference = params, params
    for _ in range(3):
        ours, losses = compiled(ours, batch)
        reference, reference_losses = jax.jit(mlp_train_step)(reference, batch)
        toolkit.assert_matches_reference(losses, reference_losses, toolkit.SEVERAL_STEPS)
    toolkit.assert_matches_reference(ours, reference, toolkit.SEVERAL_STEPS)


def test_option_turns_fusion_on(monkeypatch):
    params, batch = mlp_params(2), mlp_batch(4)
    lowered = lower_cached(mlp_train_step, params, batch)
    assert not isinstance(pp.partition(lowered, mesh=make_mesh(2)).schedule, pp.AutoFused)
    monkeypatch.setenv(partition_options.FUSE_TASKS.env, "1")
    program = pp.partition(lowered, mesh=make_mesh(2))
    assert repr(program.schedule) == "AutoFused(Std1F1B(num_stages=2))"
    assert not isinstance(
        pp.partition(lowered, mesh=make_mesh(2), fuse_tasks=False).schedule, pp.AutoFused
    )


def test_fusion_with_packed_accumulators_matches_scan():
    layers, stages, width, microbatches = 4, 2, 8, 4
    params, xs, ys = toolkit.biased_layers_inputs(layers, width, microbatches, seed=3)

    def step(p, x, y):
        return toolkit.biased_layers_sgd_step(p, x, y, layers_per_stage=layers // stages)

    lowered = jax.jit(step).lower(params, xs, ys)
    program = toolkit.partition_with_packed_accumulators(
        lowered, mesh=make_mesh(stages), schedule=pp.Std1F1B(stages), fuse_tasks=True
    )
    assert isinstance(program.schedule, pp.AutoFused)
    expected = jax.jit(toolkit.biased_layers_scan_step)(params, xs, ys)
    toolkit.assert_matches_reference(
        program.compile()(params, xs, ys), expected, toolkit.SEPARATE_PROGRAMS
    )


def test_fused_runs_return_only_what_is_read_after_them():
    """A whole single-rank step in one launch returns the step's results, not every
    part's (activations and each microbatch's accumulators stay inside): fewer buffers
    out than the parts' results, and no more peak bytes than the unfused step."""
    params, batch = mlp_params(2), mlp_batch(4)
    lowered = lower_cached(mlp_train_step, params, batch)
    schedule = pp.Interleaved1F1B(2, 1)
    plain = pp.partition(lowered, mesh=make_mesh(1), schedule=schedule)
    fused = pp.partition(lowered, mesh=make_mesh(1), schedule=schedule, fuse_tasks=True)
    (name,) = [n for n, e in fused.plan.executables.items() if e.fused_parts]
    parts_outputs = 0
    for launch in launches(plain):
        if all(task.microbatch is not None for task in launch.tasks):  # not pre/post code
            parts_outputs += len(plain.plan.executables[launch.executable].output_specs)
    assert len(fused.plan.executables[name].output_specs) < parts_outputs
    assert max(fused.peak_bytes_per_rank()) <= max(plain.peak_bytes_per_rank())
    toolkit.assert_matches_reference(
        fused.compile()(params, batch),
        jax.jit(mlp_train_step)(params, batch),
        toolkit.SEPARATE_PROGRAMS,
    )
