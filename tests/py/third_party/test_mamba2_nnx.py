"""mamba2-jax's Mamba2ForCausalLM (flax nnx), each block wrapped from outside to end a stage,
trained with AdamW: the numbers of jax.jit. Without markers: nnx names no module, but
mamba2-jax runs each block's norm and mixer under ``jax.named_scope``s, so the calls of
those scopes are the repeated blocks (the norm's, where a block starts; the final norm
is a fourth call): three blocks cut into three stages by split points
``mamba2_backbone/rms_norm#1`` and ``#2``, and by ``partition`` itself into two."""

from __future__ import annotations

import pytest
import third_party_suite
import toolkit

pytestmark = pytest.mark.numerics


@pytest.fixture(scope="module")
def trained():
    return third_party_suite.train("mamba2_nnx")


def test_trains_like_jax_jit(trained):
    third_party_suite.assert_trained_like_jax_jit(trained)


def test_one_stage_per_block(trained):
    assert trained.program.num_stages == 2


# AdamW moves a parameter that starts at zero (the convolutions' biases, 3e-3 after three
# steps) by steps whose size its gradient's relative rounding sets: stages cut elsewhere
# than the markers (another grouping of a cancelling sum) show as ~100 ulps of the bias's
# own magnitude after three steps. Each single step stays within SEVERAL_STEPS.
ADAMW_FROM_ZERO = toolkit.Tolerance(
    ulps=512,
    why="AdamW normalizes each gradient: zero-initialized biases (3e-3 after three steps) "
    "carry their cancelling gradients' relative rounding as ~100 ulps of their magnitude",
)
NORM = "mamba2_causal_lm/mamba2_backbone/rms_norm"
# Without markers: (cut, stages, blocks).
UNMARKED = {"split-points": (3, 3), "auto": (2, 3)}


@pytest.fixture(scope="module", params=third_party_suite.UNMARKED_CUTS)
def unmarked(request):
    stages, layers = UNMARKED[request.param]
    return request.param, third_party_suite.train(
        "mamba2_nnx", cut=request.param, num_stages=stages, num_layers=layers
    )


@pytest.mark.slow
def test_without_markers_trains_like_jax_jit(unmarked):
    third_party_suite.assert_trained_like_jax_jit(unmarked[1], state_tolerance=ADAMW_FROM_ZERO)


@pytest.mark.slow
def test_without_markers_stages_start_at_the_blocks_norm_calls(unmarked):
    cut, trained = unmarked
    assert trained.program.num_stages == UNMARKED[cut][0]
    calls = (1, 2) if cut == "split-points" else (1, 2, 3)  # the final norm's, found
    assert trained.program.segment_starts == tuple(f"{NORM}#{k}" for k in calls)
