"""Rows of an argument as one rank's piece: the caller's buffers where they already are.

An argument sharded along axis 0 (over the mesh's mpmd axis, as the step returns
a stacked parameter split into stages) holds each rank's rows on that rank's
devices: the piece is built from those shards, laid out as the rank reads it,
without a copy. Anything else is sliced and copied there: on the host where the array
lives in host memory (XLA:CPU; ``sliced_on_host``), which compiles nothing, else by
``jax.device_put`` of ``x[start:stop]``, which compiles a slice program per shape.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import jax
from jax.sharding import Sharding

from .. import _jax_compat as jc
from ..errors import CallError
from .replicated import remembered_part

if TYPE_CHECKING:
    from .arguments import Target


def rows_on(x: jax.Array, start: int, stop: int, aval: Any, target: Target) -> jax.Array:
    """Rows ``[start, stop)`` of ``x`` on ``target`` (one rank's slot and layout): its own
    shards where ``x`` holds exactly those rows there, laid out so; else a copy."""
    if holds_rows(x.sharding, tuple(x.shape), start, stop, target.sharding):
        part = remembered_part(x, target.devices)  # an output this runtime built
        if part is not None and part.sharding == target.sharding:
            return part
        by_device = {shard.device: shard.data for shard in x.addressable_shards}
        return jc.make_array(aval, target.sharding, [by_device[d] for d in target.devices])
    if not x.is_fully_addressable:
        raise CallError(
            f"rows [{start}, {stop}) of an argument spanning several processes are not on "
            f"the devices of the rank that reads them, laid out as it reads them: pass the "
            f"array the step returned, or host data"
        )
    return jax.device_put(x[start:stop], target.sharding)


def sliced_on_host(x: jax.Array, start: int, stop: int, target: Target) -> bool:
    """Whether rows ``[start, stop)`` of ``x`` are best cut from its host copy for
    ``target``: they are not already there, and ``x`` lives in host memory (CPU devices),
    where the copy is a read of its own buffers and the slice compiles nothing (a device
    slice compiles one program per shape, 0.1 to 0.3 s each on XLA:CPU)."""
    return (
        x.is_fully_addressable
        and all(device.platform == "cpu" for device in x.sharding.device_set)
        and not holds_rows(x.sharding, tuple(x.shape), start, stop, target.sharding)
    )


@functools.lru_cache(maxsize=1024)
def holds_rows(
    sharding: Sharding, shape: tuple[int, ...], start: int, stop: int, target: Sharding
) -> bool:
    """Whether an array of ``shape`` laid out as ``sharding`` holds, on each device of
    ``target``, that device's block of its rows ``[start, stop)`` laid out as ``target``."""
    whole = sharding.devices_indices_map(shape)
    piece_shape = (stop - start, *shape[1:])
    for device, index in target.devices_indices_map(piece_shape).items():
        if bounds(whole.get(device), shape) != bounds(index, piece_shape, offset=start):
            return False
    return True


def bounds(index: tuple | None, shape: Sequence[int], offset: int = 0) -> tuple | None:
    """An index of slices as ``(start, stop)`` per dimension, the first moved by ``offset``."""
    if index is None:
        return None
    result = []
    for d, size in enumerate(shape):
        first, last, _ = (index[d] if d < len(index) else slice(None)).indices(size)
        result.append((first + offset, last + offset) if d == 0 else (first, last))
    return tuple(result)
