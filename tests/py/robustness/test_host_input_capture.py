"""A host batch overwritten in place right after the call returns does not change the step.

A data loader that reuses its numpy buffer writes the next batch into it as soon
as the step returns, while the pipeline still runs. Like ``jax.jit``, the
pipeline must have captured its host inputs before returning.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
import toolkit
from toolkit import mlp_train_step

import jaxpp_mlir as pp

# Compares numbers with plain jax.jit or between runs: CI runs it under capped ISAs too.
pytestmark = pytest.mark.numerics

WIDTH = 256
NUM_STAGES = 4
NUM_MICROBATCHES = 8
STEPS = 20


def make_params():
    rng = np.random.default_rng(0)
    scale = np.float32(1 / np.sqrt(WIDTH))
    return [
        rng.standard_normal((WIDTH, WIDTH), dtype=np.float32) * scale for _ in range(NUM_STAGES)
    ]


def batches():
    """The true batch of every step (x and y stacked: one buffer to reuse)."""
    shape = (STEPS, 2, NUM_MICROBATCHES, 64, WIDTH)
    return np.random.default_rng(1).standard_normal(shape, dtype=np.float32)


def run_with_reused_buffer(step, params) -> list[np.ndarray]:
    """``STEPS`` steps, each fed from one buffer that is overwritten right after the call."""
    true = batches()
    buffer = np.empty_like(true[0])
    history = []
    for n in range(STEPS):
        buffer[...] = true[n]
        params, losses = step(params, (buffer[0], buffer[1]))
        buffer[...] = np.nan  # the loader starts on the next batch at once
        history.append(losses)
    return [np.asarray(h) for h in jax.block_until_ready(history)]


@pytest.fixture(scope="module")
def step():
    mesh = pp.MpmdMesh(jax.sharding.Mesh(np.array(jax.devices()[:NUM_STAGES]), ("stage",)), "stage")
    true = batches()
    lowered = jax.jit(mlp_train_step).lower(make_params(), (true[0, 0], true[0, 1]))
    return pp.partition(lowered, mesh=mesh, schedule=pp.Std1F1B(NUM_STAGES)).compile()


def test_overwriting_the_host_batch_after_the_call_does_not_change_any_step(step):
    # The reference: jax.jit fed a fresh array every step. (jax.jit itself is not the
    # reference under the abuse: on CPU it may alias the aligned numpy buffer and read
    # it after returning: with these shapes, every step of it read the overwritten data.)
    reference = jax.jit(mlp_train_step)
    params, expected = make_params(), []
    for n, batch in enumerate(batches()):
        params, losses = reference(params, (batch[0].copy(), batch[1].copy()))
        expected.append(np.asarray(losses))
        assert np.isfinite(expected[-1]).all(), n
    got = run_with_reused_buffer(step, make_params())
    corrupted = [n for n, h in enumerate(got) if not np.isfinite(h).all()]
    assert not corrupted, f"steps {corrupted} of {STEPS} read the overwritten buffer"
    # Same math, different program boundaries, over several steps.
    toolkit.assert_matches_reference(got, expected, toolkit.SEVERAL_STEPS)
