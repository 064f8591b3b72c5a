"""Outputs put together from pieces on their ranks (``OutputBinding.pieces``).

A stacked layer parameter split into stages comes back with each stage's rows
on that stage's rank, never moved. Where the pieces have equal rows and lie on
distinct ranks, each laid out on its rank's submesh, the output is ONE
``jax.Array`` over those submeshes stacked along the mesh's mpmd axis, sharded
along axis 0 over that axis (``P(("pp", *the rank's axes of dimension 0), ...)``:
the rank's own layout of every dimension kept), built from the pieces' buffers
without a copy; so ``x.sharding``, ``np.asarray(x)``, ``jax.device_put`` and
checkpoints work as for any array. Otherwise (uneven rows, several pieces on one
rank as under an interleaved schedule, no submeshes given) it is a
``StackedArray`` of the piece arrays.

Passed back as an argument, an array built here gives each rank its piece as it
was (``replicated.remember_parts``); see ``pieces`` for the placement.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec, Sharding

from .. import records
from .. import transfer as _transfer
from ..plan import ExecutionPlan, OutputBinding
from ..stacked_array import Chunk, StackedArray
from .pieces import bounds
from .replicated import one_array
from .slots import ResolvedPlan


@records.frozen
class AssembledOutput:
    """Output ``position``: the pieces in ``slots`` (rows ``rows`` on ``ranks``), as one
    array over ``sharding`` (its devices ``devices``) where one expresses them, else
    (``sharding`` None) as a ``StackedArray``."""

    position: int
    slots: tuple[int, ...]
    rows: tuple[range, ...]
    ranks: tuple[int, ...]
    aval: Any
    sharding: Sharding | None
    devices: tuple[jax.Device, ...]
    slot_devices: tuple[tuple[jax.Device, ...], ...]


def assembled_outputs(
    plan: ExecutionPlan,
    resolved: ResolvedPlan,
    rank_meshes: Sequence[Mesh] | None,
    mpmd_axis: str | None,
) -> tuple[AssembledOutput, ...]:
    """The outputs made of pieces, each with the one array layout its pieces form (if any)."""
    found = []
    for position, out in enumerate(plan.outputs):
        if not out.pieces:
            continue
        slots = tuple(resolved.where[(p.rank, p.value)] for p in out.pieces)
        shardings = [resolved.slots[s].sharding for s in slots]
        aval = jax.core.ShapedArray(tuple(out.spec.shape), np.dtype(out.spec.dtype))
        sharding = None
        if rank_meshes is not None and mpmd_axis is not None:
            sharding = mpmd_sharding(out, shardings, rank_meshes, mpmd_axis)
        found.append(
            AssembledOutput(
                position,
                slots,
                tuple(range(p.start, p.stop) for p in out.pieces),
                tuple(p.rank for p in out.pieces),
                aval,
                sharding,
                tuple(_transfer.device_list(sharding)) if sharding is not None else (),
                tuple(tuple(_transfer.device_list(s)) for s in shardings),
            )
        )
    return tuple(found)


def mpmd_sharding(
    out: OutputBinding,
    piece_shardings: Sequence[Sharding],
    rank_meshes: Sequence[Mesh],
    mpmd_axis: str,
) -> NamedSharding | None:
    """The sharding of ``out`` split along axis 0 over the mpmd axis, piece i on its
    rank's submesh as it lies there; None where no ``NamedSharding`` says that (uneven
    pieces, two on one rank, a piece not laid out on its rank's submesh)."""
    pieces = out.pieces
    ranks = [p.rank for p in pieces]
    if len(set(ranks)) != len(ranks) or len({p.rows for p in pieces}) != 1:
        return None
    meshes = [rank_meshes[r] for r in ranks]
    first = meshes[0]
    if mpmd_axis not in first.axis_names:
        return None
    specs = set()
    for sharding, mesh in zip(piece_shardings, meshes, strict=True):
        if isinstance(sharding, NamedSharding) and sharding.mesh == mesh:
            specs.add(_padded(sharding.spec, len(out.spec.shape)))
        elif sharding.is_fully_replicated and sharding.device_set == set(mesh.devices.flat):
            specs.add((None,) * len(out.spec.shape))  # whole on its rank (one device, say)
        else:
            return None
    if len(specs) != 1:
        return None
    ((first_dim, *other_dims),) = specs
    if mpmd_axis in _axes(first_dim):
        return None
    axis = first.axis_names.index(mpmd_axis)
    devices = np.concatenate([mesh.devices for mesh in meshes], axis=axis)
    stacked = Mesh(devices, first.axis_names, axis_types=first.axis_types)
    leading = (mpmd_axis, *_axes(first_dim))
    spec = PartitionSpec(leading if len(leading) > 1 else mpmd_axis, *other_dims)
    sharding = NamedSharding(stacked, spec)
    return sharding if _matches(sharding, out, piece_shardings) else None


def _padded(spec: PartitionSpec, ndim: int) -> tuple:
    return (*tuple(spec), *(None,) * (ndim - len(spec)))


def _axes(entry: Any) -> tuple[str, ...]:
    """The mesh axes one ``PartitionSpec`` entry names."""
    if entry is None:
        return ()
    return tuple(entry) if isinstance(entry, tuple) else (entry,)


def _matches(
    sharding: NamedSharding, out: OutputBinding, piece_shardings: Sequence[Sharding]
) -> bool:
    """Whether every device's block of ``sharding`` is that device's block of its piece,
    moved down by the piece's first row."""
    whole = sharding.devices_indices_map(tuple(out.spec.shape))
    for piece, piece_sharding in zip(out.pieces, piece_shardings, strict=True):
        own = piece_sharding.devices_indices_map(tuple(piece.spec.shape))
        for device, index in own.items():
            expected = bounds(index, piece.spec.shape, offset=piece.start)
            if bounds(whole.get(device), out.spec.shape) != expected:
                return False
    return True


def assemble_pieces(env: list, outputs: list, assembled: Sequence[AssembledOutput]) -> None:
    """Replaces each assembled output in ``outputs`` by its array (or ``StackedArray``)."""
    for out in assembled:
        arrays = [env[slot] for slot in out.slots]
        if out.sharding is None:
            outputs[out.position] = StackedArray(
                [Chunk(r, k, a) for r, k, a in zip(out.rows, out.ranks, arrays, strict=True)]
            )
            continue
        outputs[out.position] = one_array(
            out.aval, out.sharding, out.devices, arrays, out.slot_devices
        )
