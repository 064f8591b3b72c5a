"""One process's part of a plan whose ranks live in several processes.

The local plan is the global plan restricted to this process's ranks, in the
global order, with every cross-process transfer group replaced, where this
process issues it (see ``ordering``), by a ``RunStage`` of a transfer
executable (see ``collectives``):

- on the sender, the run takes the sent values (its outputs are discarded);
- on the receiver, it takes zero buffers, made by one small executable per
  receiving rank at the start of each call, and defines the received values.

Each use of a transfer executable gets its own name (and so its own
description in errors); uses with the same shard shapes, layouts and ranks
share one compiled executable. Everything else (runs, sends and receives
within the process, inputs, outputs) is the global plan's, unchanged; inputs
keep their numbering, bound only to the local ranks (and their local pieces). An
output made of pieces is, locally, one output per piece this process holds
(``local_outputs`` says which); ``DistributedPlan`` puts them together.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Sequence
from typing import Any

import jax
from jax.sharding import Sharding

from .. import records
from ..instructions.run import RunStage
from ..plan import ExecutionPlan, Layout, OutputBinding, StageExecutable, TensorSpec
from . import collectives, ordering

# (name, stage, devices, receive-buffer layouts or None for a transfer)
Extra = tuple[str, StageExecutable, tuple[jax.Device, ...], Any]
# How a sender holds a value, alike in every process (None on a rank of one device).
HeldLayout = Layout | None


@records.frozen
class Feed:
    """Output ``output`` (on ``src_rank``) may come back as input ``input``, needed on
    ``dst_rank`` (that input's first rank in another process): it is then forwarded."""

    output: int
    input: int
    src_rank: int
    dst_rank: int
    src_process: int
    dst_process: int
    executable: str = ""  # this process's transfer executable for it, if it takes part


@records.frozen
class Use:
    """One use of a transfer executable: which compiled module, for what, with whom."""

    base: str
    description: str
    peer: int
    local_shardings: tuple[Sharding, ...]


class LocalPlanBuilder:
    """Builds a process's local plan; ``add_group`` and ``add_feed``, then ``build``."""

    def __init__(
        self,
        plan: ExecutionPlan,
        rank_devices: Sequence[tuple[jax.Device, ...]],
        process: int,
        local_ranks: Sequence[int],
        sharding: Callable[[int, HeldLayout], Sharding],
    ):
        self.plan = plan
        self.rank_devices = rank_devices
        self.process = process
        self.local = set(local_ranks)
        self.sharding = sharding  # (rank, the sender's layout) -> that layout on the rank
        self.extra: list[Extra] = []
        self.uses: dict[str, Use] = {}
        self._bases: dict[tuple, str] = {}
        self._buffers: dict[tuple[int, TensorSpec, HeldLayout], int] = {}
        self._issued: dict[int, list[RunStage]] = {}  # plan position -> transfer runs
        self._cross_at: set[int] = set()
        self._next_id = 1 + max(
            [b.index for b in plan.inputs]
            + [v for _, v in plan.values]
            + [v for i in plan.instructions for v in i.reads()]
        )

    # ------------------------------------------------------------ transfers
    def _use(
        self,
        key: tuple,
        shards: Sequence[TensorSpec],
        src: int,
        dst: int,
        specs: Sequence[TensorSpec],
        side: int,
        local_shardings: Sequence[Sharding],
        description: str,
        peer: int,
    ) -> str:
        """The name of a new use of the transfer executable for ``key`` on rank ``side``."""
        key = (*key, side)
        if key not in self._bases:
            base = f"transfer{len(self._bases)}__rank{src}_to_rank{dst}"
            text = collectives.permute_module(shards, len(self.rank_devices[src]))
            stage = StageExecutable(base, side, text, tuple(specs), tuple(specs))
            devices = self.rank_devices[src] + self.rank_devices[dst]
            self.extra.append((base, stage, devices, None))
            self._bases[key] = base
        base = self._bases[key]
        name = f"{base}#{len(self.uses)}"
        self.uses[name] = Use(base, description, peer, tuple(local_shardings))
        return name

    def _fresh(self) -> int:
        self._next_id += 1
        return self._next_id - 1

    def add_group(self, group: ordering.TransferGroup, held: Sequence[HeldLayout]) -> None:
        """Replaces ``group``'s sends and receives by a transfer run where this process
        issues it (``held``: the sender's layout of each transfer, in order)."""
        for t in group.transfers:
            self._cross_at.update((t.send_at, t.recv_at))
        me = self.process
        if me not in (group.src_process, group.dst_process):
            return
        specs = [t.spec for t in group.transfers]
        layouts = [self.sharding(group.src_rank, x) for x in held]
        shards = [collectives.shard_spec(s, sh) for s, sh in zip(specs, layouts, strict=True)]
        key = (tuple(shards), tuple(held), group.src_rank, group.dst_rank)
        if group.src_process == me:
            name = self._use(
                key,
                shards,
                group.src_rank,
                group.dst_rank,
                specs,
                group.src_rank,
                layouts,
                group.describe(),
                group.dst_process,
            )
            run = RunStage(
                group.src_rank,
                name,
                tuple(t.value for t in group.transfers),
                tuple(self._fresh() for _ in specs),
                note=f"send to process {group.dst_process}",
            )
        else:
            local = [self.sharding(group.dst_rank, x) for x in held]
            name = self._use(
                key,
                shards,
                group.src_rank,
                group.dst_rank,
                specs,
                group.dst_rank,
                local,
                group.describe(),
                group.src_process,
            )
            buffers = []
            for spec, layout in zip(specs, held, strict=True):
                buffer_key = (group.dst_rank, spec, layout)
                if buffer_key not in self._buffers:
                    self._buffers[buffer_key] = self._fresh()
                buffers.append(self._buffers[buffer_key])
            run = RunStage(
                group.dst_rank,
                name,
                tuple(buffers),
                tuple(t.recv_value for t in group.transfers),
                note=f"receive from process {group.src_process}",
            )
        self._issued.setdefault(group.issue_at(me), []).append(run)

    def add_feed(self, feed: Feed, layout: HeldLayout) -> Feed:
        """``feed`` with this process's transfer executable for it (if it takes part)."""
        me = self.process
        if me not in (feed.src_process, feed.dst_process):
            return feed
        out = self.plan.outputs[feed.output]
        shard = collectives.shard_spec(out.spec, self.sharding(feed.src_rank, layout))
        side = feed.src_rank if feed.src_process == me else feed.dst_rank
        description = (
            f"forwarding of output {feed.output} ({out.spec}) from rank {feed.src_rank} "
            f"(process {feed.src_process}) as input {feed.input} of rank {feed.dst_rank} "
            f"(process {feed.dst_process})"
        )
        peer = feed.dst_process if feed.src_process == me else feed.src_process
        key = ((shard,), (layout,), feed.src_rank, feed.dst_rank)
        name = self._use(
            key,
            [shard],
            feed.src_rank,
            feed.dst_rank,
            [out.spec],
            side,
            [self.sharding(side, layout)],
            description,
            peer,
        )
        return dataclasses.replace(feed, executable=name)

    # ------------------------------------------------------------ the plan
    def _prologue(self) -> list[RunStage]:
        """One run per receiving rank that makes its zero receive buffers."""
        by_rank: dict[int, list[tuple[TensorSpec, HeldLayout, int]]] = {}
        for (rank, spec, layout), value in self._buffers.items():
            by_rank.setdefault(rank, []).append((spec, layout, value))
        runs = []
        for rank, items in sorted(by_rank.items()):
            name = f"receive_buffers__rank{rank}"
            specs = [s for s, _, _ in items]
            layouts = [self.sharding(rank, t) for _, t, _ in items]
            shards = [collectives.shard_spec(s, sh) for s, sh in zip(specs, layouts, strict=True)]
            module = collectives.zeros_module(shards, len(self.rank_devices[rank]))
            stage = StageExecutable(name, rank, module, (), tuple(specs))
            self.extra.append((name, stage, self.rank_devices[rank], layouts))
            outputs = tuple(v for _, _, v in items)
            runs.append(RunStage(rank, name, (), outputs, note="receive buffers"))
        return runs

    def build(self) -> ExecutionPlan:
        plan, local = self.plan, self.local
        instructions: list = []
        for at, inst in enumerate(plan.instructions):
            instructions.extend(self._issued.get(at, ()))
            if at not in self._cross_at and inst.rank in local:
                instructions.append(inst)
        prologue = self._prologue()
        stages = {name: stage for name, stage, _, _ in self.extra}
        return dataclasses.replace(
            plan,
            executables={
                **{n: s for n, s in plan.executables.items() if s.rank in local},
                **{name: stage for name, stage, _, layouts in self.extra if layouts},
                **{
                    name: dataclasses.replace(stages[use.base], name=name)
                    for name, use in self.uses.items()
                },
            },
            inputs=tuple(
                dataclasses.replace(
                    b,
                    ranks=tuple(r for r in b.ranks if r in local),
                    pieces=tuple(p for p in b.pieces if p.rank in local),
                )
                for b in plan.inputs
            ),
            outputs=tuple(binding for _, binding in local_outputs(plan, local)),
            instructions=tuple(prologue + instructions),
        )


def local_outputs(
    plan: ExecutionPlan, local: Collection[int]
) -> list[tuple[tuple[int, int | None], OutputBinding]]:
    """The outputs a process holding ``local`` ranks returns, each with where it belongs:
    ``(j, None)`` for global output j, ``(j, k)`` for its piece k. Copies on other ranks
    stay there: an output lives on its first rank only."""
    found = []
    for j, out in enumerate(plan.outputs):
        if out.pieces:
            found += [
                ((j, k), OutputBinding(p.value, p.rank, p.spec))
                for k, p in enumerate(out.pieces)
                if p.rank in local
            ]
        elif out.rank in local:
            found.append(((j, None), dataclasses.replace(out, replicas=())))
    return found
