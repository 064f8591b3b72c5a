"""Which rank holds each array of a pytree: ``placement(tree, mesh)``.

Every leaf that is a ``jax.Array`` on the devices of some ranks of ``mesh``
becomes an ``ArrayPlacement`` that prints like JaxPP's ``MpmdArray``:
``MpmdArray(shape=(8, 8), dtype=float32, mpmd_idxs=(1,), sharding=NamedSharding(...))``.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from jaxpp_mlir.mesh import MpmdMesh
from jaxpp_mlir.runtime import records


@records.frozen
class ArrayPlacement:
    """Where one array lives: its ranks (``mpmd_idxs``) and its sharding there."""

    shape: tuple[int, ...]
    dtype: np.dtype
    mpmd_idxs: tuple[int, ...]
    sharding: Any

    @property
    def spec(self) -> Any:
        return getattr(self.sharding, "spec", None)

    def __repr__(self) -> str:
        return (
            f"MpmdArray(shape={self.shape}, dtype={_dtype_name(self.dtype)}, "
            f"mpmd_idxs={self.mpmd_idxs}, sharding={self.sharding})"
        )


def _dtype_name(dtype: Any) -> str:
    if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        return str(dtype)
    return np.dtype(dtype).name


def ranks_of(array: jax.Array, mesh: MpmdMesh) -> tuple[int, ...]:
    """The ranks of ``mesh`` whose devices hold part of ``array``."""
    devices = array.sharding.device_set
    return tuple(
        rank for rank in range(mesh.mpmd_dim) if devices.intersection(mesh.rank_devices(rank))
    )


def placement(tree: Any, mesh: MpmdMesh) -> Any:
    """``tree`` with every ``jax.Array`` leaf (and every ``RemoteOutput``, an output held by
    another process) replaced by its ``ArrayPlacement``; a ``StackedArray`` (rows on several
    ranks) by one whose chunks are their placements."""

    from jaxpp_mlir.runtime.multiprocess.remote_output import RemoteOutput
    from jaxpp_mlir.runtime.stacked_array import Chunk, StackedArray

    def place(leaf: Any) -> Any:
        if isinstance(leaf, StackedArray):
            return StackedArray([Chunk(c.rows, c.rank, place(c.array)) for c in leaf.chunks])
        if isinstance(leaf, RemoteOutput):  # held by another process: it knows where
            return ArrayPlacement(leaf.shape, leaf.dtype, (leaf.rank,), leaf.sharding)
        if not isinstance(leaf, jax.Array):
            return leaf
        dtype = leaf.dtype  # a typed PRNG key's dtype has no numpy equivalent: kept
        if not jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
            dtype = np.dtype(dtype)
        return ArrayPlacement(tuple(leaf.shape), dtype, ranks_of(leaf, mesh), leaf.sharding)

    return jax.tree_util.tree_map(place, tree)
