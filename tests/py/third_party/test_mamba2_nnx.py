"""mamba2-jax's Mamba2ForCausalLM (flax nnx), each block wrapped from outside to end a stage,
trained with AdamW: the numbers of jax.jit. Without markers: nnx names no module, but
mamba2-jax runs each block's mixer under ``jax.named_scope("mamba2_mixer")``, so the
calls of that scope are the repeated blocks: three blocks cut into three stages by
split points ``mamba2_mixer#1`` and ``#2``, and by ``partition`` itself into two."""

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


# AdamW's first steps divide each gradient by its own root mean square plus eps (1e-8):
# a weight whose gradient is a cancelling sum near 1e-8 (4e-8 against a leaf largest
# of 0.3, seen in out_proj) moves by a fraction of the learning rate that its rounding
# decides. Stages cut elsewhere than the markers' round such sums differently; the
# optimizer's moments (the gradients) stay within SEVERAL_STEPS.
ADAMW_NEAR_ZERO_GRADIENTS = toolkit.Tolerance(
    ulps=1024,
    why="AdamW divides each gradient by its magnitude plus 1e-8: a gradient near 1e-8 "
    "moves its weight by a fraction of the learning rate its rounding decides",
)
MIXER = "mamba2_causal_lm/mamba2_backbone/mamba2_mixer"
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
    third_party_suite.assert_trained_like_jax_jit(
        unmarked[1],
        step_tolerance=ADAMW_NEAR_ZERO_GRADIENTS,
        state_tolerance=ADAMW_NEAR_ZERO_GRADIENTS,
    )
    for ours, theirs in zip(unmarked[1].steps, unmarked[1].reference_steps, strict=True):
        toolkit.assert_matches_reference(ours[1], theirs[1], toolkit.SEVERAL_STEPS)


@pytest.mark.slow
def test_without_markers_stages_start_at_mixer_calls(unmarked):
    cut, trained = unmarked
    assert trained.program.num_stages == UNMARKED[cut][0]
    assert trained.program.segment_starts == (f"{MIXER}#1", f"{MIXER}#2")
