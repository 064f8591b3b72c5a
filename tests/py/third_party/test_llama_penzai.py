"""penzai's Llama-style transformer, a marker layer inserted after each block by penzai's
model surgery (``pz.select``), trained with Adam under GPipe: the numbers of jax.jit.
Without markers: penzai's ``Sequential`` names its layers' scopes by index (the embedding
0, the blocks 1..N, then the final norm and the logits), so three blocks are cut into
three stages by split points ``2`` and ``3``, and four into two by the repeated layers
``partition`` finds (the inlined embedding lookup leaves no named op of layer 0)."""

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


# Without markers: (cut, stages, blocks) and where the segments start.
UNMARKED = {"split-points": (3, 3, ("2", "3")), "auto": (2, 4, ("2", "3", "4", "5", "6"))}


@pytest.fixture(scope="module", params=third_party_suite.UNMARKED_CUTS)
def unmarked(request):
    stages, layers, _ = UNMARKED[request.param]
    return request.param, third_party_suite.train(
        "llama_penzai", cut=request.param, num_stages=stages, num_layers=layers
    )


@pytest.mark.slow
def test_without_markers_trains_like_jax_jit(unmarked):
    third_party_suite.assert_trained_like_jax_jit(unmarked[1])


@pytest.mark.slow
def test_without_markers_stages_start_at_layers(unmarked):
    cut, trained = unmarked
    stages, _, starts = UNMARKED[cut]
    assert trained.program.num_stages == stages
    assert trained.program.segment_starts == starts
