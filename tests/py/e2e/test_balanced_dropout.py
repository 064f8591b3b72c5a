"""Equal layers get equal stages with dropout, remat and attention masks (issue 35 item 3).

Eight identical flax linen transformer blocks, a marker after each, on ``Std1F1B(4)``:
two blocks per stage, as without dropout, and no warning that the stages are unbalanced.
JAX shares the constant tables of a dropout (the broadcasts its random-bit generator
reads) between the layers; jaxpp-outline-stages copies them into every stage function
that reads them, and the cost model counts them there too (it charged them to the first
segment and sent them across every boundary, which split the blocks (5, 1, 1, 1)).
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import toolkit

import jaxpp_mlir as pp
from jaxpp_mlir.passes.pipelines import segment_pipeline
from jaxpp_mlir.pipeline_run import PipelineRun
from jaxpp_mlir.planner.segment_costs import segment_costs
from jaxpp_mlir.step_input import import_step

WIDTH, LENGTH, ROWS, BLOCKS, MICROBATCHES = 32, 8, 2, 8, 8


class Block(nn.Module):
    """A pre-norm transformer block: self-attention and an MLP, each with dropout."""

    rate: float
    causal: bool

    @nn.compact
    def __call__(self, x):
        mask = nn.make_causal_mask(jnp.ones(x.shape[:2])) if self.causal else None
        h = nn.MultiHeadDotProductAttention(
            num_heads=2, dropout_rate=self.rate, deterministic=False
        )(nn.LayerNorm()(x), mask=mask)
        x = x + nn.Dropout(self.rate, deterministic=False)(h)
        h = nn.Dense(WIDTH)(nn.gelu(nn.Dense(4 * WIDTH)(nn.LayerNorm()(x))))
        return x + nn.Dropout(self.rate, deterministic=False)(h)


class Model(nn.Module):
    rate: float
    causal: bool
    remat: bool

    @nn.compact
    def __call__(self, x):
        block = nn.remat(Block) if self.remat else Block
        for _ in range(BLOCKS):
            x = pp.pipeline_enter_stage(block(self.rate, self.causal)(x))
        return x


VARIANTS = {
    "no dropout": Model(rate=0.0, causal=False, remat=False),
    "dropout": Model(rate=0.1, causal=False, remat=False),
    "dropout, remat": Model(rate=0.1, causal=False, remat=True),
    "dropout, causal mask": Model(rate=0.1, causal=True, remat=False),
    "dropout, remat, causal mask": Model(rate=0.1, causal=True, remat=True),
}


def _lowered(model: Model) -> jax.stages.Lowered:
    xs = toolkit.normal((MICROBATCHES, ROWS, LENGTH, WIDTH), seed=1)
    keys = jax.random.split(jax.random.key(2), MICROBATCHES)
    params = model.init({"params": jax.random.key(0), "dropout": jax.random.key(3)}, xs[0])

    def loss(params, microbatch):
        x, key = microbatch
        return jnp.mean(model.apply(params, x, rngs={"dropout": key}) ** 2)

    def step(params, xs, keys):
        value, grads = pp.treduce(
            lambda mb: jax.value_and_grad(loss)(params, mb), (xs, keys), operation=pp.Add
        )
        return optax.apply_updates(params, jax.tree.map(lambda g: -0.1 * g, grads)), value

    return jax.jit(step).lower(params, xs, keys)


@pytest.fixture(scope="module", params=list(VARIANTS))
def lowered(request):
    return _lowered(VARIANTS[request.param])


def test_equal_blocks_get_two_per_stage_without_an_imbalance_warning(lowered):
    program, unbalanced = toolkit.partition_with_imbalance_warnings(
        lowered, mesh=toolkit.make_mesh(4), schedule=pp.Std1F1B(4)
    )
    assert program.stage_split == (2, 2, 2, 2)
    assert not unbalanced, unbalanced


def test_equal_blocks_cost_the_same_and_every_boundary_carries_one_activation(lowered):
    module, _ = import_step(lowered)
    PipelineRun(module, None).run(segment_pipeline(sharded=False))
    costs = segment_costs(module.operation)
    assert costs.num_segments == BLOCKS
    # The first block's backward computes no gradient for the step's input, the last
    # segment holds the loss: the blocks between are alike, forward and backward.
    for per_segment in (costs.forward_flops, costs.backward_flops, costs.activation_bytes):
        assert len(set(per_segment[1:-1])) == 1, per_segment
    # One block's output crosses each boundary (and the microbatch's dropout key, sent
    # from the first stage to the stages that draw from it: 8 bytes per later segment).
    activation = ROWS * LENGTH * WIDTH * np.dtype(np.float32).itemsize
    for crossing in costs.boundary_bytes:
        assert activation <= crossing <= activation + 8 * BLOCKS, costs.boundary_bytes
