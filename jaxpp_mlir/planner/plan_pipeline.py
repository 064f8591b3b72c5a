"""``plan_pipeline``: the pipeline layouts that fit a mesh, predicted and ranked.

For a lowered step with marked segments, every built-in schedule (``schedules.built_in``)
that fits the mesh's ``mpmd_dim`` ranks and the segment count (those with one stage per
rank; those with several, ``takes_mpmd_dim``, with 2 to ``MAX_VIRTUAL_STAGES`` per rank)
is paired with its best stage split (``stage_split.rank_splits``) and simulated on the
segments' estimated costs. The candidates come back best first: least predicted step
time among those whose estimated peak bytes per rank fit ``memory_limit_bytes``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

from jax.interpreters.mlir import ir

from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.errors import ScheduleError
from jaxpp_mlir.ir.utils import find_loop, get_main
from jaxpp_mlir.mesh import MpmdMesh, parallel_ranks
from jaxpp_mlir.planner.segment_costs import SegmentCosts, segment_costs
from jaxpp_mlir.planner.stage_split import (
    DEFAULT_MACHINE,
    Machine,
    SplitEstimate,
    SplitStages,
    rank_splits,
)
from jaxpp_mlir.runtime import records
from jaxpp_mlir.schedules import Schedule
from jaxpp_mlir.schedules.built_in import BUILT_IN, takes_mpmd_dim

#: The most stages per rank an interleaved candidate gets.
MAX_VIRTUAL_STAGES = 4


@records.frozen
class Candidate:
    """One layout: a schedule, its stage split and what the simulation predicts."""

    schedule: Schedule
    stage_split: tuple[int, ...]
    step_s: float
    bubble: float
    peak_bytes: tuple[int, ...]
    launches: int
    fits: bool

    @classmethod
    def of(cls, schedule: Schedule, estimate: SplitEstimate, limit: int | None) -> Candidate:
        return cls(
            schedule=schedule,
            stage_split=estimate.split,
            step_s=estimate.step_s,
            bubble=estimate.bubble,
            peak_bytes=estimate.peak_bytes,
            launches=estimate.launches,
            fits=limit is None or max(estimate.peak_bytes) <= limit,
        )


@records.frozen
class PipelinePlan(Sequence[Candidate]):
    """The candidates, best first, with the inputs they were predicted from."""

    candidates: tuple[Candidate, ...]
    num_microbatches: int
    costs: SegmentCosts
    memory_limit_bytes: int | None

    def __getitem__(self, index: Any) -> Any:
        return self.candidates[index]

    def __len__(self) -> int:
        return len(self.candidates)

    @property
    def best(self) -> Candidate:
        return self.candidates[0]

    def best_fitting(self) -> Candidate:
        """The best candidate; a ``ScheduleError`` listing the candidates of least peak
        bytes when none fits the memory limit."""
        best = self.candidates[0]
        if best.fits:
            return best
        closest = sorted(self.candidates, key=lambda c: (max(c.peak_bytes), c.step_s))[:3]
        listing = "; ".join(
            f"{c.schedule!r} with stage split {c.stage_split}: {max(c.peak_bytes)} bytes"
            for c in closest
        )
        raise ScheduleError(
            f"no built-in schedule fits memory_limit_bytes={self.memory_limit_bytes} on every "
            f"rank for {self.costs.num_segments} marked segments and {self.num_microbatches} "
            f"microbatches; the least estimated peaks per rank: {listing}. Raise the limit, "
            "or spread the stages over more ranks"
        )

    def __str__(self) -> str:
        names = [repr(c.schedule) for c in self.candidates]
        splits = [str(c.stage_split) for c in self.candidates]
        wide, split_wide = max(map(len, names), default=8), max(map(len, splits), default=11)
        limit = self.memory_limit_bytes
        measured = self.costs.measured_forward_s is not None
        lines = [
            f"pipeline plans for {self.costs.num_segments} marked segments, "
            f"{self.num_microbatches} microbatches"
            + (", measured segment costs" if measured else "")
            + (f", memory limit {limit} bytes per rank" if limit is not None else ""),
            f"{'#':>2}  {'schedule':<{wide}}  {'stage split':<{split_wide}}  {'step ms':>9} "
            f"{'bubble':>7} {'peak MiB/rank':>13} {'launches':>8}",
        ]
        for index, (c, name, split) in enumerate(zip(self.candidates, names, splits, strict=True)):
            over = "" if c.fits else "  (over the memory limit)"
            lines.append(
                f"{index:>2}  {name:<{wide}}  {split:<{split_wide}}  {c.step_s * 1e3:>9.3f} "
                f"{c.bubble:>7.1%} {max(c.peak_bytes) / 2**20:>13.2f} {c.launches:>8}{over}"
            )
        return "\n".join(lines)


def machine_for(mesh: MpmdMesh) -> Machine:
    """The default machine, with CPU devices sharing the host's cores."""
    return dataclasses.replace(DEFAULT_MACHINE, parallel_ranks=parallel_ranks(mesh))


