"""Outlining groups of ops into private functions, each called by one jaxpp.task.

Shared by the passes that outline (stages inside the loop, code outside it);
it is a helper, not a pass.
"""

from __future__ import annotations

from jax.interpreters.mlir import ir

from jaxpp_mlir._jax_compat import func
from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.dialect.vocabulary import KIND_ATTR, RANK_ATTR, STAGE_ATTR
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.passes import shardings, xla_import
from jaxpp_mlir.runtime import records


def copyable_ops(
    top_ops: list[ir.Operation],
    keep: set[ir.Value],
    outside: dict[ir.Operation, None] | None = None,
) -> dict[ir.Operation, None]:
    """Cheap ops computed from constants alone, whose results are not in ``keep``: the
    ops of ``outside`` (``constants_from_outside``) first, then those of ``top_ops``, in
    their order.

    They are copied into every function that needs them rather than passed
    between functions.
    """
    copyable: dict[ir.Operation, None] = dict(outside or {})
    copyable_results: set[ir.Value] = {result for op in copyable for result in op.results}
    for op in top_ops:
        if op.name not in ir_utils.CHEAP_OPS or len(op.regions):  # is_pure_constant_like
            continue
        results = list(op.results)
        if keep.isdisjoint(results) and copyable_results.issuperset(op.operands):
            copyable[op] = None
            copyable_results.update(results)
    return copyable


def constants_from_outside(top_ops: list[ir.Operation]) -> dict[ir.Operation, None]:
    """The cheap ops computed from constants alone, defined outside the block of
    ``top_ops`` (the ops of one block), whose results ``top_ops`` read: a constant of
    ``@main`` read inside the loop (JAX passes a closed-over array, such as a position
    table, into the loop as an invariant). Operands come before their readers.
    """
    block = top_ops[0].block if top_ops else None
    found: dict[ir.Operation, None] = {}
    rejected: set[ir.Operation] = set()

    def constant_chain(op: ir.Operation) -> bool:
        if op in found:
            return True
        if op in rejected or op.name not in ir_utils.CHEAP_OPS or len(op.regions):
            rejected.add(op)
            return False
        for operand in op.operands:
            producer = ir_utils.defining_op(operand)
            if producer is None or not constant_chain(producer):
                rejected.add(op)
                return False
        found[op] = None
        return True

    for op in top_ops:
        for value in ir_utils.external_operands(op):
            producer = ir_utils.defining_op(value)
            if producer is not None and producer.block != block:
                constant_chain(producer)
    return found


@records.frozen
class Group:
    """Ops of one block, in block order, to move into ``@name``, called by a task
    (with ``stage`` and ``kind``) inserted before ``insert_before``."""

    ops: list[ir.Operation]
    insert_before: ir.Operation
    name: str
    stage: int
    kind: str


@records.frozen
class Outlined:
    task: ir.Operation
    function: ir.Operation


def outline_groups(
    module: ir.Operation,
    groups: list[Group],
    copyable: dict[ir.Operation, None],
    other_ops: list[ir.Operation],
) -> list[Outlined]:
    """Moves each of ``groups`` in turn into its function; returns the tasks and functions.

    ``groups``, ``copyable`` (from ``copyable_ops``) and ``other_ops`` (the
    terminator among them) are the ops of one block. A function's arguments
    are the values its group reads from outside (copyable producers are cloned
    in instead); its results are the group's values read outside it, which the
    task's results replace there. Each function is then made fit for XLA's import
    (``xla_import.prepare``).
    """
    analysis = _Analysis(groups, copyable, other_ops)
    mesh = shardings.mesh_name(module)
    function_ip = ir.InsertionPoint(module.regions[0].blocks[0])
    current: dict[ir.Value, ir.Value] = {}  # an outlined group's result -> its task's result
    outlined: list[Outlined] = []
    for index, group in enumerate(groups):
        inputs, needed_copies = analysis.inputs_and_copies(index)
        outputs = analysis.outputs(index)
        location = group.ops[0].location
        with function_ip, location:
            function = func.FuncOp(
                group.name,
                ([v.type for v in inputs], [v.type for v in outputs]),
                visibility="private",
            )
        entry = function.add_entry_block()
        task_inputs = [current.get(v, v) for v in inputs]
        with ir.InsertionPoint(group.insert_before), location:
            task = jaxpp.create_task(
                group.name,
                task_inputs,
                [v.type for v in outputs],
                stage=group.stage,
                kind=group.kind,
            )
        if mesh is not None:
            input_shardings = shardings.shardings_or_replicated(module, task_inputs)
            output_shardings = shardings.shardings_or_replicated(module, outputs)
            shardings.set_function_shardings(function.operation, input_shardings, output_shardings)
            shardings.set_result_shardings(task, output_shardings)
        with ir.InsertionPoint(entry):
            replacements = _clone_copies(needed_copies)
            with group.ops[-1].location:
                ret = func.ReturnOp(outputs)
        for op in group.ops:
            op.move_before(ret.operation)
            _clear_tags(op)
        replacements.update(zip(inputs, entry.arguments, strict=True))
        for op, operands in analysis.operands[index]:
            for position, value in enumerate(operands):
                new = replacements.get(value)
                if new is not None:
                    op.operands[position] = new
        for position, value in enumerate(inputs):  # a later group's result: rewired then
            if value in analysis.producer_group and value not in current:
                analysis.outside_reads.setdefault(value, []).append((task, position))
        for old, new in zip(outputs, task.results, strict=True):
            current[old] = new
            for op, position in analysis.outside_reads.get(old, ()):
                op.operands[position] = new
        outlined.append(Outlined(task, function.operation))
    for result in outlined:  # rebuilds loops: the analysis above holds their old values
        xla_import.prepare(result.function)
    return outlined


