"""JaxPP's schedule names, and the older JaxPP task grid.

jaxpp_mlir's schedules carry JaxPP's names and constructor arguments, and
``schedule.tasks(n)`` already has current JaxPP's format: one ordered list per
rank of tasks printing as ``fwd_2__0`` / ``bwd_2__0`` and ``FusedTask(...)``
(the tutorial's output). Older JaxPP releases returned a time grid instead:
one list per rank, one entry per time step, each a
``Task(stage_id, mubatch_idx, task_type)`` or ``None`` (idle);
``jaxpp_grid(schedule, n)`` gives that, placing each rank's order in time by
the schedule simulation with unit costs.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from jaxpp_mlir import schedules as _native
from jaxpp_mlir.schedules import (
    UNIT_COSTS,
    Eager1F1B,
    GPipe,
    Interleaved1F1B,
    Schedule,
    Std1F1B,
    ZeroBubble,
)


class TaskType(enum.Enum):
    """JaxPP's task kinds."""

    FWD = 1
    BWD = 2
    BWD_I = 3
    BWD_W = 4

    def __repr__(self) -> str:
        return f"TaskType.{self.name}"


_KIND = {
    _native.FWD: TaskType.FWD,
    _native.BWD: TaskType.BWD,
    _native.BWD_I: TaskType.BWD_I,
    _native.BWD_W: TaskType.BWD_W,
}


class GridTask(NamedTuple):
    """One entry of JaxPP's grid: a pass of ``stage_id`` over microbatch ``mubatch_idx``."""

    stage_id: int
    mubatch_idx: int
    task_type: TaskType


ScheduleTasks = list[list["GridTask | None"]]


def jaxpp_grid(schedule: Schedule, num_microbatches: int) -> ScheduleTasks:
    """``schedule``'s tasks as JaxPP's grid (rank by unit time step, ``None`` when idle)."""
    result = schedule.simulate(num_microbatches, costs=UNIT_COSTS)
    ends = [int(round(end)) for row in result.timeline for _, end, _ in row]
    grid: ScheduleTasks = [[None] * max(ends, default=0) for _ in range(result.num_ranks)]
    for rank, row in enumerate(result.timeline):
        for start, _, item in row:
            for offset, task in enumerate(item.parts):
                grid[rank][int(round(start)) + offset] = GridTask(
                    task.stage, task.microbatch, _KIND[task.kind]
                )
    return grid


#: JaxPP's abstract schedule base class.
BaseSchedule = Schedule


__all__ = [
    "BaseSchedule",
    "Eager1F1B",
    "GPipe",
    "GridTask",
    "Interleaved1F1B",
    "ScheduleTasks",
    "Std1F1B",
    "TaskType",
    "ZeroBubble",
    "jaxpp_grid",
]
