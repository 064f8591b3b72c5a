"""The ``Schedule`` base class: placement of stages on ranks and per-rank task order."""

from __future__ import annotations

import abc
from typing import Any

from jaxpp_mlir.errors import ScheduleError
from jaxpp_mlir.schedules.render import render_timeline
from jaxpp_mlir.schedules.simulate import (
    UNIT_COSTS,
    Costs,
    PreparedTasks,
    SimulationResult,
    collector_paused,
)
from jaxpp_mlir.schedules.task import BWD_I, BWD_W, RankTasks

#: The most microbatches a schedule orders (beyond it, building and checking the task
#: lists would take minutes and gigabytes instead of failing).
MAX_MICROBATCHES = 100_000


def check_int(name: str, value: object, minimum: int) -> int:
    """``value`` if it is an int >= ``minimum``, else a ``ScheduleError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScheduleError(f"{name} must be an int, got {value!r}")
    if value < minimum:
        raise ScheduleError(f"{name} must be >= {minimum}, got {value}")
    return value


class Schedule(abc.ABC):
    """A pipeline schedule: which rank runs each stage, and each rank's task order.

    ``num_stages`` pipeline stages run on ``mpmd_dim`` ranks; ``stage_rank(s)`` places
    stage ``s`` (default ``s % mpmd_dim``). ``tasks(n)`` gives, for ``n`` microbatches, one
    ordered list of ``Task``/``FusedTask`` per rank. ``splits_backward`` says whether the
    schedule uses split backward tasks (``bwd_i``/``bwd_w``) instead of ``bwd``.
    """

    splits_backward: bool = False

    def __init__(self, num_stages: int, mpmd_dim: int) -> None:
        self.num_stages = check_int("num_stages", num_stages, 1)
        self.mpmd_dim = check_int("mpmd_dim", mpmd_dim, 1)
        if self.mpmd_dim > self.num_stages:
            raise ScheduleError(
                f"mpmd_dim ({mpmd_dim}) exceeds num_stages ({num_stages}): a rank would have "
                "no stage"
            )

    # -- placement ---------------------------------------------------------------------

    def stage_rank(self, stage: int) -> int:
        """The rank that runs ``stage``."""
        check_int("stage", stage, 0)
        if stage >= self.num_stages:
            raise ScheduleError(f"stage {stage} out of range (num_stages={self.num_stages})")
        return self._place(stage)

    def _place(self, stage: int) -> int:
        """Rank of a valid ``stage``; subclasses with another placement override this."""
        return stage % self.mpmd_dim

    def stages_on_rank(self, rank: int) -> list[int]:
        """The stages placed on ``rank``, ascending."""
        check_int("rank", rank, 0)
        return [stage for stage in range(self.num_stages) if self._place(stage) == rank]

    # -- task order --------------------------------------------------------------------

    def tasks(self, num_microbatches: int) -> RankTasks:
        """One ordered list of tasks per rank for ``num_microbatches`` microbatches."""
        check_int("num_microbatches", num_microbatches, 1)
        if num_microbatches > MAX_MICROBATCHES:
            raise ScheduleError(
                f"{num_microbatches} microbatches exceed the limit of {MAX_MICROBATCHES} "
                f"(every microbatch is a task per stage: use fewer, larger microbatches)"
            )
        self._check_num_microbatches(num_microbatches)
        # Built once per count (partition asks several times); the caller gets its own lists.
        cache = self.__dict__.setdefault("_tasks_cache", {})
        if num_microbatches not in cache:
            cache[num_microbatches] = tuple(tuple(row) for row in self._build(num_microbatches))
        return [list(row) for row in cache[num_microbatches]]

    def _check_num_microbatches(self, num_microbatches: int) -> None:
        """Raise ``ScheduleError`` if the schedule cannot run this many microbatches.

        The default accepts any count; schedules with constraints override it.
        """
        return None

    @abc.abstractmethod
    def _build(self, num_microbatches: int) -> RankTasks:
        """The per-rank lists for a checked number of microbatches."""

    # -- checks, simulation, display ---------------------------------------------------

    def simulate(
        self,
        num_microbatches: int,
        costs: Costs | None = None,
        transfer_cost: float = 0.0,
        launch_cost: float = 0.0,
    ) -> SimulationResult:
        """Simulate the schedule (see ``simulate.simulate_tasks``); raises if it cannot run."""
        return self.prepare(num_microbatches).simulate(
            costs, transfer_cost=transfer_cost, launch_cost=launch_cost
        )

    def prepare(self, num_microbatches: int) -> PreparedTasks:
        """The schedule's task lists for ``num_microbatches``, checked and linked, to
        ``simulate`` under many costs (raises if they are malformed)."""
        with collector_paused():
            per_rank = self.tasks(num_microbatches)
        return PreparedTasks(
            per_rank,
            num_stages=self.num_stages,
            num_microbatches=num_microbatches,
            stage_rank=self.stage_rank,
        )

    def validate(self, num_microbatches: int) -> None:
        """Raise ``ScheduleError`` unless every task appears once, on its rank, and it runs."""
        self.simulate(num_microbatches, costs=UNIT_COSTS)

    def render(self, num_microbatches: int) -> str:
        """Rank-by-time-step grid of the schedule simulated with unit costs."""
        return render_timeline(self.simulate(num_microbatches, costs=UNIT_COSTS))

    def plot(
        self, num_microbatches: int, *, path: Any = None, costs: Costs | None = None, **figure: Any
    ) -> Any:
        """Gantt chart of the simulated schedule (matplotlib; see ``schedules.plot``)."""
        from jaxpp_mlir.schedules.plot import plot_schedule

        return plot_schedule(self, num_microbatches, path=path, costs=costs, **figure)

    def _repr_fields(self) -> dict[str, Any]:
        return {"num_stages": self.num_stages, "mpmd_dim": self.mpmd_dim}

    def __repr__(self) -> str:
        fields = ", ".join(f"{key}={value!r}" for key, value in self._repr_fields().items())
        return f"{type(self).__name__}({fields})"


def uses_split_backward(per_rank: RankTasks) -> bool:
    """Whether any item of the lists is a ``bwd_i`` or ``bwd_w`` task."""
    return any(
        task.kind in (BWD_I, BWD_W) for row in per_rank for item in row for task in item.parts
    )
