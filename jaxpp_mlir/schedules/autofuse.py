"""Automatic task fusion: back-to-back items of one rank merged into one launch.

``fuse_schedule_tasks`` takes per-rank lists of ``Task``/``FusedTask`` and returns lists
in which runs of consecutive items of a rank are merged into one ``FusedTask`` (one
executable launch: its receives first, one run, then its sends), but only where that
delays no task of any rank. It decides on one simulation of the input (``simulate``,
with a host cost per launch) and merges the next item ``b`` into the group ``g`` a rank
is building when

* every input ``b`` needs from another rank is there (transfer included) before ``g``
  starts: the fused launch receives everything first, so it would otherwise wait; and
* no task of another rank reads an output of ``g`` sooner than ``b`` ends (plus the
  transfer): the fused launch sends its outputs only after its last part.

The result is then simulated again; if some task would start later than in the input
(decisions made on the input's times can interact), merges are taken back one group at
a time, each check a simulation, until none is delayed. Precondition: the lists pass
``check.check_tasks`` and run (no deadlock). Postcondition: the result holds the same
tasks in the same order on each rank, every task starts no later, and the makespan is
no longer, under the same costs. ``AutoFused`` wraps a ``Schedule`` with it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from jaxpp_mlir.errors import ScheduleError
from jaxpp_mlir.schedules.base import Schedule, check_int
from jaxpp_mlir.schedules.check import check_tasks
from jaxpp_mlir.schedules.simulate import Costs, SimulationResult, simulate_tasks
from jaxpp_mlir.schedules.task import FusedTask, RankTasks, ScheduleItem, Task

logger = logging.getLogger(__name__)

#: Host cost of one executable launch in the decision's model, relative to a forward's 1.0
#: (``DEFAULT_COSTS``): it only has to be positive for fewer launches to show as a gain.
DEFAULT_LAUNCH_COST = 0.1

_EPSILON = 1e-9

#: One rank's groups: each a run of consecutive steps (indices into the rank's list).
Groups = list[list[int]]


def fuse_schedule_tasks(
    per_rank: Sequence[Sequence[ScheduleItem]],
    *,
    num_stages: int,
    num_microbatches: int,
    stage_rank: Callable[[int], int],
    costs: Costs | None = None,
    transfer_cost: float = 0.0,
    launch_cost: float = DEFAULT_LAUNCH_COST,
    max_parts: int | None = None,
) -> RankTasks:
    """``per_rank`` with back-to-back items fused where that delays no task (see module).

    ``max_parts`` caps the tasks of one fused item (``None``: no cap; a fused item
    inlines every part's stage function into one executable, so compile time grows
    with it).
    """
    if max_parts is not None:
        check_int("max_parts", max_parts, 1)

    def run(rows: Sequence[Sequence[ScheduleItem]]) -> SimulationResult:
        return simulate_tasks(
            rows,
            num_stages=num_stages,
            num_microbatches=num_microbatches,
            stage_rank=stage_rank,
            costs=costs,
            transfer_cost=transfer_cost,
            launch_cost=launch_cost,
        )

    baseline = run(per_rank)
    where, needs = check_tasks(
        per_rank,
        num_stages=num_stages,
        num_microbatches=num_microbatches,
        stage_rank=stage_rank,
    )
    groups = _decide(per_rank, baseline, where, needs, transfer_cost, max_parts)
    fused = _apply(per_rank, groups)
    if _delays_nothing(run(fused), baseline):
        return fused
    logger.info("task fusion: merged decisions delay a task; checking them one by one")
    return _one_by_one(per_rank, groups, baseline, run)


def _decide(
    per_rank: Sequence[Sequence[ScheduleItem]],
    baseline: SimulationResult,
    where: dict[Task, tuple[int, int, int]],
    needs: dict[Task, tuple[Task, ...]],
    transfer_cost: float,
    max_parts: int | None,
) -> list[Groups]:
    """Each rank's groups, by the two rules of the module docstring on ``baseline``."""
    rule = _JoinRule(baseline, where, needs, transfer_cost, max_parts)
    all_groups = []
    for rank, row in enumerate(per_rank):
        groups: Groups = []
        for step in range(len(row)):
            if groups and rule.can_join(rank, row, groups[-1], step):
                groups[-1].append(step)
            else:
                groups.append([step])
        all_groups.append(groups)
    return all_groups


