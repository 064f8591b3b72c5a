"""jaxpp-outline-stages: one ``func.func`` per (stage, direction), called by jaxpp.task."""

from __future__ import annotations

import dataclasses

from jax.extend.mlir import ir
from jax.extend.mlir.dialects import func

from jaxpp_mlir import diagnostics
from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.passes import ir_utils
from jaxpp_mlir.passes.base import ModulePass, register_pass


@register_pass
@dataclasses.dataclass
class OutlineStages(ModulePass):
    """Outline each stage's forward and backward into its own func.func, called by jaxpp.task.

    Stage markers are erased (they are identities). The ops of each
    (stage, direction) group move, in their original order, into a private
    function ``@stage<k>_<fwd|bwd>`` whose arguments are the values the group
    reads from outside and whose results are the values other groups or the
    return of ``@main`` read. Constants and cheap ops computed from constants
    alone (iota, broadcast, reshape, convert) are copied into every group that
    needs them instead of being passed around; nothing else is computed twice.

    Precondition: every top-level op of ``@main`` but the terminator carries
    ``jaxpp.stage`` and ``jaxpp.kind`` (jaxpp-assign-stages).
    Postcondition: ``@main`` holds only ``jaxpp.task`` ops (forward stages in
    ascending order, then backward stages in descending order, a topological
    order) and its return; stage functions hold no stage marker.
    """

    name = "jaxpp-outline-stages"

    def run(self, module: ir.Operation) -> None:
        main = ir_utils.get_main(module)
        block = ir_utils.body(main)
        top_ops = [op.operation for op in block.operations][:-1]
        for op in top_ops:
            if not jaxpp.has_stage(op):
                raise diagnostics.error(
                    op, f"'{op.name}' has no stage assignment: run jaxpp-assign-stages first"
                )
        num_stages = jaxpp.get_int_attr(module, jaxpp.NUM_STAGES_ATTR)
        if num_stages is None:
            raise diagnostics.error(module, "module has no jaxpp.num_stages attribute")
        for op in top_ops:
            if jaxpp.is_stage_marker(op):
                for result, operand in zip(op.results, op.operands, strict=True):
                    result.replace_all_uses_with(operand)
                op.erase()
        top_ops = [op.operation for op in block.operations][:-1]
        terminator = list(block.operations)[-1].operation
        returned = set(terminator.operands)
        copyable = _copyable_ops(top_ops, returned)
        groups: dict[tuple[int, str], list[ir.Operation]] = {}
        for op in top_ops:
            if op in copyable:
                continue
            groups.setdefault((jaxpp.get_stage(op), jaxpp.get_kind(op)), []).append(op)
        for key in sorted(groups, key=lambda k: _position(k, num_stages)):
            _outline_group(module, main, key, groups[key], copyable, terminator)
        for op in reversed(top_ops):
            if op in copyable and all(not list(r.uses) for r in op.results):
                op.erase()


def _position(key: tuple[int, str], num_stages: int) -> int:
    stage, kind = key
    return stage if kind == jaxpp.FORWARD else 2 * num_stages - 1 - stage


def _copyable_ops(top_ops: list[ir.Operation], returned: set[ir.Value]) -> set[ir.Operation]:
    """Cheap ops computed from constants alone, not returned by @main."""
    copyable: set[ir.Operation] = set()
    for op in top_ops:
        if not ir_utils.is_pure_constant_like(op) or op.regions:
            continue
        if any(r in returned for r in op.results):
            continue
        producers = [ir_utils.defining_op(v) for v in op.operands]
        if all(p is not None and p in copyable for p in producers):
            copyable.add(op)
    return copyable


def _outline_group(
    module: ir.Operation,
    main: ir.Operation,
    key: tuple[int, str],
    group: list[ir.Operation],
    copyable: set[ir.Operation],
    terminator: ir.Operation,
) -> None:
    stage, kind = key
    members = set(group)
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
    outputs = [
        result
        for op in group
        for result in op.results
        if any(ir_utils.top_level_user(_owner(u), op.block) not in members for u in result.uses)
    ]
    name = f"stage{stage}_{kind}"
    with ir.InsertionPoint(module.regions[0].blocks[0]), main.location:
        function = func.FuncOp(
            name, ([v.type for v in inputs], [v.type for v in outputs]), visibility="private"
        )
    entry = function.add_entry_block()
    with ir.InsertionPoint(terminator), group[0].location:
        task = jaxpp.create_task(
            name, inputs, [v.type for v in outputs], stage=stage, kind=kind
        )
    with ir.InsertionPoint(entry):
        copies = {}
        for original in needed_copies:
            clone = original.clone()
            jaxpp.clear_stage(clone)
            for index, operand in enumerate(clone.operands):
                if operand in copies:
                    clone.operands[index] = copies[operand]
            for old, new in zip(original.results, clone.results, strict=True):
                copies[old] = new
        with group[-1].location:
            ret = func.ReturnOp(outputs)
    for op in group:
        op.move_before(ret.operation)
        jaxpp.clear_stage(op)
    function_op = function.operation
    replacements = dict(zip(inputs, entry.arguments, strict=True))
    replacements.update(copies)
    for old, new in replacements.items():
        for use in list(old.uses):
            owner = _owner(use)
            if _is_inside(owner, function_op):
                owner.operands[use.operand_number] = new
    for old, new in zip(outputs, task.results, strict=True):
        for use in list(old.uses):
            owner = _owner(use)
            if not _is_inside(owner, function_op):
                owner.operands[use.operand_number] = new


def _is_inside(op: ir.Operation, ancestor: ir.Operation) -> bool:
    current: ir.Operation | None = op
    while current is not None:
        if current == ancestor:
            return True
        parent = current.parent
        if parent is None:
            return False
        current = parent.operation if isinstance(parent, ir.OpView) else parent
    return False


def _owner(use: ir.OpOperand) -> ir.Operation:
    owner = use.owner
    return owner.operation if isinstance(owner, ir.OpView) else owner
