"""The slot table of a plan being resolved: the slots, which (rank, value) lives in
which, and each value's copies in other layouts.

A slot holds one value on one rank, or one value in flight on a channel. ``SlotTable``
numbers the slots as ``resolve_slots`` (``execution.slots``) defines and reads values
(a reader that needs another layout reads a copy, see ``instructions/copy.py``);
``free_after`` says which slots die after each instruction.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from jax.sharding import Sharding

from .. import records
from .. import transfer as _transfer
from ..errors import PlanError
from ..instructions import copy
from ..plan import ExecutionPlan, TensorSpec


@records.frozen
class ValueKey:
    """The slot of ``value`` as ``rank`` holds it."""

    rank: int
    value: int

    def __str__(self) -> str:
        return f"value {self.value} on rank {self.rank}"


@records.frozen
class ChannelKey:
    """The slot a send fills and its receive empties."""

    channel: int

    def __str__(self) -> str:
        return f"channel {self.channel}"


@dataclasses.dataclass
class Slot:
    """Compile-time facts about one slot."""

    key: ValueKey | ChannelKey  # its text names the slot in generated code's comments
    spec: TensorSpec
    sharding: Sharding | None  # None: chosen by the first consumer
    defined_at: int  # instruction index; -1 for a program input
    last_use: int = -1  # instruction index; -1 while unused


class SlotTable:
    """Slots of a plan being resolved: which (rank, value) lives where, and checks."""

    def __init__(self, plan: ExecutionPlan) -> None:
        self.plan = plan
        self.slots: list[Slot] = []
        self.where: dict[tuple[int, int], int] = {}  # (rank, value) -> slot
        # (slot, layout) -> the slot holding that slot's value in that other layout
        self.resharded: dict[tuple[int, Any], int] = {}
        # instruction index -> the copies made just before it
        self.copies: dict[int, list[copy.CopyStep]] = {}
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
        slots = self.slots
        self.where[(rank, value)] = len(slots)
        slots.append(Slot(ValueKey(rank, value), spec, sharding, at))
        return len(slots) - 1

    def add_slot(
        self, key: ValueKey | ChannelKey, spec: TensorSpec, sharding: Sharding | None, at: int
    ) -> int:
        """A new slot holding ``key``, made by instruction ``at``."""
        self.slots.append(Slot(key, spec, sharding, at))
        return len(self.slots) - 1

    def use(
        self, rank: int, value: int, at: int, spec: TensorSpec, sharding: Sharding | None
    ) -> int:
        """The slot instruction ``at`` reads ``value`` from, checked against ``spec``.

        ``sharding`` is the layout the reader needs (None: any); the first
        reader fixes the layout of a value that has none yet. A reader that
        needs another layout than the one the rank holds reads a copy
        (``copy.resolve``), made just before the first such reader and shared
        by the later ones.
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
                return copy.resolve(self, slot, sharding, at)
        self.last_direct_read[slot] = at
        return slot


def free_after(slots: list[Slot], num_instructions: int) -> list[list[int]]:
    """Which slots die after each instruction (unused values die where defined)."""
    free_after: list[list[int]] = [[] for _ in range(num_instructions)]
    for s, info in enumerate(slots):
        if info.last_use == -1 and info.defined_at >= 0:
            free_after[info.defined_at].append(s)
        elif 0 <= info.last_use < num_instructions:
            free_after[info.last_use].append(s)
    return free_after
