"""Small IR helpers shared by the passes (lookup, walking, use queries)."""

from __future__ import annotations

from collections.abc import Iterator

from jax.extend.mlir import ir

from jaxpp_mlir import diagnostics

MAIN = "main"


def get_main(module: ir.Operation) -> ir.Operation:
    """The ``func.func @main`` of ``module``; a located error if there is none."""
    for op in module.regions[0].blocks[0].operations:
        if op.operation.name == "func.func" and symbol_name(op.operation) == MAIN:
            return op.operation
    raise diagnostics.error(module, "the module has no 'func.func @main' to partition")


def symbol_name(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["sym_name"]).value


def body(func: ir.Operation) -> ir.Block:
    return func.regions[0].blocks[0]


def walk(op: ir.Operation) -> Iterator[ir.Operation]:
    """Every operation nested inside ``op`` (not ``op`` itself), pre-order."""
    for region in op.regions:
        for block in region.blocks:
            for nested in block.operations:
                nested = nested.operation
                yield nested
                yield from walk(nested)


def collect_ops(op: ir.Operation, name: str) -> list[ir.Operation]:
    return [nested for nested in walk(op) if nested.name == name]


def defining_op(value: ir.Value) -> ir.Operation | None:
    """The op that defines ``value``, or None for a block argument."""
    if isinstance(value, ir.OpResult):
        return value.owner.operation if isinstance(value.owner, ir.OpView) else value.owner
    return None


def external_operands(op: ir.Operation) -> list[ir.Value]:
    """Operands of ``op`` and of ops nested in it that are defined outside ``op``."""
    inside: set[ir.Value] = set()
    used: list[ir.Value] = list(op.operands)
    for nested in walk(op):
        inside.update(nested.results)
        for region in nested.regions:
            for block in region.blocks:
                inside.update(block.arguments)
        used.extend(nested.operands)
    for region in op.regions:
        for block in region.blocks:
            inside.update(block.arguments)
    seen: set[ir.Value] = set()
    result = []
    for value in used:
        if value not in inside and value not in seen:
            seen.add(value)
            result.append(value)
    return result


def top_level_user(value_use_owner: ir.Operation, block: ir.Block) -> ir.Operation:
    """The ancestor of ``value_use_owner`` that sits directly in ``block``."""
    op = value_use_owner
    while op.block != block:
        op = op.parent.operation if isinstance(op.parent, ir.OpView) else op.parent
    return op


def is_pure_constant_like(op: ir.Operation) -> bool:
    """Constants and ops computed from constants alone that are cheap to duplicate."""
    return op.name in CHEAP_OPS


CHEAP_OPS = frozenset(
    {
        "stablehlo.constant",
        "stablehlo.iota",
        "stablehlo.broadcast_in_dim",
        "stablehlo.reshape",
        "stablehlo.convert",
    }
)
