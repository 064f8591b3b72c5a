"""``StackedArray``: an array split along axis 0 into chunks, each on its pipeline rank.

A stacked layer parameter (``[L, ...]``, one row per layer of a scan) whose
layers are split into stages comes back from a step with each stage's rows on
that stage's rank. Where the rows split evenly, one piece per rank, the step
returns one ``jax.Array`` sharded along axis 0 over the mesh's mpmd axis; where
they do not (uneven splits, an interleaved schedule whose rank r holds chunks r
and r + p), it returns a ``StackedArray``: it says where each chunk lives
(``chunks``: rows, rank, array), has ``shape`` and ``dtype``, reads with
``np.asarray`` (the chunks copied to the host and concatenated), and passed back
as the next step's argument gives each rank its own chunk without moving data.

In a multi-process run a chunk held by another process is a ``RemoteOutput``
there (``np.asarray`` then raises; ``step.gather`` fetches every chunk).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from .errors import CallError


class Chunk(NamedTuple):
    """Rows ``rows`` (along axis 0) of a ``StackedArray``, held as ``array`` on ``rank``."""

    rows: range
    rank: int
    array: Any  # a jax.Array; a RemoteOutput where another process holds it


class StackedArray:
    """An array whose rows along axis 0 are chunks living on their pipeline ranks."""

    __slots__ = ("__weakref__", "_chunks", "_dtype", "_shape")

    def __init__(self, chunks: Sequence[Chunk]):
        chunks = tuple(Chunk(range(c.rows.start, c.rows.stop), c.rank, c.array) for c in chunks)
        if not chunks:
            raise CallError("a StackedArray needs at least one chunk")
        first = chunks[0].array
        rest, dtype, row = tuple(first.shape[1:]), np.dtype(first.dtype), 0
        for chunk in chunks:
            shape = tuple(chunk.array.shape)
            if chunk.rows.start != row or shape != (len(chunk.rows), *rest):
                raise CallError(
                    f"chunk rows [{chunk.rows.start}, {chunk.rows.stop}) on rank {chunk.rank} "
                    f"(shape {shape}) do not follow rows [0, {row}) of shape (..., {rest})"
                )
            if np.dtype(chunk.array.dtype) != dtype:
                raise CallError(
                    f"chunk rows [{chunk.rows.start}, {chunk.rows.stop}) on rank {chunk.rank} "
                    f"has dtype {np.dtype(chunk.array.dtype)}, the first chunk {dtype}"
                )
            row = chunk.rows.stop
        self._chunks = chunks
        self._shape = (row, *rest)
        self._dtype = dtype

    @property
    def chunks(self) -> tuple[Chunk, ...]:
        """Each chunk in row order: ``(rows, rank, array)``."""
        return self._chunks

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        return int(np.prod(self._shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self._dtype.itemsize

    @property
    def ranks(self) -> tuple[int, ...]:
        """The rank of each chunk, in row order."""
        return tuple(chunk.rank for chunk in self._chunks)

    def __len__(self) -> int:
        return self._shape[0]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        whole = np.concatenate([np.asarray(chunk.array) for chunk in self._chunks], axis=0)
        return whole if dtype is None else whole.astype(dtype)

    def block_until_ready(self) -> StackedArray:
        for chunk in self._chunks:
            chunk.array.block_until_ready()
        return self

    def is_deleted(self) -> bool:
        """Whether some chunk was deleted (donated to a call, or deleted)."""
        return any(chunk.array.is_deleted() for chunk in self._chunks)

    def delete(self) -> None:
        for chunk in self._chunks:
            chunk.array.delete()

    def __repr__(self) -> str:
        parts = ", ".join(
            f"rows {c.rows.start}:{c.rows.stop} on rank {c.rank}" for c in self._chunks
        )
        return f"StackedArray(shape={self._shape}, dtype={self._dtype.name}, chunks=[{parts}])"
