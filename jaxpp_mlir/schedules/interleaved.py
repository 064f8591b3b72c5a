"""``Interleaved1F1B``: 1F1B over virtual stages (Megatron-LM / PyTorch interleaved order)."""

from __future__ import annotations

from typing import Any

import numpy as np

from jaxpp_mlir.errors import ScheduleError
from jaxpp_mlir.schedules.base import Schedule
from jaxpp_mlir.schedules.task import (
    BWD,
    FWD,
    FusedTask,
    RankTasks,
    ScheduleItem,
    Task,
    tasks_from_columns,
)


def fuse_last_stage_pairs(order: list[ScheduleItem], last_stage: int) -> list[ScheduleItem]:
    """Fuse each ``fwd(last, m)`` directly followed by ``bwd(last, m)`` into one item."""
    starts = [
        index
        for index, (item, nxt) in enumerate(zip(order, order[1:], strict=False))
        if type(item) is Task
        and type(nxt) is Task
        and item.stage == last_stage == nxt.stage
        and item.kind == FWD
        and nxt.kind == BWD
        and item.microbatch == nxt.microbatch
    ]
    if not starts:
        return order
    fused: list[ScheduleItem] = []
    done = 0
    for index in starts:  # a pair ends with a bwd, so the next pair cannot share its item
        fused += order[done:index]
        fused.append(FusedTask((order[index], order[index + 1])))  # type: ignore[arg-type]
        done = index + 2
    return fused + order[done:]


class Interleaved1F1B(Schedule):
    """Interleaved 1F1B (Narayanan et al., 2021): ``v = num_stages / mpmd_dim`` virtual
    stages per rank, stage ``s`` on rank ``s % mpmd_dim``.

    With ``p = mpmd_dim`` and a round of ``q`` microbatches (``round_size``: ``p`` when
    ``p`` divides the count ``m``, as JaxPP; else ``m // (m // p)`` when that divides
    ``m``, as JaxPP; else all ``m`` in one round), the ``k``-th forward of rank ``r`` is
    of its chunk ``(k // q) % v`` (stage ``chunk * p + r``) for microbatch
    ``(k // (q*v)) * q + k % q``: each round goes through every chunk. Backwards use the
    same formula with the chunks reversed. Rank ``r`` runs ``(v-1)*q + 2*(p-1-r)``
    warm-up forwards (capped at ``v*m``), then pairs of one forward and one backward,
    then the remaining backwards. Any microbatch count runs (1 on 4 ranks, 6 on 4...).
    With ``q = p`` and equal costs the bubble fraction is ``(p-1)/(v*m+p-1)``.

    As in JaxPP, a forward of the last stage directly followed by the backward of the same
    microbatch (always the case on the last rank) runs as one ``FusedTask``; with
    ``fuse_steady_state=True`` every steady-state (forward, backward) pair is fused.
    """

    def __init__(self, num_stages: int, mpmd_dim: int, fuse_steady_state: bool = False) -> None:
        super().__init__(num_stages, mpmd_dim)
        if self.num_stages % self.mpmd_dim:
            raise ScheduleError(
                f"Interleaved1F1B: num_stages ({num_stages}) must be a multiple of "
                f"mpmd_dim ({mpmd_dim})"
            )
        self.fuse_steady_state = bool(fuse_steady_state)
        self.virtual_stages = self.num_stages // self.mpmd_dim

    def round_size(self, num_microbatches: int) -> int:
        """How many microbatches go through every chunk before the next ones start."""
        rounds = max(1, num_microbatches // self.mpmd_dim)
        if num_microbatches % rounds == 0:
            return num_microbatches // rounds
        return num_microbatches

    def _warmup(self, rank: int, round_size: int, total: int) -> int:
        """Forwards rank ``rank`` runs before its first backward, of its ``total``."""
        return (self.virtual_stages - 1) * round_size + 2 * (self.mpmd_dim - 1 - rank)

    def _rank_tasks(self, rank: int, round_size: int, total: int) -> tuple[list[Task], int, int]:
        """Rank ``rank``'s tasks in order, with where its steady (fwd, bwd) pairs start and
        end: ``warm`` forwards, then pairs of the next forward and backward, then the
        remaining backwards; the ``k``-th task of a kind is of chunk ``(k // q) % v``
        (reversed for backwards) and microbatch ``(k // (q*v)) * q + k % q``."""
        p, v, q = self.mpmd_dim, self.virtual_stages, round_size
        warm = min(self._warmup(rank, q, total), total)
        steady = total - warm
        backward = np.concatenate(
            [np.zeros(warm, bool), np.tile([False, True], steady), np.ones(warm, bool)]
        )
        index = np.concatenate(
            [
                np.arange(warm),
                np.stack([np.arange(warm, total), np.arange(steady)], axis=1).ravel(),
                np.arange(steady, total),
            ]
        )
        chunk = (index // q) % v
        chunk = np.where(backward, v - 1 - chunk, chunk)
        tasks = tasks_from_columns(
            (chunk * p + rank).tolist(),
            np.where(backward, BWD, FWD).tolist(),
            ((index // (q * v)) * q + index % q).tolist(),
        )
        return tasks, warm, warm + 2 * steady

    def _build(self, num_microbatches: int) -> RankTasks:
        q = self.round_size(num_microbatches)
        total = self.virtual_stages * num_microbatches
        per_rank: RankTasks = []
        for rank in range(self.mpmd_dim):
            tasks, first, last = self._rank_tasks(rank, q, total)
            order: list[ScheduleItem] = list(tasks)
            if self.fuse_steady_state:
                pairs = [FusedTask((tasks[i], tasks[i + 1])) for i in range(first, last, 2)]
                order = [*tasks[:first], *pairs, *tasks[last:]]
            last_stage = self.num_stages - 1
            holds_last = self._place(last_stage) == rank
            per_rank.append(fuse_last_stage_pairs(order, last_stage) if holds_last else order)
        return per_rank

    def _repr_fields(self) -> dict[str, Any]:
        return {
            "num_stages": self.num_stages,
            "mpmd_dim": self.mpmd_dim,
            "fuse_steady_state": self.fuse_steady_state,
        }


class KimiK2(Interleaved1F1B):
    """Interleaved 1F1B with one more warm-up forward per rank (Kimi K2's order, as in
    JaxPP): each rank keeps one more microbatch in flight, so that a transfer from the
    previous rank has a task's time to arrive before it is needed."""

    def _warmup(self, rank: int, round_size: int, total: int) -> int:
        return super()._warmup(rank, round_size, total) + 1


class InterleavedGPipe(Interleaved1F1B):
    """GPipe over virtual stages (stage ``s`` on rank ``s % mpmd_dim``): every rank runs
    all its forwards, in the interleaved order of ``Interleaved1F1B``, then all its
    backwards."""

    def _warmup(self, rank: int, round_size: int, total: int) -> int:
        return total
