"""jaxpp-pack-accumulators on a one-stage step with more accumulators than one buffer takes:
rows of the members' gcd, ``max-members`` to a buffer, the step still bit-for-bit
plain jit's."""

from __future__ import annotations

import importlib
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpp_mlir as pp
from jaxpp_mlir.passes.pack_accumulators import PackAccumulators
from jaxpp_mlir.passes.pipeline import make_element

# Six layers of a weight (WIDTH x WIDTH) and a bias (WIDTH) on one stage: twelve
# accumulators, so with 8 to a buffer one buffer of 8 and one of 4.
NUM_LAYERS, WIDTH, NUM_MICROBATCHES, MAX_MEMBERS = 6, 8, 2, 8


def _loss(params, microbatch, *, markers):
    x, y = microbatch
    for w, b in params:
        x = jnp.tanh(x @ w + b)
    if markers:
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
    keys = jax.random.split(jax.random.PRNGKey(7), NUM_LAYERS + 2)
    params = [
        (jax.random.normal(k, (WIDTH, WIDTH)) / np.sqrt(WIDTH), jnp.full((WIDTH,), 0.01))
        for k in keys[:NUM_LAYERS]
    ]
    xs = jax.random.normal(keys[-2], (NUM_MICROBATCHES, 2, WIDTH))
    ys = jax.random.normal(keys[-1], (NUM_MICROBATCHES, 2, WIDTH))
    return params, xs, ys


@pytest.fixture(scope="module")
def program(inputs):
    mesh = pp.MpmdMesh(jax.sharding.Mesh(np.array(jax.devices()[:1]), ("stage",)), "stage")
    lowered = jax.jit(_pipelined_step).lower(*inputs)
    partition_module = importlib.import_module("jaxpp_mlir.partition")
    original = partition_module.stage_pipeline

    def with_packing(*args, **kwargs):
        return [*original(*args, **kwargs), make_element(PackAccumulators())]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(partition_module, "stage_pipeline", with_packing)
        return pp.partition(lowered, mesh=mesh, schedule=pp.Std1F1B(1))


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
    theirs = jax.jit(_reference_step)(*inputs)
    for a, b in zip(
        jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs), strict=True
    ):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
