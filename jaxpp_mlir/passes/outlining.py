"""Outlining a group of ops into a private function called by one jaxpp.task.

Shared by the passes that outline (stages inside the loop, code outside it);
it is a helper, not a pass.
"""

from __future__ import annotations

from collections.abc import Callable

from jax.extend.mlir import ir
from jax.extend.mlir.dialects import func

from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.passes import shardings


def copyable_ops(top_ops: list[ir.Operation], keep: set[ir.Value]) -> set[ir.Operation]:
    """Cheap ops computed from constants alone, whose results are not in ``keep``.

    They are copied into every function that needs them rather than passed
    between functions.
    """
    copyable: set[ir.Operation] = set()
    for op in top_ops:
        if not ir_utils.is_pure_constant_like(op) or op.regions:
            continue
        if any(r in keep for r in op.results):
            continue
        producers = [ir_utils.defining_op(v) for v in op.operands]
        if all(p is not None and p in copyable for p in producers):
            copyable.add(op)
    return copyable


def outline_group(
    module: ir.Operation,
    group: list[ir.Operation],
    copyable: set[ir.Operation],
    *,
    insert_before: ir.Operation,
    name: str,
    stage: int,
    kind: str,
) -> ir.Operation:
    """Moves ``group`` (ops of one block, in order) into ``@name``; returns the new task.

    The function's arguments are the values the group reads from outside
    (copyable producers are cloned in instead); its results are the group's
    values read outside it, which the task's results replace there.
    """
    members = set(group)
    inputs, needed_copies = _inputs_and_copies(group, members, copyable)
    outputs = _outputs(group, members)
    with ir.InsertionPoint(module.regions[0].blocks[0]), group[0].location:
        function = func.FuncOp(
            name, ([v.type for v in inputs], [v.type for v in outputs]), visibility="private"
        )
    entry = function.add_entry_block()
    with ir.InsertionPoint(insert_before), group[0].location:
        task = jaxpp.create_task(name, inputs, [v.type for v in outputs], stage=stage, kind=kind)
    input_shardings = shardings.shardings_or_replicated(module, inputs)
    if input_shardings is not None:
        output_shardings = shardings.shardings_or_replicated(module, outputs)
        shardings.set_function_shardings(function.operation, input_shardings, output_shardings)
        shardings.set_result_shardings(task, output_shardings)
    with ir.InsertionPoint(entry):
        copies = _clone_copies(needed_copies)
        with group[-1].location:
            ret = func.ReturnOp(outputs)
    for op in group:
        op.move_before(ret.operation)
        jaxpp.clear_stage(op)
    function_op = function.operation
    replacements = dict(zip(inputs, entry.arguments, strict=True))
    replacements.update(copies)
    for old, new in replacements.items():
        _replace_uses(old, new, lambda owner: ir_utils.is_inside(owner, function_op))
    for old, new in zip(outputs, task.results, strict=True):
        _replace_uses(old, new, lambda owner: not ir_utils.is_inside(owner, function_op))
    return task


def _inputs_and_copies(
    group: list[ir.Operation], members: set[ir.Operation], copyable: set[ir.Operation]
) -> tuple[list[ir.Value], list[ir.Operation]]:
    """The values ``group`` reads from outside, and the copyable producers to clone in
    (operands first)."""
    needed_copies: list[ir.Operation] = []
    inputs: list[ir.Value] = []
    seen: set[ir.Value] = set()

    def visit_operand(value: ir.Value) -> None:
        producer = ir_utils.defining_op(value)
        if producer is not None and producer in members:
            return
        if producer is not None and producer in copyable:
            if producer not in needed_copies:
                for operand in producer.operands:
                    visit_operand(operand)
                needed_copies.append(producer)
            return
        if value not in seen:
            seen.add(value)
            inputs.append(value)

    for op in group:
        for value in ir_utils.external_operands(op):
            visit_operand(value)
    return inputs, needed_copies


def _outputs(group: list[ir.Operation], members: set[ir.Operation]) -> list[ir.Value]:
    """The results of ``group`` read outside it."""
    block = group[0].block
    return [
        result
        for op in group
        for result in op.results
        if any(
            not _is_inside_block(ir_utils.use_owner(u), block)
            or ir_utils.top_level_user(ir_utils.use_owner(u), block) not in members
            for u in result.uses
        )
    ]


def _clone_copies(needed_copies: list[ir.Operation]) -> dict[ir.Value, ir.Value]:
    """Clones ``needed_copies`` at the insertion point, wired to each other."""
    copies: dict[ir.Value, ir.Value] = {}
    for original in needed_copies:
        clone = original.clone()
        jaxpp.clear_stage(clone)
        for index, operand in enumerate(clone.operands):
            if operand in copies:
                clone.operands[index] = copies[operand]
        for old, new in zip(original.results, clone.results, strict=True):
            copies[old] = new
    return copies


def _replace_uses(old: ir.Value, new: ir.Value, where: Callable[[ir.Operation], bool]) -> None:
    for use in list(old.uses):
        owner = ir_utils.use_owner(use)
        if where(owner):
            owner.operands[use.operand_number] = new


def _is_inside_block(op: ir.Operation, block: ir.Block) -> bool:
    current: ir.Operation | None = op
    while current is not None:
        if current.block == block:
            return True
        current = ir_utils.parent_op(current)
    return False
