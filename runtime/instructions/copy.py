"""The copy step: a value copied on its rank into another layout.

Slot resolution makes one where a reader needs a value laid out otherwise than the
rank holds it: a run whose executable takes another layout, or a receive whose
value lands in another layout than the one it was sent in. One process holds every
device of a rank, so the copy is a ``jax.device_put``. A copy is no instruction of
the plan: it exists in resolved steps only, made just before its first reader and
shared by the later ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import jax
from jax.sharding import Sharding

from .. import _jax_compat as jc
from .. import records

if TYPE_CHECKING:
    from ..execution.codegen import Fields
    from ..execution.slot_table import Slot, SlotTable

KIND = "copy"


@records.frozen
class CopyStep:
    """A copy of slot ``source`` into slot ``copy``, laid out as ``sharding``."""

    source: int
    copy: int
    sharding: Sharding


def resolve(table: SlotTable, slot: int, sharding: Sharding, at: int) -> int:
    """The slot holding ``slot``'s value laid out as ``sharding``, read by instruction
    ``at``: a new copy made just before ``at``, or the one an earlier reader made."""
    info = table.slots[slot]
    key = (slot, jc.hlo_sharding(sharding, len(info.spec.shape)))
    copy = table.resharded.get(key)
    if copy is None:
        copy = table.add_slot(info.key, info.spec, sharding, at)
        table.resharded[key] = copy
        table.copies.setdefault(at, []).append(CopyStep(slot, copy, sharding))
        table.last_direct_read[slot] = at  # the copy reads it here
        table.copied.add(slot)
    table.slots[copy].last_use = at
    return copy


def write(fields: Fields, count: int) -> list[str]:
    """The statements making ``count`` copies (to open an operation), as an operation
    shape writes them: each a slot put into another layout."""
    return [
        f"{fields.slot()} = device_put({fields.slot()}, copy_{k}){fields.comment()}"
        for k in range(count)
    ]


def fields(steps: Sequence[CopyStep], slots: list[Slot]) -> list[Any]:
    """The fields of ``write``'s statements for ``steps``."""
    return [x for c in steps for x in (c.copy, c.source, slots[c.copy].key)]


def constant_names(count: int) -> list[str]:
    """The names ``write``'s statements for ``count`` copies use."""
    return [*(f"copy_{k}" for k in range(count)), *(["device_put"] if count else [])]


def constants(steps: Sequence[CopyStep]) -> dict[str, Any]:
    """The names ``write``'s statements for ``steps`` use."""
    namespace: dict[str, Any] = {f"copy_{k}": c.sharding for k, c in enumerate(steps)}
    if steps:
        namespace["device_put"] = jax.device_put
    return namespace
