"""jaxpp-share-constant-tasks end to end: one zero-accumulator program for every rank.

A 3-stage, 6-layer MLP trained one step with a treduce over 4 microbatches: each rank
zeroes its gradient accumulators before the loop, and the last rank also the loss
accumulator (a scalar). The pass gives every rank the last rank's body, so the three
``pre`` executables are one module text (one compilation); the other ranks' scalar is
made and never read. The step still equals plain ``jax.jit``'s.
"""

import functools

import jax
import numpy as np
import pytest
import toolkit
from jaxpp_mlir.runtime.instructions import run

import jaxpp_mlir as pp

pytestmark = pytest.mark.numerics  # compares numbers with plain jax.jit

NUM_LAYERS, WIDTH, NUM_STAGES, NUM_MICROBATCHES = 6, 8, 3, 4


@pytest.fixture(scope="module")
def inputs():
    return toolkit.biased_layers_inputs(NUM_LAYERS, WIDTH, NUM_MICROBATCHES, seed=5)


@pytest.fixture(scope="module")
def program(inputs):
    mesh = toolkit.make_mesh(NUM_STAGES)
    step = functools.partial(
        toolkit.biased_layers_sgd_step, layers_per_stage=NUM_LAYERS // NUM_STAGES
    )
    return pp.partition(jax.jit(step).lower(*inputs), mesh=mesh, schedule=pp.Std1F1B(NUM_STAGES))


def _pre_runs(program):
    return [
        i
        for i in program.plan.instructions
        if i.kind == run.KIND and program.plan.executables[i.executable].name.startswith("pre")
    ]


def test_every_rank_runs_one_zero_accumulator_program(program):
    pre = {n: e for n, e in program.plan.executables.items() if n.startswith("pre")}
    assert sorted(e.rank for e in pre.values()) == list(range(NUM_STAGES))
    assert len({e.mlir_module for e in pre.values()}) == 1
    # Each rank's weight and bias gradients, and the loss accumulator's scalar.
    shapes = sorted(s.shape for s in next(iter(pre.values())).output_specs)
    assert shapes == sorted([(), *[(WIDTH,)] * 2, *[(WIDTH, WIDTH)] * 2])


def test_only_the_last_rank_reads_the_scalar_zero(program):
    read = {v for i in program.plan.instructions for v in i.reads()}
    for inst in _pre_runs(program):
        specs = program.plan.executables[inst.executable].output_specs
        unread = [s.shape for v, s in zip(inst.outputs, specs, strict=True) if v not in read]
        assert unread == ([] if inst.rank == NUM_STAGES - 1 else [()]), inst.rank


def test_step_equals_plain_jit(program, inputs):
    ours = program.compile()(*inputs)
    theirs = jax.jit(toolkit.biased_layers_scan_step)(*inputs)
    toolkit.assert_matches_reference(ours, theirs, toolkit.SEPARATE_PROGRAMS)
    assert np.isfinite(np.asarray(ours[1]))
