"""The slot table of a plan being resolved: the slots, which (rank, value) lives in
which, and each value's copies in other layouts.

A slot holds one value on one rank, or one value in flight on a channel. ``SlotTable``
numbers the slots as ``resolve_slots`` (``execution.slots``) defines and reads values;
``free_after`` says which slots die after each instruction.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from jax.sharding import Sharding

from .. import _jax_compat as jc
from .. import transfer as _transfer
from ..errors import PlanError
from ..plan import ExecutionPlan, TensorSpec


@dataclasses.dataclass(frozen=True)
class ValueKey:
    """The slot of ``value`` as ``rank`` holds it."""

    rank: int
    value: int

    def __str__(self) -> str:
        return f"value {self.value} on rank {self.rank}"


@dataclasses.dataclass(frozen=True)
class ChannelKey:
    """The slot a send fills and its receive empties."""

    channel: int

    def __str__(self) -> str:
        return f"channel {self.channel}"


@dataclasses.dataclass
class Slot:
    """Compile-time facts about one slot."""

    key: ValueKey | ChannelKey
    spec: TensorSpec
    sharding: Sharding | None  # None: chosen by the first consumer
    defined_at: int  # instruction index; -1 for a program input
    last_use: int = -1  # instruction index; -1 while unused

    def name(self) -> str:
        """What the slot holds, for the comments of generated code."""
        return str(self.key)


@dataclasses.dataclass(frozen=True)
class Reshard:
    """A copy of slot ``source`` into slot ``copy``, laid out as ``sharding``."""

    source: int
    copy: int
    sharding: Sharding


class SlotTable:
    """Slots of a plan being resolved: which (rank, value) lives where, and checks."""

    def __init__(self, plan: ExecutionPlan) -> None:
        self.plan = plan
        self.slots: list[Slot] = []
        self.where: dict[tuple[int, int], int] = {}  # (rank, value) -> slot
        # (slot, layout) -> the slot holding that slot's value in that other layout
        self.resharded: dict[tuple[int, Any], int] = {}
        # instruction index -> the reshards made just before it
        self.reshards: dict[int, list[Reshard]] = {}
        # slot -> the last instruction reading it in its own layout, or copying it
        self.last_direct_read: dict[int, int] = {}
        self.copied: set[int] = set()  # slots some reader takes in another layout

    def _at(self, at: int) -> str:
        return "its input binding" if at < 0 else f"instruction {at} ({self._inst(at)})"

    def _inst(self, at: int) -> str:
        return self.plan.instructions[at].describe()

    def define(
        self, rank: int, value: int, spec: TensorSpec, sharding: Sharding | None, at: int
    ) -> int:
        """A new slot for ``value`` on ``rank``, defined by instruction ``at`` (-1: input)."""
        if (rank, value) in self.where:
            raise PlanError(
                f"value {value} is defined twice on rank {rank} (again by {self._at(at)})"
            )
        self.where[(rank, value)] = len(self.slots)
        self.slots.append(Slot(ValueKey(rank, value), spec, sharding, at))
        return len(self.slots) - 1

    def use(
        self, rank: int, value: int, at: int, spec: TensorSpec, sharding: Sharding | None
    ) -> int:
        """The slot instruction ``at`` reads ``value`` from, checked against ``spec``.

        ``sharding`` is the layout the reader needs (None: any); the first
        reader fixes the layout of a value that has none yet. A reader that
        needs another layout than the one the rank holds reads a resharded
        copy, made on the rank's devices just before the first such reader
        and shared by the later ones (one process holds every device of a
        rank, so a reshard is a ``jax.device_put``).
        """
        slot = self.where.get((rank, value))
        if slot is None:
            raise PlanError(
                f"{self._at(at)} uses value {value}, which is not defined on rank {rank} before it"
            )
        info = self.slots[slot]
        if info.spec != spec:
            raise PlanError(f"{self._at(at)} takes value {value} as {spec} but it is {info.spec}")
        if sharding is not None:
            if info.sharding is None:
                info.sharding = sharding
            elif not _transfer.same_layout(info.sharding, sharding, len(spec.shape)):
                return self._reshard(slot, sharding, at)
        self.last_direct_read[slot] = at
        return slot

    def _reshard(self, slot: int, sharding: Sharding, at: int) -> int:
        """The slot of ``slot``'s value laid out as ``sharding``, read by instruction ``at``."""
        info = self.slots[slot]
        key = (slot, jc.hlo_sharding(sharding, len(info.spec.shape)))
        copy = self.resharded.get(key)
        if copy is None:
            copy = len(self.slots)
            self.slots.append(Slot(info.key, info.spec, sharding, at))
            self.resharded[key] = copy
            self.reshards.setdefault(at, []).append(Reshard(slot, copy, sharding))
            self.last_direct_read[slot] = at  # the copy reads it here
            self.copied.add(slot)
        self.slots[copy].last_use = at
        return copy


def free_after(slots: list[Slot], num_instructions: int) -> list[list[int]]:
    """Which slots die after each instruction (unused values die where defined)."""
    free_after: list[list[int]] = [[] for _ in range(num_instructions)]
    for s, info in enumerate(slots):
        if info.last_use == -1 and info.defined_at >= 0:
            free_after[info.defined_at].append(s)
        elif 0 <= info.last_use < num_instructions:
            free_after[info.last_use].append(s)
    return free_after
