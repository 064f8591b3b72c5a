"""jaxpp-pack-accumulators on a one-stage step with more accumulators than one buffer takes:
rows of the members' gcd, ``max-members`` to a buffer, the step still bit-for-bit
plain jit's."""

from __future__ import annotations

import functools
import math

import jax
import numpy as np
import pytest
import toolkit

import jaxpp_mlir as pp
from jaxpp_mlir.passes.pack_accumulators import PackAccumulators

# Compares numbers with plain jax.jit or between runs: CI runs it under capped ISAs too.
pytestmark = pytest.mark.numerics

# Six layers of a weight (WIDTH x WIDTH) and a bias (WIDTH) on one stage: twelve
# accumulators, so with 8 to a buffer one buffer of 8 and one of 4.
NUM_LAYERS, WIDTH, NUM_MICROBATCHES, MAX_MEMBERS = 6, 8, 2, 8


@pytest.fixture(scope="module")
def inputs():
    return toolkit.biased_layers_inputs(NUM_LAYERS, WIDTH, NUM_MICROBATCHES, seed=7)


@pytest.fixture(scope="module")
def program(inputs):
    mesh = pp.MpmdMesh(jax.sharding.Mesh(np.array(jax.devices()[:1]), ("stage",)), "stage")
    step = functools.partial(toolkit.biased_layers_sgd_step, layers_per_stage=NUM_LAYERS)
    lowered = jax.jit(step).lower(*inputs)
    return toolkit.partition_with_packed_accumulators(lowered, mesh=mesh, schedule=pp.Std1F1B(1))


def _packed_shapes(count: int) -> list[tuple[int, int]]:
    """The packed buffers of ``count`` accumulators in yield order, MAX_MEMBERS a buffer."""
    sizes = [WIDTH * WIDTH, WIDTH] * NUM_LAYERS
    shapes = []
    for start in range(0, count, MAX_MEMBERS):
        chunk = sizes[start : start + MAX_MEMBERS]
        width = math.gcd(*chunk)
        shapes.append((sum(chunk) // width, width))
    return shapes


def test_default_is_eight_members_a_buffer():
    assert PackAccumulators().max_members == MAX_MEMBERS


def test_backward_task_carries_one_buffer_per_eight_accumulators(program):
    bwd = program.plan.executables["stage0_bwd"]
    expected = _packed_shapes(2 * NUM_LAYERS)
    assert expected == [(4 * (WIDTH + 1), WIDTH), (2 * (WIDTH + 1), WIDTH)]
    packed = sorted(s.shape for s in bwd.output_specs if len(s.shape) == 2 and s.shape[0] > WIDTH)
    assert packed == sorted(expected)
    assert not [s for s in bwd.output_specs if s.shape in ((WIDTH, WIDTH), (WIDTH,))]


def test_step_equals_plain_jit_bit_for_bit(program, inputs):
    ours = program.compile()(*inputs)
    theirs = jax.jit(toolkit.biased_layers_scan_step)(*inputs)
    toolkit.assert_matches_reference(ours, theirs, toolkit.SEPARATE_PROGRAMS)
