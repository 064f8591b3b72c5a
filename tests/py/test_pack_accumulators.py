"""jaxpp-pack-accumulators end to end: fewer buffers per backward launch, same numbers.

A 2-stage, 4-layer MLP (2 weights and 2 biases per stage) trained one step with
a treduce over 4 microbatches: each backward task passes one packed
accumulator in and out instead of four, and the step's parameters and loss
equal plain ``jax.jit``'s bit for bit. The pass is not in the default
pipeline (it made CPU steps slower, see benchmarks/RESULTS.md), so the test
appends it to the stage passes.
"""

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import toolkit

import jaxpp_mlir as pp
from jaxpp_mlir.passes.pack_accumulators import PackAccumulators
from jaxpp_mlir.passes.pipeline import make_element

NUM_LAYERS, WIDTH, NUM_STAGES, NUM_MICROBATCHES = 4, 8, 2, 4
LAYERS_PER_STAGE = NUM_LAYERS // NUM_STAGES


def _loss(params, microbatch, *, markers):
    x, y = microbatch
    for i, (w, b) in enumerate(params):
        x = jnp.tanh(x @ w + b)
        if markers and i % LAYERS_PER_STAGE == LAYERS_PER_STAGE - 1:
            x = pp.pipeline_enter_stage(x)
    return jnp.mean((x - y) ** 2)


def _pipelined_step(params, xs, ys):
    loss, grads = pp.treduce(
        lambda mb: jax.value_and_grad(lambda p: _loss(p, mb, markers=True))(params),
        (xs, ys),
        operation=pp.Add,
    )
    return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), loss


def _reference_step(params, xs, ys):
    def body(carry, microbatch):
        total, grads = carry
        value, g = jax.value_and_grad(lambda p: _loss(p, microbatch, markers=False))(params)
        return (total + value, jax.tree_util.tree_map(jnp.add, grads, g)), None

    zeros = (jnp.zeros((), jnp.float32), jax.tree_util.tree_map(jnp.zeros_like, params))
    (total, grads), _ = jax.lax.scan(body, zeros, (xs, ys))
    return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), total


@pytest.fixture(scope="module")
def inputs():
    return toolkit.biased_layers_inputs(NUM_LAYERS, WIDTH, NUM_MICROBATCHES, seed=3)


@pytest.fixture(scope="module")
def program(inputs):
    mesh = pp.MpmdMesh(jax.sharding.Mesh(np.array(jax.devices()[:NUM_STAGES]), ("stage",)), "stage")
    lowered = jax.jit(_pipelined_step).lower(*inputs)
    # The pass is not in the default pipeline: append it to the stage passes.
    partition_module = importlib.import_module("jaxpp_mlir.partition")
    original = partition_module.stage_pipeline

    def with_packing(*args, **kwargs):
        return [*original(*args, **kwargs), make_element(PackAccumulators())]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(partition_module, "stage_pipeline", with_packing)
        return pp.partition(lowered, mesh=mesh, schedule=pp.Std1F1B(NUM_STAGES))


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
    theirs = jax.jit(_reference_step)(*inputs)
    for a, b in zip(
        jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs), strict=True
    ):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
