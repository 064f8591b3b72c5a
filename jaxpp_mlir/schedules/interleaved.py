"""``Interleaved1F1B``: 1F1B over virtual stages (Megatron-LM / PyTorch interleaved order)."""

from __future__ import annotations

from typing import Any

from jaxpp_mlir.errors import ScheduleError
from jaxpp_mlir.schedules.base import Schedule
from jaxpp_mlir.schedules.task import BWD, FWD, FusedTask, RankTasks, ScheduleItem, Task


def fuse_last_stage_pairs(order: list[ScheduleItem], last_stage: int) -> list[ScheduleItem]:
    """Fuse each ``fwd(last, m)`` directly followed by ``bwd(last, m)`` into one item."""
    fused: list[ScheduleItem] = []
    index = 0
    while index < len(order):
        item = order[index]
        nxt = order[index + 1] if index + 1 < len(order) else None
        if (
            isinstance(item, Task)
            and isinstance(nxt, Task)
            and item == Task(last_stage, FWD, item.microbatch)
            and nxt == Task(last_stage, BWD, item.microbatch)
        ):
            fused.append(FusedTask((item, nxt)))
            index += 2
        else:
            fused.append(item)
            index += 1
    return fused


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

    def _task(self, rank: int, kind: str, index: int, round_size: int) -> Task:
        p, v, q = self.mpmd_dim, self.virtual_stages, round_size
        chunk = (index // q) % v
        if kind == BWD:
            chunk = v - 1 - chunk
        return Task(chunk * p + rank, kind, (index // (q * v)) * q + index % q)

    def _build(self, num_microbatches: int) -> RankTasks:
        p, v = self.mpmd_dim, self.virtual_stages
        q = self.round_size(num_microbatches)
        total = v * num_microbatches
        per_rank: RankTasks = []
        for rank in range(p):
            warm = min(self._warmup(rank, q, total), total)
            order: list[ScheduleItem] = [self._task(rank, FWD, k, q) for k in range(warm)]
            for step in range(total - warm):
                pair = (self._task(rank, FWD, warm + step, q), self._task(rank, BWD, step, q))
                order += [FusedTask(pair)] if self.fuse_steady_state else list(pair)
            order += [self._task(rank, BWD, k, q) for k in range(total - warm, total)]
            per_rank.append(fuse_last_stage_pairs(order, self.num_stages - 1))
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
