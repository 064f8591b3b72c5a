"""Flax's Gemma example (flax nnx, ``examples/third_party/flax_gemma``), written for JAX's
explicit sharding: a ``jax.make_mesh`` mesh of Explicit axes, ``out_sharding`` on every
parameter and einsum (its ``ShardingConfig.fsdp_tp_sharding``), traced under
``jax.set_mesh``, with its dropout on (one key per microbatch). Each block wrapped from
outside to end a stage; two stages, each on a 2 x 2 submesh (``fsdp`` x ``tensor``: data
and tensor parallelism inside the stage), trained with the example's AdamW: the numbers
of jax.jit, mask for mask, and the parameters keep the shardings their types name, on
their stage's submesh."""

from __future__ import annotations

import jax
import pytest
import third_party_suite

pytestmark = pytest.mark.numerics


@pytest.fixture(scope="module")
def trained():
    return third_party_suite.train("gemma_flax")


def test_trains_like_jax_jit(trained):
    third_party_suite.assert_trained_like_jax_jit(trained)


def test_one_stage_per_block(trained):
    assert trained.program.num_stages == 2


def test_dropout_is_on_and_draws_the_masks_of_jax_jit(trained):
    third_party_suite.assert_dropout_draws_the_masks_of_jax_jit(trained, "gemma_flax")


def test_each_blocks_parameters_keep_their_typed_shardings_on_their_stages_submesh(trained):
    layers = trained.state[0]["layers"]
    reference_layers = trained.reference_state[0]["layers"]
    for stage in (0, 1):
        submesh = trained.program.mesh.unstack[stage]  # fsdp 2 x tensor 2, Explicit
        ours, theirs = jax.tree.leaves(layers[stage]), jax.tree.leaves(reference_layers[stage])
        assert len(ours) == len(theirs) > 0
        for leaf, reference_leaf in zip(ours, theirs, strict=True):
            assert leaf.sharding.mesh == submesh
            assert jax.typeof(leaf).sharding.spec == jax.typeof(reference_leaf).sharding.spec
    # Split over both axes inside the stage: the attention output projection's heads
    # over "tensor", its model dimension over "fsdp" (fsdp_tp_sharding's o_weight_nhd).
    kernel = layers[1]["block"]["attn"]["attn_vec_einsum"]["kernel"][...]
    assert jax.typeof(kernel).sharding.spec == jax.P("tensor", None, "fsdp")
