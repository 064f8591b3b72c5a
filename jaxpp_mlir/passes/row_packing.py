"""The row layout the packing passes share (``jaxpp-pack-accumulators``,
``jaxpp-pack-parameters``): values of one element type in one rank-2 buffer of rows.

The rows are as wide as the gcd of the members' sizes, so each member is a whole
number of rows, in member order. Reading a member back is a ``slice`` of its rows and
a ``reshape``; packing is a ``reshape`` to rows and one ``concatenate`` along the rows
(on XLA:CPU a fused concatenate along the rows stays a plain vectorized loop per row,
where a rank-1 one picks its source operand per element: benchmarks/RESULTS.md).
Ops built here take the stage and kind of ``tags`` when one is given.
"""

from __future__ import annotations

import dataclasses
import math

from jax.interpreters.mlir import ir

from jaxpp_mlir._jax_compat import stablehlo
from jaxpp_mlir.dialect import ops as jaxpp


@dataclasses.dataclass
class RowLayout:
    """Where each member (by index, in the order added) lies in the packed buffer."""

    element_type: ir.Type
    shapes: list[tuple[int, ...]] = dataclasses.field(default_factory=list)

    def add(self, shape: tuple[int, ...]) -> int:
        """Appends a member; its index."""
        self.shapes.append(shape)
        return len(self.shapes) - 1

    @property
    def width(self) -> int:
        """Elements per row: every member is a whole number of rows."""
        return math.gcd(*(math.prod(shape) for shape in self.shapes))

    def row_range(self, index: int) -> tuple[int, int]:
        """The rows ``[first, last)`` of member ``index``."""
        width = self.width
        first = sum(math.prod(shape) for shape in self.shapes[:index]) // width
        return first, first + math.prod(self.shapes[index]) // width

    def as_rows(self, value: ir.Value, tags: ir.Operation | None = None) -> ir.Value:
        """``value`` (a member's shape) as rows of the layout's width."""
        shape = ir.RankedTensorType(value.type).shape
        rows = [math.prod(shape) // self.width, self.width]
        if shape == rows:
            return value
        reshape = stablehlo.ReshapeOp(ir.RankedTensorType.get(rows, self.element_type), value)
        _tag(reshape, tags)
        return reshape.result

    def pack(self, values: list[ir.Value], tags: ir.Operation | None = None) -> ir.Value:
        """The members' ``values``, as rows, concatenated in member order."""
        concatenate = stablehlo.ConcatenateOp([self.as_rows(v, tags) for v in values], 0)
        _tag(concatenate, tags)
        return concatenate.result

    def unpack(self, packed: ir.Value, index: int, tags: ir.Operation | None = None) -> ir.Value:
        """Member ``index`` read back from ``packed``: its rows, in its shape."""
        first, last = self.row_range(index)
        piece = stablehlo.SliceOp(packed, [first, 0], [last, self.width], [1, 1])
        _tag(piece, tags)
        shape = self.shapes[index]
        if list(shape) == [last - first, self.width]:
            return piece.result
        reshape = stablehlo.ReshapeOp(
            ir.RankedTensorType.get(list(shape), self.element_type), piece.result
        )
        _tag(reshape, tags)
        return reshape.result


def _tag(op: ir.OpView, tags: ir.Operation | None) -> None:
    if tags is not None:
        jaxpp.set_stage(op, jaxpp.get_stage(tags), jaxpp.get_kind(tags))
