"""``DualPipeV``: the V-shaped bidirectional schedule (DeepSeek DualPipe, "cut in half")."""

from __future__ import annotations

from collections import deque
from typing import Any

from jaxpp_mlir.errors import ScheduleError
from jaxpp_mlir.schedules.base import Schedule, check_int
from jaxpp_mlir.schedules.task import (
    BWD,
    BWD_I,
    BWD_W,
    FWD,
    FusedTask,
    RankTasks,
    ScheduleItem,
    Task,
)


class _RankOrder:
    """Builds one rank's list: per-chunk microbatch counters and a FIFO of weight grads."""

    def __init__(self, stages: tuple[int, int], split: bool, fuse: bool) -> None:
        self.stages = stages
        self.split = split
        self.fuse = fuse
        self.next_fwd = [0, 0]
        self.next_bwd = [0, 0]
        self.weights: deque[Task] = deque()
        self.order: list[ScheduleItem] = []

    def fwd(self, chunk: int) -> Task:
        task = Task(self.stages[chunk], FWD, self.next_fwd[chunk])
        self.next_fwd[chunk] += 1
        return task

    def bwd(self, chunk: int, zero_bubble: bool = False) -> Task:
        stage, mb = self.stages[chunk], self.next_bwd[chunk]
        self.next_bwd[chunk] += 1
        if self.split and zero_bubble:
            self.weights.append(Task(stage, BWD_W, mb))
            return Task(stage, BWD_I, mb)
        return Task(stage, BWD, mb)

    def add(self, *tasks: Task) -> None:
        self.order.extend(tasks)

    def overlapped(self, first: Task, second: Task) -> None:
        """A forward/backward pair that DualPipe overlaps: fused if asked, else in order."""
        self.order += [FusedTask((first, second))] if self.fuse else [first, second]

    def weight(self) -> None:
        if self.split:
            self.order.append(self.weights.popleft())


class DualPipeV(Schedule):
    """DualPipeV: ``num_stages = 2 * mpmd_dim`` stages placed as a V, stage ``s`` on rank
    ``s`` for ``s < p`` and on rank ``2p-1-s`` after; rank ``r`` holds chunk 0 (stage
    ``r``) and chunk 1 (stage ``2p-1-r``), so rank 0 runs both the first and the last stage.

    Rank ``r`` (``p = mpmd_dim``, ``m`` microbatches, ``m >= 2p``) runs, with ``Fc``/``Bc``
    the next forward/backward of chunk ``c`` (microbatches in increasing order per chunk):

    1. ``2(p-1-r)`` x ``F0``;
    2. ``r+1`` x ``F0 F1``;
    3. ``p-1-r`` x ``I1 W F1`` (zero-bubble: input grad, then its weight grad);
    4. ``m-2p+r+1`` x ``F0 B1 F1 B0`` (the steady state; DualPipe overlaps each
       forward with the backward after it);
    5. ``p-1-r`` x ``B1 F1 B0``;
    6. ``r+1`` x ``B1 B0``, splitting the second half of these backwards (from the
       middle step on, starting with ``B1`` on odd ranks and ``B0`` on even ranks) and
       deferring their weight grads;
    7. ``p-1-r`` x ``W I0`` (a deferred weight grad, then a split ``B0``);
    8. ``r+1`` x ``W`` (the remaining deferred weight grads, oldest first).

    This is the step structure of DeepSeek's DualPipeV with tasks run one at a time
    (the computation/communication overlap inside a pair is not modelled).
    ``split_backward=False`` keeps every backward whole (each ``I`` becomes ``B``, and
    the ``W`` steps disappear). ``fuse_overlapped=True`` runs each overlapped pair of
    step 4 and 5 (``F0 B1``, ``F1 B0``) as one ``FusedTask``, except the first ``F0 B1``
    of the last rank, which DeepSeek also runs unfused.
    """

    def __init__(
        self,
        num_stages: int,
        mpmd_dim: int,
        split_backward: bool = True,
        fuse_overlapped: bool = False,
    ) -> None:
        check_int("num_stages", num_stages, 2)
        check_int("mpmd_dim", mpmd_dim, 1)
        if num_stages != 2 * mpmd_dim:
            raise ScheduleError(
                f"DualPipeV needs num_stages == 2 * mpmd_dim (two stages per rank in a V), "
                f"got num_stages={num_stages}, mpmd_dim={mpmd_dim}"
            )
        super().__init__(num_stages, mpmd_dim)
        self.split_backward = bool(split_backward)
        self.fuse_overlapped = bool(fuse_overlapped)
        self.splits_backward = self.split_backward

    def _place(self, stage: int) -> int:
        p = self.mpmd_dim
        return stage if stage < p else 2 * p - 1 - stage

    def _check_num_microbatches(self, num_microbatches: int) -> None:
        if num_microbatches < 2 * self.mpmd_dim:
            raise ScheduleError(
                f"DualPipeV needs num_microbatches >= 2 * mpmd_dim = {2 * self.mpmd_dim}, "
                f"got {num_microbatches}"
            )

    def _build(self, num_microbatches: int) -> RankTasks:
        p, m = self.mpmd_dim, num_microbatches
        per_rank: RankTasks = []
        for r in range(p):
            o = _RankOrder((r, 2 * p - 1 - r), self.split_backward, self.fuse_overlapped)
            for _ in range(2 * (p - 1 - r)):
                o.add(o.fwd(0))
            for _ in range(r + 1):
                o.add(o.fwd(0), o.fwd(1))
            for _ in range(p - 1 - r):
                o.add(o.bwd(1, zero_bubble=True))
                o.weight()
                o.add(o.fwd(1))
            for step in range(m - 2 * p + r + 1):
                if step == 0 and r == p - 1:
                    o.add(o.fwd(0), o.bwd(1))
                else:
                    o.overlapped(o.fwd(0), o.bwd(1))
                o.overlapped(o.fwd(1), o.bwd(0))
            for _ in range(p - 1 - r):
                o.add(o.bwd(1))
                o.overlapped(o.fwd(1), o.bwd(0))
            zero_bubble = False
            for step in range(r + 1):
                if step == (r + 1) // 2 and r % 2 == 1:
                    zero_bubble = True
                o.add(o.bwd(1, zero_bubble))
                if step == (r + 1) // 2 and r % 2 == 0:
                    zero_bubble = True
                o.add(o.bwd(0, zero_bubble))
            for _ in range(p - 1 - r):
                o.weight()
                o.add(o.bwd(0, zero_bubble=True))
            for _ in range(r + 1):
                o.weight()
            assert not o.weights and o.next_fwd == [m, m] and o.next_bwd == [m, m]
            per_rank.append(o.order)
        return per_rank

    def _repr_fields(self) -> dict[str, Any]:
        return {
            "num_stages": self.num_stages,
            "mpmd_dim": self.mpmd_dim,
            "split_backward": self.split_backward,
            "fuse_overlapped": self.fuse_overlapped,
        }
