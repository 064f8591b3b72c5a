"""``GPipe``: all forwards, then all backwards."""

from __future__ import annotations

from typing import Any

from jaxpp_mlir.schedules.base import Schedule
from jaxpp_mlir.schedules.task import BWD, FWD, RankTasks, Task


class GPipe(Schedule):
    """GPipe (Huang et al., 2019): one stage per rank; rank ``r`` runs the forwards of
    stage ``r`` for every microbatch in order, then the backwards in the same order.

    Every rank keeps the activations of all ``m`` microbatches alive at its peak; the
    bubble fraction is ``(p-1)/(m+p-1)`` with equal forward and backward costs.
    """

    def __init__(self, num_stages: int) -> None:
        super().__init__(num_stages, num_stages)

    def _build(self, num_microbatches: int) -> RankTasks:
        mbs = range(num_microbatches)
        return [
            [Task(rank, FWD, mb) for mb in mbs] + [Task(rank, BWD, mb) for mb in mbs]
            for rank in range(self.mpmd_dim)
        ]

    def _repr_fields(self) -> dict[str, Any]:
        return {"num_stages": self.num_stages}
