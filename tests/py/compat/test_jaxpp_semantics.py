"""JaxPP's semantics through ``jaxpp_mlir.jaxpp``, each checked against ``jax.jit``."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import toolkit
from jax.sharding import PartitionSpec as P

import jaxpp_mlir.jaxpp as jaxpp
from jaxpp_mlir.errors import MarkerError

NUM_MICROBATCHES = 3  # not a multiple of two ranks: Interleaved1F1B runs it too
WIDTH = 4


def lm_loss(params, microbatch):
    """Two blocks, each ended by its marker, then an untied head and the loss after the
    last marker (every language model's layout)."""
    x, y = microbatch
    for i, w in enumerate(params["blocks"]):
        x = jaxpp.mark_stage_end(jnp.tanh(x @ w), name=f"block{i}")
    logits = x @ params["head"]
    return jnp.mean((logits - y) ** 2)


def make_params(num_blocks: int) -> dict:
    blocks = [toolkit.normal((WIDTH, WIDTH), seed=i, scale=0.5) for i in range(num_blocks)]
    return {"blocks": blocks, "head": toolkit.normal((WIDTH, 2), seed=9, scale=0.5)}


def make_batch() -> tuple[jax.Array, jax.Array]:
    xs = toolkit.normal((NUM_MICROBATCHES, 2, WIDTH), seed=20)
    ys = toolkit.normal((NUM_MICROBATCHES, 2, 2), seed=21)
    return xs, ys


def lm_step(schedule, params, batch):
    return jaxpp.treduce(
        functools.partial(jax.value_and_grad(lm_loss), params), batch, schedule=schedule
    )


@pytest.mark.parametrize(
    "schedule, num_blocks",
    [(jaxpp.Std1F1B(2), 2), (jaxpp.Interleaved1F1B(num_stages=4, mpmd_dim=2), 4)],
    ids=["Std1F1B-head-after-last-marker", "Interleaved1F1B-3-microbatches"],
)
def test_head_after_last_marker_runs_in_last_stage(schedule, num_blocks):
    """Points 1 and 3: a head after the last of N markers with an N-stage schedule is
    the last stage's; Interleaved1F1B takes a count that is not a multiple of mpmd_dim."""
    mesh = toolkit.make_mesh(2)
    params, batch = make_params(num_blocks), make_batch()
    step = functools.partial(lm_step, schedule)
    pipelined = jaxpp.mpmd_jit_with_loop(step, mesh)
    (loss, grads) = pipelined(params, batch)
    expected = jax.jit(step)(params, batch)
    toolkit.assert_matches_reference((loss, grads), expected, toolkit.SEPARATE_PROGRAMS)
    head = grads["head"].to_mpmd_local_array
    assert head.devices() == set(mesh.rank_devices(schedule.stage_rank(num_blocks - 1)))


def dropout_loss(params, microbatch):
    x, key = microbatch
    keep = jax.random.bernoulli(key, 0.5, x.shape)
    x = jaxpp.mark_stage_end(jnp.tanh(x @ params[0]) * keep)
    return jnp.sum(jaxpp.mark_stage_end(jnp.tanh(x @ params[1])) ** 2)


def dropout_step(params, xs, key):
    """A typed key in, split per microbatch inside treduce, and a new key out."""
    key, used = jax.random.split(key)
    keys = jax.random.split(used, NUM_MICROBATCHES)
    loss, grads = jaxpp.treduce(
        functools.partial(jax.value_and_grad(dropout_loss), params),
        (xs, keys),
        schedule=jaxpp.Std1F1B(2),
    )
    return loss, grads, key


def test_typed_prng_keys_as_arguments_results_and_per_microbatch():
    """Point 2: jax.random.key (what flax's dropout keeps in its TrainState)."""
    params = [toolkit.normal((WIDTH, WIDTH), seed=i, scale=0.5) for i in range(2)]
    xs = toolkit.normal((NUM_MICROBATCHES, 2, WIDTH), seed=30)
    key = jax.random.key(0)
    pipelined = jaxpp.mpmd_jit_with_loop(dropout_step, mpmd_mesh=toolkit.make_mesh(2))
    loss, grads, new_key = pipelined(params, xs, key)
    expected_loss, expected_grads, expected_key = jax.jit(dropout_step)(params, xs, key)
    toolkit.assert_matches_reference(
        (loss, grads), (expected_loss, expected_grads), toolkit.SEPARATE_PROGRAMS
    )
    # A key result is the key itself (jax.random takes no MpmdArray), a valid argument.
    assert jax.dtypes.issubdtype(new_key.dtype, jax.dtypes.prng_key), new_key
    np.testing.assert_array_equal(jax.random.key_data(new_key), jax.random.key_data(expected_key))
    np.testing.assert_array_equal(
        jax.random.key_data(jax.random.split(new_key)),
        jax.random.key_data(jax.random.split(expected_key)),
    )
    pipelined(params, xs, new_key)


def test_shardings_naming_the_mpmd_axis_are_accepted():
    """Point 4: JaxPP users shard over ("stage", "data") for SPMD initialisation; the
    stage axis has size 1 in the lowering mesh and is dropped."""
    mesh = toolkit.mpmd_mesh({"stage": 2, "data": 2})
    params, batch = make_params(2), make_batch()
    step = functools.partial(lm_step, jaxpp.Std1F1B(2))
    param_specs = {"blocks": [P(("stage", "data"), None)] * 2, "head": P("stage", None)}
    pipelined = jaxpp.mpmd_jit_with_loop(
        step, mesh, in_shardings=(param_specs, (P(), P())), out_shardings=None
    )
    loss, grads = pipelined(params, batch)
    expected = jax.jit(step)(params, batch)
    toolkit.assert_matches_reference((loss, grads), expected, toolkit.SEPARATE_PROGRAMS)
    compiled = pipelined.compile(params, batch)
    (arg_shardings, _), _ = compiled.in_shardings
    assert arg_shardings["blocks"][0].spec == P("data", None)
    assert arg_shardings["blocks"][1].mesh_ids == frozenset({1})


def test_target_num_stages_is_checked():
    def forward(w, x):
        for wi in w:
            x = jaxpp.mark_stage_end(jnp.tanh(x @ wi))
        return x

    w = [jnp.eye(WIDTH) * 0.5] * 2
    x = jnp.ones((2, WIDTH))
    mesh = toolkit.make_mesh(2)
    good = jaxpp.mpmd_jit_by_yield(forward, mesh, target_num_stages=2)
    toolkit.assert_matches_reference(good(w, x), jax.jit(forward)(w, x), toolkit.SEPARATE_PROGRAMS)
    with pytest.raises(MarkerError, match="has 2 stages, but target_num_stages is 3"):
        jaxpp.mpmd_jit_by_yield(forward, mesh, target_num_stages=3).lower(w, x)
