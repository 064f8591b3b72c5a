"""The planner's candidate stage splits: every split under the bound, in order, found
without searching the prefixes that lead nowhere."""

from __future__ import annotations

import itertools
import random

import pytest

from jaxpp_mlir.planner.segment_costs import SegmentCosts
from jaxpp_mlir.planner.stage_split import (
    MAX_ENUMERATED,
    bounded_splits,
    candidate_splits,
    compositions,
    least_bottleneck,
)


def _groups(weights: list[float], split: tuple[int, ...]) -> list[list[float]]:
    bounds = [0, *itertools.accumulate(split)]
    return [weights[a:b] for a, b in itertools.pairwise(bounds)]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("slack", [1.0 + 1e-9, 1.05, 1.25])
def test_bounded_splits_are_every_split_under_the_bound_in_order(seed, slack):
    """Against the brute force: every composition whose heaviest group is at most the
    bound, in the same order (the planner keeps the first ``MAX_ENUMERATED``)."""
    rng = random.Random(seed)
    count, parts = rng.randint(6, 12), rng.randint(2, 5)
    weights = [rng.choice([0.5, 1.0, 1.0, 2.0, 3.0]) for _ in range(count)]
    limit = least_bottleneck(weights, parts) * slack
    expected = [
        split
        for split in compositions(count, parts)
        if max(sum(group) for group in _groups(weights, split)) <= limit
    ]
    assert list(bounded_splits(weights, parts, slack)) == expected
    assert expected, "the least bottleneck is reachable"


def test_many_stages_of_a_deep_scan_are_found_at_once():
    """16 stages of 66 segments (an embedding, 64 scanned layers, a head): the splits under
    the bound are listed without exploring prefixes no split completes (this search ran
    for minutes, which made ``schedule="auto"`` on a 64-layer scan hang)."""
    weights = [2.0, *([1.0] * 64), 2.0]
    found = list(itertools.islice(bounded_splits(weights, 16, 1.0 + 1e-9), MAX_ENUMERATED))
    assert len(found) == MAX_ENUMERATED
    bound = least_bottleneck(weights, 16)
    for split in found:
        assert len(split) == 16 and sum(split) == 66
        assert max(sum(group) for group in _groups(weights, split)) <= bound


def test_candidate_splits_of_a_deep_scan_for_sixteen_stages():
    count = 66
    costs = SegmentCosts(
        forward_flops=(1e6,) * count,
        backward_flops=(2e6,) * count,
        forward_bytes=(1e3,) * count,
        backward_bytes=(2e3,) * count,
        param_bytes=(1 << 14,) * count,
        activation_bytes=(1 << 12,) * count,
        boundary_bytes=(4096,) * count,
    )
    splits = candidate_splits(costs, 16)
    assert 0 < len(splits) <= MAX_ENUMERATED
    assert all(len(split) == 16 and sum(split) == count for split in splits)
