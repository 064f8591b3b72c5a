"""dm-haiku's hk.nets.ResNet (convolutions, BatchNorm with moving averages as state), a
marker after block groups 1 and 3 through ``haiku.intercept_methods``, trained with SGD
and momentum: the numbers of jax.jit."""

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
