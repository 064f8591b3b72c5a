"""``ZeroBubble``: the ZB-H1 schedule (Qi et al., 2023, "Zero Bubble Pipeline Parallelism")."""

from __future__ import annotations

from typing import Any

from jaxpp_mlir.schedules.base import Schedule
from jaxpp_mlir.schedules.task import BWD_I, BWD_W, FWD, RankTasks, ScheduleItem, Task


class ZeroBubble(Schedule):
    """ZB-H1: 1F1B with the backward split into input gradient (``bwd_i``, what the
    upstream stage waits for) and weight gradient (``bwd_w``, which nothing waits for).

    One stage per rank. Rank ``r`` runs ``min(p-r, m)`` forwards, then for each
    microbatch ``i`` in order: ``bwd_i(i)``, then ``bwd_w(i-r)`` once ``i >= r``, then the
    next forward if any; the ``r`` weight gradients still pending run at the end. Deferring
    ``r`` weight gradients on rank ``r`` fills the cool-down bubbles while keeping at most
    ``p`` microbatches of activations alive on any rank, the peak of 1F1B (rank 0). With
    ``F = I = W`` the bubble is ``(p-1)`` per rank against 1F1B's ``3(p-1)``.
    """

    splits_backward = True

    def __init__(self, num_stages: int) -> None:
        super().__init__(num_stages, num_stages)

    def _build(self, num_microbatches: int) -> RankTasks:
        m = num_microbatches
        per_rank: RankTasks = []
        for rank in range(self.num_stages):
            forwards = min(self.num_stages - rank, m)
            order: list[ScheduleItem] = [Task(rank, FWD, mb) for mb in range(forwards)]
            weights = 0
            for mb in range(m):
                order.append(Task(rank, BWD_I, mb))
                if mb >= rank:
                    order.append(Task(rank, BWD_W, weights))
                    weights += 1
                if forwards < m:
                    order.append(Task(rank, FWD, forwards))
                    forwards += 1
            order += [Task(rank, BWD_W, mb) for mb in range(weights, m)]
            per_rank.append(order)
        return per_rank

    def _repr_fields(self) -> dict[str, Any]:
        return {"num_stages": self.num_stages}
