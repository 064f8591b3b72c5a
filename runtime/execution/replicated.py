"""Step values held on several ranks as one array over all their devices.

A small step output that every rank reading it computes itself (an
optimizer's step count: ``OutputBinding.replicas``) is returned as ONE
``jax.Array``, fully replicated over the devices of all those ranks, built
from the ranks' own copies without moving a byte. Passed back as an input,
each rank that reads it takes its own devices' copies of such an array, again
without a transfer (``part_on``).

In one process every device is addressable, so the array is an ordinary
``jax.Array``; a multi-process plan keeps each output on its first rank (its
local plans carry no replicas).

Taking a jax.Array apart (``addressable_shards``) costs about 100 us of host
time here, more than the copies it saves, so each array this module builds
remembers the rank arrays it was built from, for as long as it lives: passed
back, each reader gets its rank's array as it was (a dict lookup). An array
built elsewhere is taken apart.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec, Sharding

from .. import _jax_compat as jc
from .. import records
from .. import transfer as _transfer
from ..plan import ExecutionPlan
from .slots import ResolvedPlan


@records.frozen
class ReplicatedOutput:
    """Output ``position``: the copies in ``slots`` (one per rank) as one array."""

    position: int
    slots: tuple[int, ...]
    aval: Any
    sharding: Sharding  # fully replicated over every copy's devices
    devices: tuple[jax.Device, ...]  # ``sharding``'s devices, in its order
    slot_devices: tuple[tuple[jax.Device, ...], ...]  # each copy's devices, in its order


def replicated_outputs(
    plan: ExecutionPlan,
    resolved: ResolvedPlan,
    rank_devices: Sequence[Sequence[jax.Device]],
    rank_meshes: Sequence[Mesh] | None,
) -> tuple[ReplicatedOutput, ...]:
    """The outputs returned over several ranks.

    An output whose copies are not each whole on their rank (sharded inside a
    rank) stays on its first rank.
    """
    found = []
    for position, out in enumerate(plan.outputs):
        if not out.replicas:
            continue
        ranks = [out.rank, *(rank for _, rank in out.replicas)]
        slots = [
            resolved.output_slots[position],
            *(resolved.where[(rank, value)] for value, rank in out.replicas),
        ]
        if not all(resolved.slots[s].sharding.is_fully_replicated for s in slots):
            continue
        sharding = union_sharding(ranks, rank_devices, rank_meshes)
        aval = jax.core.ShapedArray(tuple(out.spec.shape), np.dtype(out.spec.dtype))
        devices = tuple(_transfer.device_list(sharding))
        slot_devices = tuple(
            tuple(_transfer.device_list(resolved.slots[s].sharding)) for s in slots
        )
        found.append(
            ReplicatedOutput(position, tuple(slots), aval, sharding, devices, slot_devices)
        )
    return tuple(found)


def union_sharding(
    ranks: Sequence[int],
    rank_devices: Sequence[Sequence[jax.Device]],
    rank_meshes: Sequence[Mesh] | None,
) -> Sharding:
    """Full replication over the devices of ``ranks``: a ``NamedSharding`` over their
    submeshes stacked along the mpmd axis (the first axis of size 1 of a submesh)."""
    if rank_meshes is not None:
        first = rank_meshes[ranks[0]]
        stack_axis = next((i for i, size in enumerate(first.devices.shape) if size == 1), None)
        if stack_axis is not None:
            devices = np.concatenate([rank_meshes[r].devices for r in ranks], axis=stack_axis)
            return NamedSharding(Mesh(devices, first.axis_names), PartitionSpec())
    return _transfer.replicated_sharding([d for r in ranks for d in rank_devices[r]])


# id of an array built by ``assemble`` -> (a weak reference to it, its rank arrays by
# their devices); the entry goes when the array does.
_PARTS: dict[int, tuple[weakref.ref, dict[tuple[jax.Device, ...], jax.Array]]] = {}


def assemble(env: list, outputs: list, replicated: Sequence[ReplicatedOutput]) -> None:
    """Replaces each replicated output in ``outputs`` by one array over all its copies."""
    for out in replicated:
        parts = [env[slot] for slot in out.slots]
        outputs[out.position] = one_array(
            out.aval, out.sharding, out.devices, parts, out.slot_devices
        )


def one_array(
    aval: Any,
    sharding: Sharding,
    devices: Sequence[jax.Device],
    parts: Sequence[jax.Array],
    part_devices: Sequence[tuple[jax.Device, ...]],
) -> jax.Array:
    """Rank arrays ``parts`` (each on ``part_devices``) as one array laid out as
    ``sharding`` (its devices ``devices``), their own buffers; it remembers them."""
    by_device: dict[jax.Device, jax.Array] = {}
    for part, on in zip(parts, part_devices, strict=True):
        if len(on) == 1:
            by_device[on[0]] = part
        else:
            by_device.update((s.device, s.data) for s in part.addressable_shards)
    array = jc.make_array(aval, sharding, [by_device[d] for d in devices])
    remember_parts(array, dict(zip(part_devices, parts, strict=True)))
    return array


def remember_parts(array: jax.Array, parts: dict[tuple[jax.Device, ...], jax.Array]) -> None:
    """Keeps ``parts`` (the rank arrays ``array`` was built from, by their devices) for as
    long as ``array`` lives: ``remembered_part`` gives them back."""
    key = id(array)

    def forget(reference: weakref.ref, key: int = key) -> None:
        entry = _PARTS.get(key)
        if entry is not None and entry[0] is reference:
            del _PARTS[key]

    _PARTS[key] = (weakref.ref(array, forget), parts)


def remembered_part(x: jax.Array, devices: Sequence[jax.Device]) -> jax.Array | None:
    """The rank array on ``devices`` that ``x`` was built from (``remember_parts``), if any."""
    entry = _PARTS.get(id(x))
    if entry is not None and entry[0]() is x:
        return entry[1].get(tuple(devices))
    return None


def covers(x: jax.Array, devices: Sequence[jax.Device]) -> bool:
    """Whether ``x`` holds a whole copy on each of ``devices`` (and on others)."""
    current = x.sharding
    return (
        len(current.device_set) > len(devices)
        and current.is_fully_replicated
        and current.device_set.issuperset(devices)
    )


def part_on(
    x: jax.Array, aval: Any, sharding: Sharding, devices: Sequence[jax.Device]
) -> jax.Array:
    """``x`` (replicated, see ``covers``) restricted to ``devices``, laid out as
    ``sharding`` (replicated there): its own buffers, no copy."""
    part = remembered_part(x, devices)
    if part is not None and (part.sharding is sharding or part.sharding == sharding):
        return part
    by_device = {shard.device: shard.data for shard in x.addressable_shards}
    return jc.make_array(aval, sharding, [by_device[d] for d in devices])
