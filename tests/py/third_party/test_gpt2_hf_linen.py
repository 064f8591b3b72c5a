"""Hugging Face transformers' FlaxGPT2LMHeadModel (flax linen) with its dropout on, a marker
after each block through ``flax.linen.intercept_methods``, trained with AdamW and a
warmup-cosine schedule: the numbers of jax.jit, mask for mask. Without markers: four
blocks cut by split points (the blocks' module paths, ``h/i``) into four stages, and by
the repeated blocks ``partition`` finds into two."""

from __future__ import annotations

import warnings

import jax
import numpy as np
import pytest
import third_party_suite
import toolkit

import jaxpp_mlir as pp

pytestmark = pytest.mark.numerics

# AdamW divides each gradient by its running RMS, so a parameter that starts at zero
# (biases and layer-norm offsets, about 1.5e-3 after two steps of warmup) carries its
# gradient's relative rounding: about 4e6 ulps of its own magnitude per unit, and a
# bias gradient is a sum over positions that cancels (1e-5 relative, ~100 ulps here).
ADAMW_FROM_ZERO = toolkit.Tolerance(
    ulps=512,
    why="AdamW normalizes each gradient: zero-initialized biases (1e-3 after two steps) "
    "carry their cancelling gradients' relative rounding as ~100 ulps of their magnitude",
)


@pytest.fixture(scope="module")
def trained():
    return third_party_suite.train("gpt2_hf")


def _key_bias(bias) -> np.ndarray:
    """The key third of an attention block's ``c_attn`` bias (query, key, value)."""
    bias = np.asarray(bias)
    width = bias.shape[-1] // 3
    return bias[..., width : 2 * width]


def _without_key_bias(tree):
    """``tree`` with the key third of every ``c_attn`` bias (and of its Adam moments)
    zeroed: softmax ignores a shift shared by all keys, so that bias's gradient is zero
    in exact arithmetic and rounding noise in both programs, which Adam normalizes into
    steps of either sign (``test_key_bias_barely_moves_in_jax_jit`` checks it)."""

    def zeroed(path, leaf):
        if "['c_attn']['bias']" not in jax.tree_util.keystr(path):
            return leaf
        leaf = np.array(leaf)
        width = leaf.shape[-1] // 3
        leaf[..., width : 2 * width] = 0
        return leaf

    return jax.tree_util.tree_map_with_path(zeroed, tree)


def test_trains_like_jax_jit(trained):
    third_party_suite.assert_trained_like_jax_jit(
        trained, state_tolerance=ADAMW_FROM_ZERO, comparable=_without_key_bias
    )


def test_key_bias_barely_moves_in_jax_jit(trained):
    """What ``_without_key_bias`` sets aside is noise in jax.jit's own training: the key
    bias moves less than a hundredth of the query and value biases."""
    blocks = trained.reference_state[0]["transformer"]["h"]
    for block in blocks.values():
        bias = np.asarray(block["attn"]["c_attn"]["bias"])
        assert np.max(np.abs(_key_bias(bias))) < 0.01 * np.max(np.abs(bias))


def test_one_stage_per_block(trained):
    assert trained.program.num_stages == 2


def test_dropout_is_on_and_draws_the_masks_of_jax_jit(trained):
    third_party_suite.assert_dropout_draws_the_masks_of_jax_jit(trained, "gpt2_hf")


# Without markers: (cut, stages, blocks).
UNMARKED = {"split-points": (4, 4), "auto": (2, 4)}
BLOCKS = tuple(f"FlaxGPT2LMHeadModule/transformer/h/{i}" for i in range(4))


@pytest.fixture(scope="module", params=third_party_suite.UNMARKED_CUTS)
def unmarked(request):
    stages, layers = UNMARKED[request.param]
    return request.param, third_party_suite.train(
        "gpt2_hf", cut=request.param, num_stages=stages, num_layers=layers
    )


@pytest.mark.slow
def test_without_markers_trains_like_jax_jit(unmarked):
    _, trained = unmarked
    # Stages cut elsewhere than after each block round the biases' cancelling gradients
    # otherwise: within one step already, AdamW shows it (ADAMW_FROM_ZERO's reason).
    third_party_suite.assert_trained_like_jax_jit(
        trained,
        state_tolerance=ADAMW_FROM_ZERO,
        step_tolerance=ADAMW_FROM_ZERO,
        comparable=_without_key_bias,
    )


@pytest.mark.slow
def test_without_markers_stages_start_at_blocks(unmarked):
    cut, trained = unmarked
    assert trained.program.num_stages == UNMARKED[cut][0]
    assert trained.program.segment_starts == BLOCKS[1:]


def test_eight_blocks_with_dropout_split_evenly_over_four_stages():
    """Issue 35 item 3: GPT-2's eight equal blocks, dropout on, two per stage on
    ``Std1F1B(4)`` (the cost model once split them (5, 1, 1, 1)) and no warning that the
    stages are unbalanced."""
    workload = third_party_suite.examples().gpt2_hf(num_stages=4, num_layers=8)
    lowered = jax.jit(workload.step).lower(*workload.state, *workload.inputs(0))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program = pp.partition(lowered, mesh=workload.mesh(), schedule=workload.schedule)
    assert program.stage_split == (2, 2, 2, 2)
    unbalanced = [str(w.message) for w in caught if "costs about" in str(w.message)]
    assert not unbalanced, unbalanced
