"""penzai's Llama-style transformer, a marker layer inserted after each block by penzai's
model surgery (``pz.select``), trained with Adam under GPipe: the numbers of jax.jit."""

from __future__ import annotations

import pytest
import third_party_suite

pytestmark = pytest.mark.numerics


@pytest.fixture(scope="module")
def trained():
    return third_party_suite.train("llama_penzai")


def test_trains_like_jax_jit(trained):
    third_party_suite.assert_trained_like_jax_jit(trained)


def test_one_stage_per_block(trained):
    assert trained.program.num_stages == 2
