"""mamba2-jax's Mamba2ForCausalLM (flax nnx), each block wrapped from outside to end a stage,
trained with AdamW: the numbers of jax.jit."""

from __future__ import annotations

import pytest
import third_party_suite

pytestmark = pytest.mark.numerics


@pytest.fixture(scope="module")
def trained():
    return third_party_suite.train("mamba2_nnx")


def test_trains_like_jax_jit(trained):
    third_party_suite.assert_trained_like_jax_jit(trained)


def test_one_stage_per_block(trained):
    assert trained.program.num_stages == 2
