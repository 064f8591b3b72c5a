"""JaxPP's schedule names, and the older JaxPP task grid.

Each class is jaxpp_mlir's schedule of that name, built as JaxPP builds it
(keyword ``num_stages`` and ``mpmd_dim``) and checked first as JaxPP checks it,
with JaxPP's ``ValueError`` wording (``ScheduleError`` is a ``ValueError``).

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
from typing import Any, NamedTuple

from jaxpp_mlir import schedules as _native
from jaxpp_mlir.errors import ScheduleError
from jaxpp_mlir.schedules import UNIT_COSTS, Schedule


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


#: JaxPP's abstract schedule base class: every schedule here is one.
BaseSchedule = Schedule


def _check_num_stages(num_stages: int) -> None:
    if isinstance(num_stages, int) and num_stages <= 0:
        raise ScheduleError(
            f"The argument `num_stages` must be `>= 0` and not 0 (got {num_stages}): a "
            "schedule needs a stage"
        )


class _JaxppChecks:
    """JaxPP's constructor checks, run before jaxpp_mlir's own; JaxPP's ``get_mpmd_idx``."""

    def __init__(self, num_stages: int, *args: Any, **kwargs: Any) -> None:
        _check_num_stages(num_stages)
        super().__init__(num_stages, *args, **kwargs)  # type: ignore[call-arg]

    def get_mpmd_idx(self, stage_id: int) -> int:
        """JaxPP's name for ``stage_rank``."""
        return self.stage_rank(stage_id)  # type: ignore[attr-defined]


class InterleavedBaseSchedule(_JaxppChecks, Schedule):
    """JaxPP's base of the schedules placing several stages on each of ``mpmd_dim`` ranks."""

    def __init__(self, num_stages: int, mpmd_dim: int, *args: Any, **kwargs: Any) -> None:
        if isinstance(mpmd_dim, int) and mpmd_dim <= 0:
            raise ScheduleError(
                f"The argument `mpmd_dim` must be `>= 0` and not 0 (got {mpmd_dim}): a "
                "schedule needs a rank"
            )
        if isinstance(num_stages, int) and isinstance(mpmd_dim, int) and num_stages % mpmd_dim:
            raise ScheduleError(
                f"num_stages={num_stages} can not be evenly divided by mpmd_dim={mpmd_dim}: "
                "every rank holds the same number of stages"
            )
        super().__init__(num_stages, mpmd_dim, *args, **kwargs)


def _checked_like_jaxpp(native: type[Schedule], checks: type) -> Any:
    """``native`` with JaxPP's constructor checks first (same name, same docstring)."""
    return type(
        native.__name__, (checks, native), {"__doc__": native.__doc__, "__module__": __name__}
    )


GPipe = _checked_like_jaxpp(_native.GPipe, _JaxppChecks)
Std1F1B = _checked_like_jaxpp(_native.Std1F1B, _JaxppChecks)
Eager1F1B = _checked_like_jaxpp(_native.Eager1F1B, _JaxppChecks)
ZeroBubble = _checked_like_jaxpp(_native.ZeroBubble, _JaxppChecks)
Interleaved1F1B = _checked_like_jaxpp(_native.Interleaved1F1B, InterleavedBaseSchedule)
KimiK2 = _checked_like_jaxpp(_native.KimiK2, InterleavedBaseSchedule)
InterleavedGPipe = _checked_like_jaxpp(_native.InterleavedGPipe, InterleavedBaseSchedule)


class DualPipeV(InterleavedBaseSchedule, _native.DualPipeV):
    __doc__ = _native.DualPipeV.__doc__

    def __init__(self, num_stages: int, mpmd_dim: int, *args: Any, **kwargs: Any) -> None:
        if (
            isinstance(num_stages, int)
            and isinstance(mpmd_dim, int)
            and mpmd_dim > 0
            and num_stages != 2 * mpmd_dim
        ):
            raise ScheduleError(
                f"DualPipeV only supports 2 * mpmd_dim stages, self.num_stages={num_stages} "
                f"requested with self.mpmd_dim={mpmd_dim} (two stages per rank, in a V)"
            )
        super().__init__(num_stages, mpmd_dim, *args, **kwargs)

    def _check_num_microbatches(self, num_microbatches: int) -> None:
        if num_microbatches < self.num_stages:
            raise ScheduleError(
                f"DualPipeV requires n_mubatches={num_microbatches} >= "
                f"self.num_stages={self.num_stages} (mpmd_dim={self.mpmd_dim})"
            )


__all__ = [
    "BaseSchedule",
    "DualPipeV",
    "Eager1F1B",
    "GPipe",
    "GridTask",
    "Interleaved1F1B",
    "InterleavedBaseSchedule",
    "InterleavedGPipe",
    "KimiK2",
    "ScheduleTasks",
    "Std1F1B",
    "TaskType",
    "ZeroBubble",
    "jaxpp_grid",
]
