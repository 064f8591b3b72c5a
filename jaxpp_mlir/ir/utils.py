"""Small IR helpers (lookup of ``@main``, walking, use queries), for passes and the rest."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from jax.interpreters.mlir import ir

from jaxpp_mlir import diagnostics
from jaxpp_mlir.dialect import ops as jaxpp

__all__ = [
    "CHEAP_OPS",
    "CONSTANT_OPS",
    "MAIN",
    "block_ops",
    "body",
    "collect_ops",
    "defining_op",
    "external_operands",
    "find_loop",
    "find_main",
    "get_main",
    "is_inside",
    "is_pure_constant_like",
    "operands_read",
    "parent_op",
    "stage_block",
    "symbol_name",
    "top_level_user",
    "use_owner",
    "walk",
]

MAIN = "main"


def find_main(module: ir.Operation | ir.Module) -> ir.Operation | None:
    """The ``func.func @main`` of ``module``, or None (no diagnostic)."""
    module = module.operation
    for op in module.regions[0].blocks[0].operations:
        if op.operation.name == "func.func" and symbol_name(op.operation) == MAIN:
            return op.operation
    return None


def get_main(module: ir.Operation) -> ir.Operation:
    """The ``func.func @main`` of ``module``; a located error if there is none."""
    main = find_main(module)
    if main is None:
        raise diagnostics.error(module, "the module has no 'func.func @main' to partition")
    return main


def find_loop(main: ir.Operation) -> ir.Operation | None:
    """The ``jaxpp.loop`` at the top level of ``main``, if any."""
    for op in body(main).operations:
        if op.operation.name == jaxpp.LOOP_OP:
            return op.operation
    return None


def stage_block(main: ir.Operation) -> ir.Block:
    """The block whose ops are split into stages: the loop body if there is a loop, else @main's."""
    loop = find_loop(main)
    return jaxpp.loop_body(loop) if loop is not None else body(main)


def parent_op(op: ir.Operation) -> ir.Operation | None:
    parent = op.parent
    return None if parent is None else parent.operation


def is_inside(op: ir.Operation, ancestor: ir.Operation) -> bool:
    """True if ``op`` is ``ancestor`` or nested in it."""
    current: ir.Operation | None = op
    while current is not None:
        if current == ancestor:
            return True
        current = parent_op(current)
    return False


def use_owner(use: ir.OpOperand) -> ir.Operation:
    return use.owner.operation  # an Operation's is itself


def symbol_name(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["sym_name"]).value


def body(func: ir.Operation) -> ir.Block:
    return func.regions[0].blocks[0]


def walk(op: ir.Operation) -> Iterator[ir.Operation]:
    """Every operation nested inside ``op`` (not ``op`` itself), pre-order.

    MLIR walks the IR (about twice as fast as a Python recursion) and the ops are
    listed before the first is yielded: the caller must not erase ops while iterating.
    """
    if not len(op.regions):
        return iter(())
    found: list[ir.Operation] = []
    append, advance = found.append, ir.WalkResult.ADVANCE  # looked up once, not per op

    def visit(nested: ir.Operation) -> ir.WalkResult:
        append(nested)
        return advance

    op.walk(visit, ir.WalkOrder.PRE_ORDER)
    return iter(found[1:])  # the first is ``op`` itself


def block_ops(block: ir.Block) -> list[ir.Operation]:
    """The ops of ``block`` in order, as ``Operation`` objects (not ``OpView``).

    When the block is its owner's only block, MLIR's walk lists them without entering
    what they hold: cheaper than ``[op.operation for op in block.operations]``, which
    builds an ``OpView`` per op first.
    """
    owner = block.owner.operation
    regions = owner.regions
    if len(regions) != 1 or len(regions[0].blocks) != 1:
        return [op.operation for op in block.operations]
    found: list[ir.Operation] = []
    append, advance, skip = found.append, ir.WalkResult.ADVANCE, ir.WalkResult.SKIP

    def visit(nested: ir.Operation) -> ir.WalkResult:
        append(nested)
        return skip if len(found) > 1 else advance  # enter the owner (visited first) only

    owner.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found[1:]


def collect_ops(op: ir.Operation, name: str) -> list[ir.Operation]:
    return [nested for nested in walk(op) if nested.name == name]


def defining_op(value: ir.Value) -> ir.Operation | None:
    """The op that defines ``value``, or None for a block argument."""
    if isinstance(value, ir.OpResult):
        return value.owner.operation  # an Operation's is itself
    return None


def external_operands(op: ir.Operation) -> list[ir.Value]:
    """Operands of ``op`` and of ops nested in it that are defined outside ``op``."""
    if not len(op.regions):
        return list(dict.fromkeys(op.operands))
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


def operands_read(op: ir.Operation) -> Sequence[ir.Value]:
    """The operands of ``op`` and of the ops nested in it, repeats and values defined
    inside ``op`` included: for a caller that looks them up among the results of other
    ops of ``op``'s block, cheaper than ``external_operands``."""
    if not len(op.regions):
        return op.operands
    read = list(op.operands)
    for nested in walk(op):
        read.extend(nested.operands)
    return read


def top_level_user(value_use_owner: ir.Operation, block: ir.Block) -> ir.Operation:
    """The ancestor of ``value_use_owner`` that sits directly in ``block``."""
    op = value_use_owner
    while op.block != block:
        op = parent_op(op)
    return op


def is_pure_constant_like(op: ir.Operation) -> bool:
    """Constants and ops computed from constants alone that are cheap to duplicate."""
    return op.name in CHEAP_OPS


WHILE_OP = "stablehlo.while"  # a loop: lax.scan, fori_loop, treduce's microbatch loop
CONSTANT_OPS = ("stablehlo.constant", "sdy.constant")  # Shardy's import makes the latter
CHEAP_OPS = frozenset(
    {
        *CONSTANT_OPS,
        "stablehlo.iota",
        "stablehlo.broadcast_in_dim",
        "stablehlo.reshape",
        "stablehlo.convert",
    }
)
