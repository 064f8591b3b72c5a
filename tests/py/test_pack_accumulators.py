"""jaxpp-pack-accumulators end to end: fewer buffers per backward launch, same numbers.

A 2-stage, 4-layer MLP (2 weights and 2 biases per stage) trained one step with
a treduce over 4 microbatches: each backward task passes one packed
accumulator in and out instead of four, and the step's parameters and loss
equal plain ``jax.jit``'s bit for bit. The pass is not in the default
pipeline (it made CPU steps slower, see benchmarks/RESULTS.md), so the test
turns it on with ``JAXPP_MLIR_PACK_ACCUMULATORS=1``.
"""

import functools

import jax
import numpy as np
import pytest
import toolkit

import jaxpp_mlir as pp

# Compares numbers with plain jax.jit or between runs: CI runs it under capped ISAs too.
pytestmark = pytest.mark.numerics

NUM_LAYERS, WIDTH, NUM_STAGES, NUM_MICROBATCHES = 4, 8, 2, 4
LAYERS_PER_STAGE = NUM_LAYERS // NUM_STAGES


@pytest.fixture(scope="module")
def inputs():
    return toolkit.biased_layers_inputs(NUM_LAYERS, WIDTH, NUM_MICROBATCHES, seed=3)


@pytest.fixture(scope="module")
def program(inputs):
    mesh = pp.MpmdMesh(jax.sharding.Mesh(np.array(jax.devices()[:NUM_STAGES]), ("stage",)), "stage")
    step = functools.partial(toolkit.biased_layers_sgd_step, layers_per_stage=LAYERS_PER_STAGE)
    lowered = jax.jit(step).lower(*inputs)
    # The pass is not in the default pipeline: JAXPP_MLIR_PACK_ACCUMULATORS=1 adds it.
    return toolkit.partition_with_packed_accumulators(
        lowered, mesh=mesh, schedule=pp.Std1F1B(NUM_STAGES)
    )


def test_backward_tasks_carry_one_packed_accumulator(program):
    # Rows of WIDTH (the gcd of the members' sizes): WIDTH rows per weight, 1 per bias.
    packed_shape = (LAYERS_PER_STAGE * (WIDTH + 1), WIDTH)
    for stage in range(NUM_STAGES):
        bwd = program.plan.executables[f"stage{stage}_bwd"]
        packed = [s for s in bwd.output_specs if s.shape == packed_shape]
        assert len(packed) == 1, bwd.output_specs
        assert packed[0].dtype == "float32"
        # No unpacked weight or bias gradient leaves the task any more.
        assert not [s for s in bwd.output_specs if s.shape in ((WIDTH, WIDTH), (WIDTH,))]
        assert sum(s.shape == packed_shape for s in bwd.input_specs) == 1


def test_step_equals_plain_jit_bit_for_bit(program, inputs):
    ours = program.compile()(*inputs)
    theirs = jax.jit(toolkit.biased_layers_scan_step)(*inputs)
    toolkit.assert_matches_reference(ours, theirs, toolkit.SEPARATE_PROGRAMS)
