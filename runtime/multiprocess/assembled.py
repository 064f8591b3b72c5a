"""Outputs made of pieces (``OutputBinding.pieces``) when the ranks live in several processes.

Each process returns the pieces its ranks hold (the local plan has one output per
piece, ``local_plan.local_outputs``). An even split in one array layout (as in one
process, ``execution.assembled.mpmd_sharding``) becomes one global ``jax.Array``
sharded along axis 0 over the mpmd axis, each process holding its ranks' rows (as
any multi-controller JAX array: this process's shards addressable, ``np.asarray``
only through ``gather``); otherwise a ``StackedArray`` whose chunks held by another
process are ``RemoteOutput``s, following their rules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
from jax.sharding import Mesh, Sharding

from ..execution.assembled import mpmd_sharding
from ..plan import ExecutionPlan, OutputBinding, Piece
from ..stacked_array import Chunk, StackedArray
from .remote_output import RemoteOutput


def whole_shardings(
    plan: ExecutionPlan,
    shardings: Mapping[Any, Sharding],
    rank_meshes: Sequence[Mesh] | None,
    mpmd_axis: str | None,
) -> dict[int, Sharding | None]:
    """Per output made of pieces, the sharding of the one array they form (None: none)."""
    found: dict[int, Sharding | None] = {}
    for j, out in enumerate(plan.outputs):
        if not out.pieces:
            continue
        found[j] = None
        if rank_meshes is not None and mpmd_axis is not None:
            pieces = [shardings[(j, k)] for k in range(len(out.pieces))]
            found[j] = mpmd_sharding(out, pieces, rank_meshes, mpmd_axis)
    return found


def assemble_output(
    j: int,
    out: OutputBinding,
    held: Mapping[tuple[int, int], jax.Array],
    whole: Sharding | None,
    remote: Callable[[int, Piece], RemoteOutput],
) -> jax.Array | StackedArray:
    """Output ``j`` from the pieces this process holds (``held``, by ``(j, k)``); a piece
    held elsewhere is ``remote(k, piece)`` (a ``RemoteOutput``)."""
    if whole is not None:
        shards = [
            shard.data
            for key, array in held.items()
            if key[0] == j
            for shard in array.addressable_shards
        ]
        try:
            return jax.make_array_from_single_device_arrays(tuple(out.spec.shape), whole, shards)
        except ValueError:  # a jax that wants at least one local shard: chunks instead
            pass
    chunks = []
    for k, piece in enumerate(out.pieces):
        array = held.get((j, k))
        chunks.append(
            Chunk(
                range(piece.start, piece.stop),
                piece.rank,
                remote(k, piece) if array is None else array,
            )
        )
    return StackedArray(chunks)


def remote_piece(
    serial: int,
    call: int,
    j: int,
    process_of: Sequence[int],
    shardings: Mapping[Any, Sharding],
) -> Callable[[int, Piece], RemoteOutput]:
    """Makes the ``RemoteOutput`` of piece k of output ``j`` (of call ``call`` of program
    ``serial``), held by another process."""

    def make(k: int, piece: Piece) -> RemoteOutput:
        process = process_of[piece.rank]
        return RemoteOutput(serial, call, j, piece.rank, process, piece.spec, shardings.get((j, k)))

    return make