class _JoinRule:
    """Whether the next item of a rank joins the group before it, on ``baseline``'s times."""

    def __init__(
        self,
        baseline: SimulationResult,
        where: dict[Task, tuple[int, int, int]],
        needs: dict[Task, tuple[Task, ...]],
        transfer_cost: float,
        max_parts: int | None,
    ) -> None:
        self.timeline = baseline.timeline
        self.where = where
        self.needs = needs
        self.transfer_cost = transfer_cost
        self.max_parts = max_parts
        self.readers: dict[Task, list[Task]] = {}
        for task, deps in needs.items():
            for dep in deps:
                self.readers.setdefault(dep, []).append(task)

    def _item_times(self, task: Task) -> tuple[float, float]:
        """When the item holding ``task`` had its inputs (before its launch), and ended."""
        rank, step, _ = self.where[task]
        start, end, _ = self.timeline[rank][step]
        return start, end

    def can_join(self, rank: int, row: Sequence[ScheduleItem], group: list[int], step: int) -> bool:
        parts = row[step].parts
        if self.max_parts is not None:
            if sum(len(row[s].parts) for s in group) + len(parts) > self.max_parts:
                return False
        hop = self.transfer_cost
        group_start = self.timeline[rank][group[0]][0]
        for task in parts:
            for dep in self.needs[task]:
                if self.where[dep][0] == rank:
                    continue
                if self._item_times(dep)[1] + hop > group_start + _EPSILON:
                    return False
        group_end = self.timeline[rank][step][1]
        for member in group:
            for task in row[member].parts:
                for reader in self.readers.get(task, ()):
                    if self.where[reader][0] == rank:
                        continue
                    if group_end + hop > self._item_times(reader)[0] + _EPSILON:
                        return False
        return True


def _apply(per_rank: Sequence[Sequence[ScheduleItem]], groups: list[Groups]) -> RankTasks:
    result: RankTasks = []
    for row, rank_groups in zip(per_rank, groups, strict=True):
        items: list[ScheduleItem] = []
        for group in rank_groups:
            if len(group) == 1:
                items.append(row[group[0]])
            else:
                items.append(FusedTask(tuple(task for step in group for task in row[step].parts)))
        result.append(items)
    return result


def _delays_nothing(result: SimulationResult, baseline: SimulationResult) -> bool:
    if result.makespan > baseline.makespan + _EPSILON:
        return False
    return all(
        result.start_times[task] <= start + _EPSILON for task, start in baseline.start_times.items()
    )


def _one_by_one(
    per_rank: Sequence[Sequence[ScheduleItem]],
    groups: list[Groups],
    baseline: SimulationResult,
    run: Callable[[Sequence[Sequence[ScheduleItem]]], SimulationResult],
) -> RankTasks:
    """The decided groups kept one at a time, each only if nothing is delayed with it."""
    kept: list[Groups] = [[[step] for step in range(len(row))] for row in per_rank]
    for rank, rank_groups in enumerate(groups):
        for group in rank_groups:
            if len(group) == 1:
                continue
            trial = [list(g) for g in kept[rank] if g[0] not in group] + [group]
            trial.sort(key=lambda g: g[0])
            candidate = kept[:rank] + [trial] + kept[rank + 1 :]
            if _delays_nothing(run(_apply(per_rank, candidate)), baseline):
                kept = candidate
    return _apply(per_rank, kept)


class AutoFused(Schedule):
    """``schedule`` with back-to-back tasks fused where no rank is delayed by it.

    Places stages as ``schedule`` does; ``tasks(n)`` is ``fuse_schedule_tasks`` of
    ``schedule.tasks(n)`` under ``costs``, ``transfer_cost`` and ``launch_cost``.
    """

    def __init__(
        self,
        schedule: Schedule,
        *,
        costs: Costs | None = None,
        transfer_cost: float = 0.0,
        launch_cost: float = DEFAULT_LAUNCH_COST,
        max_parts: int | None = None,
    ) -> None:
        if not isinstance(schedule, Schedule):
            raise ScheduleError(
                f"AutoFused wraps a jaxpp_mlir schedule, got {type(schedule).__name__}"
            )
        super().__init__(schedule.num_stages, schedule.mpmd_dim)
        self.schedule = schedule
        self.splits_backward = schedule.splits_backward
        self.costs = costs
        self.transfer_cost = transfer_cost
        self.launch_cost = launch_cost
        self.max_parts = max_parts

    def _place(self, stage: int) -> int:
        return self.schedule.stage_rank(stage)

    def _check_num_microbatches(self, num_microbatches: int) -> None:
        self.schedule._check_num_microbatches(num_microbatches)

    def _build(self, num_microbatches: int) -> RankTasks:
        return fuse_schedule_tasks(
            self.schedule.tasks(num_microbatches),
            num_stages=self.num_stages,
            num_microbatches=num_microbatches,
            stage_rank=self.schedule.stage_rank,
            costs=self.costs,
            transfer_cost=self.transfer_cost,
            launch_cost=self.launch_cost,
            max_parts=self.max_parts,
        )

    def _repr_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {"schedule": self.schedule}
        if self.max_parts is not None:
            fields["max_parts"] = self.max_parts
        return fields

    def __repr__(self) -> str:
        return f"AutoFused({self.schedule!r})" if self.max_parts is None else super().__repr__()
