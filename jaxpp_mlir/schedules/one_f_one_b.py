"""Non-interleaved one-forward-one-backward schedules: ``Std1F1B`` and ``Eager1F1B``."""

from __future__ import annotations

from typing import Any

from jaxpp_mlir.schedules.base import Schedule
from jaxpp_mlir.schedules.task import BWD, FWD, RankTasks, ScheduleItem, tasks_from_columns


def one_f_one_b_order(
    stage: int, num_microbatches: int, num_warmup: int, forward_first: bool = True
) -> list[ScheduleItem]:
    """``num_warmup`` forwards, then 1F1B pairs, then the remaining backwards.

    In the steady state each step is a forward then a backward (``forward_first``), or a
    backward then a forward; the microbatches of each kind go in increasing order.
    """
    warm = min(num_warmup, num_microbatches)
    steady = num_microbatches - warm
    pair = [FWD, BWD] if forward_first else [BWD, FWD]
    pair_mbs = [
        (warm + step, step) if forward_first else (step, warm + step) for step in range(steady)
    ]
    kinds = [FWD] * warm + pair * steady + [BWD] * warm
    mbs = [*range(warm), *(mb for two in pair_mbs for mb in two), *range(steady, num_microbatches)]
    return tasks_from_columns([stage] * len(kinds), kinds, mbs)  # type: ignore[return-value]


class Std1F1B(Schedule):
    """The standard non-interleaved 1F1B (PipeDream-Flush; Megatron, PyTorch ``Schedule1F1B``).

    One stage per rank. Rank ``r`` runs ``min(p-1-r, m)`` warm-up forwards, then steady
    pairs of one forward and one backward, then the remaining backwards (cool-down). At its
    peak rank ``r`` holds the activations of ``min(m, p-r)`` microbatches; the bubble
    fraction is ``(p-1)/(m+p-1)`` with equal forward and backward costs, as for GPipe.
    """

    def __init__(self, num_stages: int) -> None:
        super().__init__(num_stages, num_stages)

    def _build(self, num_microbatches: int) -> RankTasks:
        p = self.num_stages
        return [one_f_one_b_order(r, num_microbatches, p - 1 - r) for r in range(p)]

    def _repr_fields(self) -> dict[str, Any]:
        return {"num_stages": self.num_stages}


class Eager1F1B(Schedule):
    """1F1B with a longer warm-up, so sends can overlap the next compute (JaxPP ``Eager1F1B``).

    Rank ``r`` runs ``min(2(p-1-r)+1, m)`` warm-up forwards, then alternates one backward
    and one forward, then drains the remaining backwards. It holds up to
    ``min(m, 2(p-1-r)+1)`` microbatches of activations on rank ``r``.
    """

    def __init__(self, num_stages: int) -> None:
        super().__init__(num_stages, num_stages)

    def _build(self, num_microbatches: int) -> RankTasks:
        p = self.num_stages
        return [
            one_f_one_b_order(r, num_microbatches, 2 * (p - 1 - r) + 1, forward_first=False)
            for r in range(p)
        ]

    def _repr_fields(self) -> dict[str, Any]:
        return {"num_stages": self.num_stages}