def schedule_kinds(num_segments: int, mpmd_dim: int) -> Iterator[Schedule]:
    """Every built-in schedule that places at most ``num_segments`` stages on the ranks:
    one stage per rank, or 2 to ``MAX_VIRTUAL_STAGES`` per rank for those that take
    ``mpmd_dim`` (a schedule that refuses a layout is left out)."""
    for cls in BUILT_IN.values():
        if takes_mpmd_dim(cls):
            layouts = [
                (virtual * mpmd_dim, mpmd_dim)
                for virtual in range(2, MAX_VIRTUAL_STAGES + 1)
                if virtual * mpmd_dim <= num_segments
            ]
        else:
            layouts = [(mpmd_dim,)] if mpmd_dim <= num_segments else []
        for layout in layouts:
            try:
                yield cls(*layout)
            except ScheduleError:
                continue


def plan_candidates(
    costs: SegmentCosts,
    num_microbatches: int,
    mpmd_dim: int,
    *,
    memory_limit_bytes: int | None = None,
    machine: Machine = DEFAULT_MACHINE,
) -> PipelinePlan:
    """Each fitting schedule with its best split, simulated, best first."""
    candidates = []
    stages = SplitStages(costs, machine)  # the schedules of one stage count share splits
    for schedule in schedule_kinds(costs.num_segments, mpmd_dim):
        try:
            ranked = rank_splits(
                schedule,
                costs,
                num_microbatches,
                memory_limit_bytes=memory_limit_bytes,
                machine=machine,
                stages=stages,
            )
        except ScheduleError:
            continue  # this schedule cannot run this many microbatches
        candidates.append(Candidate.of(schedule, ranked[0], memory_limit_bytes))
    if not candidates:
        raise ScheduleError(
            f"no built-in schedule fits {costs.num_segments} marked segments on {mpmd_dim} "
            f"ranks with {num_microbatches} microbatches: mark at least {mpmd_dim} stages"
        )
    candidates.sort(key=lambda c: (not c.fits, c.step_s, max(c.peak_bytes)))
    return PipelinePlan(tuple(candidates), num_microbatches, costs, memory_limit_bytes)


def plan_module(
    module: ir.Operation,
    mpmd_dim: int,
    *,
    costs: SegmentCosts | None = None,
    memory_limit_bytes: int | None = None,
    machine: Machine = DEFAULT_MACHINE,
) -> PipelinePlan:
    """``plan_candidates`` for a segmented module (after its segmenter): the segments'
    ``costs`` (default: estimated, ``segment_costs``) and its loop's microbatch count."""
    loop = find_loop(get_main(module))
    if loop is None:
        raise ScheduleError(
            "planning a pipeline needs a treduce microbatch loop: the step has none"
        )
    return plan_candidates(
        costs if costs is not None else segment_costs(module),
        jaxpp.get_int_attr(loop, jaxpp.LOOP_NUM_MICROBATCHES_ATTR) or 1,
        mpmd_dim,
        memory_limit_bytes=memory_limit_bytes,
        machine=machine,
    )
