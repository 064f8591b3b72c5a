"""JaxPP's schedule classes and their ``tasks(n)`` grid, over jaxpp_mlir's schedules.

JaxPP's ``schedule.tasks(n)`` is a time grid: one list per rank, one entry
per time step, each a ``Task(stage_id, mubatch_idx, task_type)`` or ``None``
(idle). jaxpp_mlir's schedules give an ordered task list per rank instead;
here the grid is that order placed in time by the schedule simulation with
unit costs (every task one step, a fused task one step per part), which
is the same grid JaxPP draws for its 1F1B-family schedules.

The classes below are the jaxpp_mlir schedules under JaxPP's names with
JaxPP's grid as ``tasks``; ``native()`` gives the jaxpp_mlir schedule (what
``partition`` runs; ``mpmd_jit_with_loop`` converts on its own).
"""

from __future__ import annotations

import enum
from typing import Any, NamedTuple

from jaxpp_mlir import schedules as _native
from jaxpp_mlir.schedules import UNIT_COSTS
from jaxpp_mlir.schedules.base import Schedule
from jaxpp_mlir.schedules.parse import schedule_from_text


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


class Task(NamedTuple):
    """One entry of JaxPP's grid: a pass of ``stage_id`` over microbatch ``mubatch_idx``."""

    stage_id: int
    mubatch_idx: int
    task_type: TaskType


ScheduleTasks = list[list[Task | None]]


def jaxpp_grid(schedule: Schedule, num_microbatches: int) -> ScheduleTasks:
    """``schedule``'s tasks as JaxPP's grid (rank by unit time step, ``None`` when idle)."""
    result = Schedule.simulate(schedule, num_microbatches, costs=UNIT_COSTS)
    ends = [int(round(end)) for row in result.timeline for _, end, _ in row]
    grid: ScheduleTasks = [[None] * max(ends, default=0) for _ in range(result.num_ranks)]
    for rank, row in enumerate(result.timeline):
        for start, _, item in row:
            for offset, task in enumerate(item.parts):
                grid[rank][int(round(start)) + offset] = Task(
                    task.stage, task.microbatch, _KIND[task.kind]
                )
    return grid


class _JaxppNames:
    """Mixin: JaxPP's ``tasks`` grid; jaxpp_mlir's order stays reachable via ``native()``."""

    def native(self) -> Schedule:
        return schedule_from_text(repr(self), num_stages=self.num_stages, mpmd_dim=self.mpmd_dim)

    def tasks(self, n_mubatches: int) -> ScheduleTasks:  # JaxPP's parameter name
        return jaxpp_grid(self.native(), n_mubatches)

    def simulate(self, num_microbatches: int, **kwargs: Any) -> Any:
        return self.native().simulate(num_microbatches, **kwargs)

    def validate(self, num_microbatches: int) -> None:
        self.native().validate(num_microbatches)

    def render(self, num_microbatches: int) -> str:
        return self.native().render(num_microbatches)


class GPipe(_JaxppNames, _native.GPipe):
    pass


class Std1F1B(_JaxppNames, _native.Std1F1B):
    pass


class Eager1F1B(_JaxppNames, _native.Eager1F1B):
    pass


class Interleaved1F1B(_JaxppNames, _native.Interleaved1F1B):
    pass


class ZeroBubble(_JaxppNames, _native.ZeroBubble):
    pass


#: JaxPP's abstract schedule base class.
BaseSchedule = Schedule


def to_native(schedule: Any) -> Any:
    """The jaxpp_mlir schedule for ``schedule`` (JaxPP-named or native; None stays None)."""
    return schedule.native() if isinstance(schedule, _JaxppNames) else schedule
