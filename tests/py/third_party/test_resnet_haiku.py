"""dm-haiku's hk.nets.ResNet (convolutions, BatchNorm with moving averages as state), a
marker after block groups 1 and 3 through ``haiku.intercept_methods``, trained with SGD
and momentum: the numbers of jax.jit. Without markers: two stages from the split point
``block_group_2`` (the markers' stages), and three from the four block groups
``partition`` finds."""

from __future__ import annotations

import pytest
import third_party_suite
import toolkit

pytestmark = [
    pytest.mark.numerics,
    # Haiku's ResNet halves the image at each group: the stage of the first groups does
    # most of the work, and partition says so (a PartitionWarning), rightly.
    pytest.mark.filterwarnings("ignore:stage 0 costs about:jaxpp_mlir.PartitionWarning"),
]

# BatchNorm's backward subtracts the batch mean of the gradients it receives, so the
# gradients of its scale and offset, and of the convolution before it, are sums that
# cancel: their rounding, relative to their own magnitude, reaches a few hundred ulps of
# float32 (the momentum buffers hold those gradients).
BATCHNORM_GRADIENTS = toolkit.Tolerance(
    ulps=1024,
    why="BatchNorm's backward subtracts the gradients' batch mean: its parameters' gradients "
    "are cancelling sums whose rounding reaches a few hundred ulps of their magnitude",
)


@pytest.fixture(scope="module")
def trained():
    return third_party_suite.train("resnet_haiku")


def test_trains_like_jax_jit(trained):
    third_party_suite.assert_trained_like_jax_jit(trained, state_tolerance=BATCHNORM_GRADIENTS)


def test_two_stages_of_two_block_groups(trained):
    assert trained.program.num_stages == 2


GROUPS = tuple(f"res_net/block_group_{i}" for i in range(4))
# Without markers: (cut, stages) and where the segments start.
UNMARKED = {"split-points": (2, GROUPS[2:3]), "auto": (3, GROUPS[1:])}


@pytest.fixture(scope="module", params=third_party_suite.UNMARKED_CUTS)
def unmarked(request):
    stages, _ = UNMARKED[request.param]
    return request.param, third_party_suite.train(
        "resnet_haiku", cut=request.param, num_stages=stages
    )


@pytest.mark.slow
def test_without_markers_trains_like_jax_jit(unmarked):
    third_party_suite.assert_trained_like_jax_jit(unmarked[1], state_tolerance=BATCHNORM_GRADIENTS)


@pytest.mark.slow
def test_without_markers_stages_start_at_block_groups(unmarked):
    cut, trained = unmarked
    stages, starts = UNMARKED[cut]
    assert trained.program.num_stages == stages
    assert trained.program.segment_starts == starts
