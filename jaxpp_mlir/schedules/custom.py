"""``CustomSchedule``: a schedule given directly as per-rank task lists."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from jaxpp_mlir.errors import ScheduleError
from jaxpp_mlir.schedules.base import Schedule, check_int, uses_split_backward
from jaxpp_mlir.schedules.task import FusedTask, RankTasks, ScheduleItem, Task


class CustomSchedule(Schedule):
    """A user's own per-rank task lists, for the fixed number of microbatches they cover.

    ``per_rank_tasks[r]`` is rank ``r``'s ordered list of ``Task``/``FusedTask``;
    ``stage_rank`` places the stages: ``None`` (``s % num_ranks``), a sequence (entry
    ``s`` is the rank of stage ``s``) or a function of the stage. The number of
    microbatches is one more than the largest microbatch index used. Nothing is checked
    beyond types and ranges here: ``validate`` (or ``simulate``) runs the full checks.
    """

    def __init__(
        self,
        per_rank_tasks: Sequence[Sequence[ScheduleItem]],
        num_stages: int,
        stage_rank: Sequence[int] | Callable[[int], int] | None = None,
    ) -> None:
        rows = [list(row) for row in per_rank_tasks]
        if not rows:
            raise ScheduleError("CustomSchedule needs at least one rank's task list")
        super().__init__(num_stages, len(rows))
        if stage_rank is None:
            placement = [stage % self.mpmd_dim for stage in range(self.num_stages)]
        elif callable(stage_rank):
            placement = [stage_rank(stage) for stage in range(self.num_stages)]
        else:
            placement = list(stage_rank)
            if len(placement) != self.num_stages:
                raise ScheduleError(
                    f"stage_rank has {len(placement)} entries for {self.num_stages} stages"
                )
        for stage, rank in enumerate(placement):
            check_int(f"stage_rank({stage})", rank, 0)
            if rank >= self.mpmd_dim:
                raise ScheduleError(
                    f"stage_rank({stage}) = {rank}, but there are only {self.mpmd_dim} ranks"
                )
        self._placement = tuple(placement)
        microbatches = set()
        for rank, row in enumerate(rows):
            for step, item in enumerate(row):
                if not isinstance(item, Task | FusedTask):
                    raise ScheduleError(
                        f"rank {rank} step {step}: expected Task or FusedTask, got {item!r}"
                    )
                microbatches.update(task.microbatch for task in item.parts)
        if not microbatches:
            raise ScheduleError("CustomSchedule has no tasks")
        self._rows = tuple(tuple(row) for row in rows)
        self.num_microbatches = max(microbatches) + 1
        self.splits_backward = uses_split_backward(rows)

    def _place(self, stage: int) -> int:
        return self._placement[stage]

    def _check_num_microbatches(self, num_microbatches: int) -> None:
        if num_microbatches != self.num_microbatches:
            raise ScheduleError(
                f"this CustomSchedule is defined for {self.num_microbatches} microbatches, "
                f"not {num_microbatches}"
            )

    def _build(self, num_microbatches: int) -> RankTasks:
        return [list(row) for row in self._rows]

    def _repr_fields(self) -> dict[str, Any]:
        return {
            "num_stages": self.num_stages,
            "mpmd_dim": self.mpmd_dim,
            "num_microbatches": self.num_microbatches,
        }
