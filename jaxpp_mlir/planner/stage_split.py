"""Choosing which neighbouring marked segments form each stage of a schedule.

A split ``(2, 1, 1, 4)`` puts segments 0-1 in stage 0, 2 in stage 1, 3 in stage 2 and
4-7 in stage 3. Each candidate split is simulated with the schedule: a stage's forward
(backward) task costs the estimated time of its segments' forwards (backwards), and a
value crossing ranks arrives after the time to send what crosses the split's heaviest
boundary (the simulator has one transfer delay; the send overlaps the sender's work).
The split with the least simulated step time wins, among those whose estimated peak
bytes fit ``memory_limit_bytes`` on every rank; within ``TIE_TOLERANCE`` of the least,
the one whose slowest stage is fastest (where launches dominate, the simulation cannot
tell them apart). Up to ``MAX_ENUMERATED`` splits are all tried; beyond that, the
splits whose slowest stage is the least possible, then within 5%, then 25% of it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence

import numpy as np

from jaxpp_mlir.errors import ScheduleError
from jaxpp_mlir.planner.segment_costs import SegmentCosts
from jaxpp_mlir.runtime import records
from jaxpp_mlir.schedules import Schedule
from jaxpp_mlir.schedules.simulate import StepSummary
from jaxpp_mlir.schedules.task import BWD, FWD

MAX_ENUMERATED = 512
#: Step times within this fraction of the best are ties, broken by the slowest stage.
TIE_TOLERANCE = 0.01


@records.frozen
class Machine:
    """What a second of a rank buys: FLOPs, bytes of memory traffic, bytes sent; the host's
    cost per launch; and how many ranks really compute at once (``parallel_ranks``; None:
    all, as with one accelerator per rank; CPU devices share the host's cores).

    A step takes at least its simulated makespan, the ranks' total busy time over
    ``parallel_ranks``, and (one thread dispatches every launch) launches x ``launch_s``.
    """

    flops_per_s: float = 5e10
    bytes_per_s: float = 2e10
    link_bytes_per_s: float = 5e9
    link_latency_s: float = 2e-5
    launch_s: float = 5e-5
    parallel_ranks: int | None = None


#: The machine ``partition`` and ``plan_pipeline`` estimate for (no calibration).
DEFAULT_MACHINE = Machine()


@records.frozen
class SplitEstimate:
    """One split under one schedule: predicted step seconds, bubble, peak bytes per rank,
    and each stage's estimated forward and backward seconds."""

    split: tuple[int, ...]
    step_s: float
    bubble: float
    peak_bytes: tuple[int, ...]
    stage_forward_s: tuple[float, ...]
    stage_backward_s: tuple[float, ...]
    launches: int


def _segment_seconds(costs: SegmentCosts, machine: Machine) -> tuple[list[float], list[float]]:
    if costs.measured_forward_s is not None and costs.measured_backward_s is not None:
        return list(costs.measured_forward_s), list(costs.measured_backward_s)

    def seconds(flops: float, traffic: float) -> float:
        return max(flops / machine.flops_per_s, traffic / machine.bytes_per_s)

    forward = [seconds(f, b) for f, b in zip(costs.forward_flops, costs.forward_bytes, strict=True)]
    backward = [
        seconds(f, b) for f, b in zip(costs.backward_flops, costs.backward_bytes, strict=True)
    ]
    return forward, backward


def compositions(total: int, parts: int) -> Iterator[tuple[int, ...]]:
    """Every way to cut ``total`` segments into ``parts`` non-empty neighbouring groups."""
    for cuts in itertools.combinations(range(1, total), parts - 1):
        bounds = (0, *cuts, total)
        yield tuple(b - a for a, b in itertools.pairwise(bounds))


def least_bottleneck(weights: list[float], parts: int) -> float:
    """The least weight the heaviest of ``parts`` neighbouring groups can have (bisection on
    a greedy cover, to float precision)."""
    lo, hi = max(weights), sum(weights)
    for _ in range(60):
        mid = (lo + hi) / 2
        groups, load = 1, 0.0
        for w in weights:
            if load + w > mid:
                groups, load = groups + 1, w
            else:
                load += w
        lo, hi = (lo, mid) if groups <= parts else (mid, hi)
    return hi


def bounded_splits(weights: list[float], parts: int, slack: float) -> Iterator[tuple[int, ...]]:
    """Splits whose heaviest group weighs at most ``slack`` times the least possible, in
    the order of their group sizes (the first group's smallest first)."""
    limit = least_bottleneck(weights, parts) * slack
    needed = _groups_needed(weights, limit)

    def extend(start: int, left: int) -> Iterator[tuple[int, ...]]:
        if left == 1:
            if sum(weights[start:]) <= limit:
                yield (len(weights) - start,)
            return
        load = 0.0
        for end in range(start + 1, len(weights) - left + 2):
            load += weights[end - 1]
            if load > limit:
                break
            # Only prefixes the rest can complete: without this, 16 groups of 66
            # segments searched for minutes among prefixes that lead nowhere.
            if needed[end] <= left - 1:
                for rest in extend(end, left - 1):
                    yield (end - start, *rest)

    return extend(0, parts)


def _groups_needed(weights: list[float], limit: float) -> list[int]:
    """For each start, the fewest neighbouring groups of at most ``limit`` that cover the
    segments from it to the end (greedy, which is optimal; ``len(weights) + 1``: none can).
    Any count from that to the segments left is possible too: a group splits further."""
    count = len(weights)
    needed = [0] * (count + 1)
    for start in range(count - 1, -1, -1):
        load, end = 0.0, start
        while end < count and load + weights[end] <= limit:
            load += weights[end]
            end += 1
        needed[start] = count + 1 if end == start else min(count + 1, 1 + needed[end])
    return needed


def estimate_split(
    schedule: Schedule,
    split: tuple[int, ...],
    costs: SegmentCosts,
    num_microbatches: int,
    machine: Machine = DEFAULT_MACHINE,
) -> SplitEstimate:
    """Simulate ``schedule`` with the stages ``split`` makes of the segments."""
    return _SplitSimulator(schedule, costs, num_microbatches, machine).estimate(split)


@records.frozen
class StagedSplit:
    """One split's stages: forward and backward seconds, parameter and activation bytes,
    and the time to send what crosses its heaviest boundary."""

    forward_s: list[float]
    backward_s: list[float]
    param_bytes: list[int]
    activation_bytes: list[int]
    transfer_s: float


class SplitStages:
    """``StagedSplit`` of each split of one program's segments on one machine, made once:
    the schedules a planner weighs share their candidate splits."""

    def __init__(self, costs: SegmentCosts, machine: Machine = DEFAULT_MACHINE):
        self.costs, self.machine = costs, machine
        self.forward, self.backward = _segment_seconds(costs, machine)
        self._made: dict[tuple[int, ...], StagedSplit] = {}

    def of(self, split: tuple[int, ...]) -> StagedSplit:
        staged = self._made.get(split)
        if staged is None:
            staged = self._made[split] = self._stage(split)
        return staged

    def _stage(self, split: tuple[int, ...]) -> StagedSplit:
        costs, machine = self.costs, self.machine
        bounds = [0, *itertools.accumulate(split)]
        groups = [range(a, b) for a, b in itertools.pairwise(bounds)]
        send = [
            machine.link_latency_s + costs.boundary_bytes[b - 1] / machine.link_bytes_per_s
            for b in bounds[1:-1]
        ]
        return StagedSplit(
            forward_s=[sum(self.forward[i] for i in g) for g in groups],
            backward_s=[sum(self.backward[i] for i in g) for g in groups],
            param_bytes=[2 * sum(costs.param_bytes[i] for i in g) for g in groups],
            activation_bytes=[sum(costs.activation_bytes[i] for i in g) for g in groups],
            transfer_s=max(send, default=0.0),
        )


class _SplitSimulator:
    """Estimates many splits of one program under one schedule: the schedule's task
    lists are checked and linked once, each split's stages made once (``stages``, which
    other schedules may share)."""

    def __init__(
        self,
        schedule: Schedule,
        costs: SegmentCosts,
        num_microbatches: int,
        machine: Machine,
        stages: SplitStages | None = None,
    ):
        self.machine = machine
        self.prepared = schedule.prepare(num_microbatches)
        self.stages = stages if stages is not None else SplitStages(costs, machine)
        tasks = self.prepared.arrays.tasks
        self._stage = np.array([task.stage for task in tasks], dtype=np.int64)
        self._is_forward = np.array([task.kind == FWD for task in tasks], dtype=bool)
        self._is_backward = np.array([task.kind == BWD for task in tasks], dtype=bool)
        self._rank_stages = [schedule.stages_on_rank(r) for r in range(schedule.mpmd_dim)]

    def estimate(self, split: tuple[int, ...]) -> SplitEstimate:
        """The schedule simulated with the stages ``split`` makes of the segments."""
        (estimate,) = self.estimate_many([split])
        return estimate

    def estimate_many(self, splits: Sequence[tuple[int, ...]]) -> list[SplitEstimate]:
        """``estimate`` of each split, the splits simulated together
        (``PreparedTasks.summarize_many``: the same numbers as one by one)."""
        if not splits:
            return []
        staged = [self.stages.of(split) for split in splits]
        stage_fwd = np.array([s.forward_s for s in staged])
        stage_bwd = np.array([s.backward_s for s in staged])
        task_fwd, task_bwd = stage_fwd[:, self._stage], stage_bwd[:, self._stage]
        # A forward costs its stage's forward, a backward its backward; each half of a
        # split backward half of it.
        task_cost = np.where(
            self._is_forward, task_fwd, np.where(self._is_backward, task_bwd, task_bwd / 2)
        )
        summaries = self.prepared.summarize_many(
            task_cost,
            transfer_costs=[s.transfer_s for s in staged],
            launch_cost=self.machine.launch_s,
        )
        return [
            self._estimate(split, stages, summary)
            for split, stages, summary in zip(splits, staged, summaries, strict=True)
        ]

    def _estimate(
        self, split: tuple[int, ...], stages: StagedSplit, result: StepSummary
    ) -> SplitEstimate:
        machine = self.machine
        params, activations = stages.param_bytes, stages.activation_bytes
        peaks = []
        for on_rank, in_flight in zip(self._rank_stages, result.peak_in_flight, strict=True):
            peaks.append(
                sum(params[s] for s in on_rank) + in_flight * max(activations[s] for s in on_rank)
            )
        return SplitEstimate(
            split=split,
            step_s=max(
                result.makespan,
                sum(result.busy_time) / (machine.parallel_ranks or result.num_ranks),
                result.launches * machine.launch_s,
            ),
            bubble=result.bubble_fraction,
            peak_bytes=tuple(peaks),
            stage_forward_s=tuple(stages.forward_s),
            stage_backward_s=tuple(stages.backward_s),
            launches=result.launches,
        )


def candidate_splits(
    costs: SegmentCosts, num_stages: int, machine: Machine = DEFAULT_MACHINE
) -> list[tuple[int, ...]]:
    """The splits worth simulating for ``num_stages`` stages (see the module doc)."""
    n = costs.num_segments
    if num_stages > n:
        raise ScheduleError(
            f"the schedule has {num_stages} stages but the program only {n} marked segments: "
            "mark more stage boundaries, or use a schedule with fewer stages"
        )
    if math.comb(n - 1, num_stages - 1) <= MAX_ENUMERATED:
        return list(compositions(n, num_stages))
    forward, backward = _segment_seconds(costs, machine)
    weights = [f + b for f, b in zip(forward, backward, strict=True)]
    # The splits with the least bottleneck first (the search lists splits starting with
    # small groups first, so a single wide bound would miss the balanced ones).
    found: dict[tuple[int, ...], None] = {}
    for slack in (1.0 + 1e-9, 1.05, 1.25):
        for split in itertools.islice(bounded_splits(weights, num_stages, slack), MAX_ENUMERATED):
            found.setdefault(split)
            if len(found) >= MAX_ENUMERATED:
                return list(found)
    return list(found)


def rank_splits(
    schedule: Schedule,
    costs: SegmentCosts,
    num_microbatches: int,
    *,
    memory_limit_bytes: int | None = None,
    machine: Machine = DEFAULT_MACHINE,
    stages: SplitStages | None = None,
) -> list[SplitEstimate]:
    """Every candidate split simulated, fitting ones first, fastest first. ``stages``
    (of ``costs`` on ``machine``): the splits' stages, shared with other schedules."""
    splits = candidate_splits(costs, schedule.num_stages, machine)
    simulator = _SplitSimulator(schedule, costs, num_microbatches, machine, stages)
    estimates = simulator.estimate_many(splits)

    def over(e: SplitEstimate) -> bool:
        return memory_limit_bytes is not None and max(e.peak_bytes) > memory_limit_bytes

    fitting = [e.step_s for e in estimates if not over(e)]
    near = min(fitting, default=math.inf) * (1 + TIE_TOLERANCE)

    def key(e: SplitEstimate) -> tuple[bool, bool, float, float]:
        # Within the tolerance of the best, the estimate cannot tell: the most balanced.
        tied = e.step_s <= near
        bottleneck = max(f + b for f, b in zip(e.stage_forward_s, e.stage_backward_s, strict=True))
        return (over(e), not tied, bottleneck if tied else e.step_s, max(e.peak_bytes))

    return sorted(estimates, key=key)


def choose_split(
    schedule: Schedule,
    costs: SegmentCosts,
    num_microbatches: int,
    *,
    memory_limit_bytes: int | None = None,
    machine: Machine = DEFAULT_MACHINE,
) -> SplitEstimate:
    """The split with the least simulated step time that fits the memory limit."""
    ranked = rank_splits(
        schedule, costs, num_microbatches, memory_limit_bytes=memory_limit_bytes, machine=machine
    )
    best = ranked[0]
    if memory_limit_bytes is not None and max(best.peak_bytes) > memory_limit_bytes:
        raise ScheduleError(
            f"no split of the {costs.num_segments} marked segments into {schedule!r}'s "
            f"{schedule.num_stages} stages fits memory_limit_bytes={memory_limit_bytes}: the "
            f"least estimated peak is {min(max(e.peak_bytes) for e in ranked)} bytes on a rank"
        )
    return best


def check_fits(schedule: Schedule, estimate: SplitEstimate, memory_limit_bytes: int) -> None:
    """A ``ScheduleError`` unless the split ``estimate`` estimates fits the limit on every
    rank: a limit asked for is honoured or refused, also where nothing was chosen (a
    forced split, or as many segments as stages)."""
    peak = max(estimate.peak_bytes)
    if peak <= memory_limit_bytes:
        return
    rank = estimate.peak_bytes.index(peak)
    raise ScheduleError(
        f"the stage split {estimate.split} under {schedule!r} has an estimated peak of {peak} "
        f"bytes on rank {rank}, over memory_limit_bytes={memory_limit_bytes}: raise the "
        "limit, or spread the stages over more ranks"
    )
