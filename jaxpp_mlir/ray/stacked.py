"""Stacked arrays split over ranks (``StackedArray``) between the driver and the workers.

An output made of pieces (a stacked parameter whose layers are split into stages) stays
on the workers piece by piece: each worker stores the pieces of its ranks (and a
``RemoteOutput`` for the others') under one id per piece, and the driver holds a
``StackedArray`` whose chunks are ``RayArray`` handles on those ids. Shipped back (a
step, a checkpoint), it travels as a ``StackedRef`` (rows, ranks, ids), which each
worker turns into its own ``StackedArray`` again: its pieces, never moved.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from jaxpp_mlir.runtime.plan import ExecutionPlan
from jaxpp_mlir.runtime.stacked_array import Chunk, StackedArray


class StackedRef:
    """A ``StackedArray`` of handles as shipped: each chunk's rows, rank and array id."""

    __slots__ = ("chunks",)

    def __init__(self, chunks: Sequence[tuple[int, int, int, Any]]):
        self.chunks = tuple(chunks)  # (start, stop, rank, HandleRef)

    def __reduce__(self) -> tuple:
        return (StackedRef, (self.chunks,))

    def resolve(self, lookup: Callable[[Any], Any]) -> StackedArray:
        """The ``StackedArray`` of what ``lookup`` gives for each chunk's handle."""
        return StackedArray(
            [Chunk(range(start, stop), rank, lookup(ref)) for start, stop, rank, ref in self.chunks]
        )


def output_ids(plan: ExecutionPlan, first: int) -> tuple[int, list[int | list[int]]]:
    """How many ids a step's outputs take from ``first`` on, and each output's: one id, or
    one per piece for an output made of pieces (after every output's own id)."""
    ids: list[int | list[int]] = []
    extra = first + len(plan.outputs)
    for j, out in enumerate(plan.outputs):
        if out.pieces:
            ids.append(list(range(extra, extra + len(out.pieces))))
            extra += len(out.pieces)
        else:
            ids.append(first + j)
    return extra - first, ids


def leaf_ids(leaves: Sequence[Any], first: int) -> tuple[int, list[int | list[int]]]:
    """As ``output_ids`` for restored leaves: one id per leaf, one per chunk of a stacked
    one (a ``StackedArray`` or ``StackedRef``)."""
    ids: list[int | list[int]] = []
    extra = first + len(leaves)
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, StackedArray | StackedRef):
            ids.append(list(range(extra, extra + len(leaf.chunks))))
            extra += len(leaf.chunks)
        else:
            ids.append(first + i)
    return extra - first, ids