class _Analysis:
    """Who reads what among the ops of the block, read once before anything moves.

    Values are those of the block before outlining: a group's operand that an earlier
    group computes stands for that group's task result.
    """

    def __init__(
        self,
        groups: list[Group],
        copyable: dict[ir.Operation, None],
        other_ops: list[ir.Operation],
    ):
        self.producer_group: dict[ir.Value, int] = {}
        self.group_results: list[list[list[ir.Value]]] = []
        for index, group in enumerate(groups):
            group_results = [list(op.results) for op in group.ops]
            for results in group_results:
                for result in results:
                    self.producer_group[result] = index
            self.group_results.append(group_results)
        self.copy_source = {result: op for op in copyable for result in op.results}
        # What each group reads from outside (in order, maybe twice) and the operands
        # of its ops (nested ones included); where other ops read a group's results.
        self.reads: list[list[ir.Value]] = []
        self.operands: list[list[tuple[ir.Operation, list[ir.Value]]]] = []
        self.outside_reads: dict[ir.Value, list[tuple[ir.Operation, int]]] = {}
        self.escaping: set[ir.Value] = set()
        producer_group = self.producer_group
        for index, group in enumerate(groups):
            reads: list[ir.Value] = []
            operands: list[tuple[ir.Operation, list[ir.Value]]] = []
            for op in group.ops:
                external = _read_operands(op, operands)
                for value in external:
                    if producer_group.get(value, index) != index:
                        self.escaping.add(value)
                reads.extend(external)
            self.reads.append(reads)
            self.operands.append(operands)
        for op in other_ops:
            users = [op, *ir_utils.walk(op)] if len(op.regions) else [op]
            for user in users:
                # A value defined inside ``op`` is no group's result: no need to tell
                # the values read from outside ``op`` apart.
                for position, value in enumerate(user.operands):
                    if value in producer_group:
                        self.escaping.add(value)
                        self.outside_reads.setdefault(value, []).append((user, position))

    def inputs_and_copies(self, index: int) -> tuple[list[ir.Value], list[ir.Operation]]:
        """The values group ``index`` reads from outside, and the copyable producers to
        clone in (operands first)."""
        needed_copies: dict[ir.Operation, None] = {}
        inputs: dict[ir.Value, None] = {}

        def visit(value: ir.Value) -> None:
            if self.producer_group.get(value) == index:
                return
            producer = self.copy_source.get(value)
            if producer is None:
                inputs[value] = None
            elif producer not in needed_copies:
                for operand in producer.operands:
                    visit(operand)
                needed_copies[producer] = None

        for value in self.reads[index]:
            visit(value)
        return list(inputs), list(needed_copies)

    def outputs(self, index: int) -> list[ir.Value]:
        """The results of group ``index`` read outside it."""
        escaping = self.escaping
        return [
            result
            for results in self.group_results[index]
            for result in results
            if result in escaping
        ]


def _read_operands(
    op: ir.Operation, operands: list[tuple[ir.Operation, list[ir.Value]]]
) -> list[ir.Value]:
    """The values ``op`` and the ops nested in it read from outside ``op``, in order
    (maybe twice); appends each of those ops with its operands to ``operands``."""
    own = list(op.operands)
    operands.append((op, own))
    if not len(op.regions):
        return own
    inside: set[ir.Value] = set()
    external = list(own)
    for region in op.regions:
        for block in region.blocks:
            inside.update(block.arguments)
    for nested in ir_utils.walk(op):
        nested_operands = list(nested.operands)
        operands.append((nested, nested_operands))
        external.extend(nested_operands)
        inside.update(nested.results)
        for region in nested.regions:
            for block in region.blocks:
                inside.update(block.arguments)
    return [value for value in external if value not in inside]


#: The name wrapped around the location of a copied constant (``loc("jaxpp.copied_constant"(
#: <the original's location>))``): in a dump, the copies of one constant in each function
#: that reads it.
COPIED_CONSTANT_LOC = "jaxpp.copied_constant"


def _clone_copies(needed_copies: list[ir.Operation]) -> dict[ir.Value, ir.Value]:
    """Clones ``needed_copies`` (ops without regions) at the insertion point, wired to each
    other, each located at ``COPIED_CONSTANT_LOC`` around its original's location."""
    copies: dict[ir.Value, ir.Value] = {}
    for original in needed_copies:
        attributes = original.attributes
        clone = ir.Operation.create(
            original.name,
            results=[result.type for result in original.results],
            operands=[copies.get(operand, operand) for operand in original.operands],
            attributes={
                attributes[index].name: attributes[index].attr
                for index in range(len(attributes))
                if attributes[index].name not in _TAGS
            },
            loc=_copy_location(original.location),
        )
        copies.update(zip(original.results, clone.results, strict=True))
    return copies


def _copy_location(location: ir.Location) -> ir.Location:
    """``location`` named as a copy (once: a copy of a copy keeps one name)."""
    typed = ir.Location.from_attr(location.attr, location.context)
    if isinstance(typed, ir.NameLoc) and typed.name_str == COPIED_CONSTANT_LOC:
        return location
    return ir.Location.name(COPIED_CONSTANT_LOC, childLoc=location, context=location.context)


def unused(op: ir.Operation) -> bool:
    """Whether nothing reads the results of ``op``."""
    return all(next(iter(result.uses), None) is None for result in op.results)


_TAGS = (STAGE_ATTR, KIND_ATTR, RANK_ATTR)


def _clear_tags(op: ir.Operation) -> None:
    """``jaxpp.clear_stage``, reading the attributes once."""
    attributes = op.attributes
    for name in _TAGS:
        if name in attributes:
            del attributes[name]
