"""The two helpers every accessor of the dialect uses: the ``Operation`` behind an
``OpView``, and an i64 attribute."""

from __future__ import annotations

from jax.interpreters.mlir import ir


def as_operation(op: ir.Operation | ir.OpView) -> ir.Operation:
    """The ``Operation`` of ``op`` (an ``Operation``'s is itself: cheaper than asking for
    the type)."""
    return op.operation


def i64_attr(value: int) -> ir.IntegerAttr:
    """``value`` as a signless 64-bit integer attribute."""
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)
