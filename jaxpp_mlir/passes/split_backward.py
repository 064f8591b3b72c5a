"""jaxpp-split-backward: split each stage's backward into input- and weight-gradient parts."""

from __future__ import annotations

from collections.abc import Collection

from jax.interpreters.mlir import ir

from jaxpp_mlir import diagnostics
from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.errors import ScheduleError
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.passes.base import (
    UNCHANGED,
    Evidence,
    ModulePass,
    Unchanged,
    find_in_stage_block,
    register_pass,
)
from jaxpp_mlir.runtime import records
from jaxpp_mlir.schedules.record import schedule_from_record

SPLIT_KINDS = (jaxpp.BACKWARD_INPUT, jaxpp.BACKWARD_WEIGHT)


@register_pass
@records.frozen
class SplitBackward(ModulePass):
    """Split each stage's backward into bwd_i (input gradient) and bwd_w (weight gradient).

    Zero-bubble schedules run the part of a backward that the previous stage
    waits for (the gradient with respect to the stage's input) as soon as
    possible, and the rest (weight gradients and their accumulation) later,
    in the bubbles. The input-gradient part is every op of the stage's
    backward that a value read by another group of ops (another stage or
    direction) depends on; the weight-gradient part is the rest, which only
    the loop state or the results of ``@main`` read. Values both parts need
    are computed once, in bwd_i, and passed to bwd_w.

    It splits only for a schedule that runs split backwards (``splits_backward``: the
    schedule jaxpp-choose-stages recorded on the module, ``jaxpp.schedule``); for any
    other schedule, or none, it leaves the module unchanged.

    Precondition: ops carry ``jaxpp.stage``/``jaxpp.kind`` (jaxpp-choose-stages),
    none is split yet and the stages are not outlined yet (it runs before
    jaxpp-outline-stages, which it checks).
    Postcondition: if the module's schedule splits backwards, no op has kind ``bwd``;
    each former backward op has kind ``bwd_i`` or ``bwd_w`` (a stage may have only one
    of the two). Otherwise the module is unchanged.
    """

    name = "jaxpp-split-backward"
    requires = ("jaxpp-normalize-loop", "jaxpp-choose-stages")
    must_precede = ("jaxpp-outline-stages",)  # it relabels ops, which outlining groups

    @classmethod
    def finished(cls, module: ir.Operation) -> Evidence | None:
        return find_in_stage_block(
            module,
            lambda op: (
                f"the backward is already split (found '{op.name}' of kind {jaxpp.get_kind(op)})"
                if jaxpp.has_stage(op) and jaxpp.get_kind(op) in SPLIT_KINDS
                else None
            ),
        )

    def check_order(self, module: ir.Operation, completed: Collection[str] = ()) -> None:
        """The order checks of ``ModulePass``, where the run splits: a run that leaves
        the module as it is (its schedule does not split backwards) is in place anywhere."""
        if _splits_backward(module):
            super().check_order(module, completed)

    def run(self, module: ir.Operation) -> Unchanged | None:
        main = ir_utils.get_main(module)
        if not _splits_backward(module):
            return UNCHANGED
        block = ir_utils.stage_block(main)
        ops = ir_utils.block_ops(block)[:-1]
        groups: dict[int, list[ir.Operation]] = {}
        for op in ops:
            if jaxpp.get_kind(op) == jaxpp.BACKWARD:
                groups.setdefault(jaxpp.get_stage(op), []).append(op)
        for stage, group in groups.items():
            for op in _input_gradient_ops(group, block):
                jaxpp.set_stage(op, stage, jaxpp.BACKWARD_INPUT)
            for op in group:
                if jaxpp.get_kind(op) == jaxpp.BACKWARD:
                    jaxpp.set_stage(op, stage, jaxpp.BACKWARD_WEIGHT)


def _splits_backward(module: ir.Operation) -> bool:
    """Whether the schedule the module records runs split backwards (a located error
    for a record that names no schedule)."""
    record = jaxpp.get_schedule(module)
    try:
        return record is not None and schedule_from_record(record).splits_backward
    except ScheduleError as error:
        raise diagnostics.error(module, f"the module's {jaxpp.SCHEDULE_ATTR}: {error}") from None


def _input_gradient_ops(group: list[ir.Operation], block: ir.Block) -> list[ir.Operation]:
    members = set(group)
    needed: set[ir.Operation] = set()
    pending = []
    for op in group:
        for result in op.results:
            for use in result.uses:
                owner = ir_utils.use_owner(use)
                if owner.block != block:
                    owner = ir_utils.top_level_user(owner, block)
                is_terminator = owner.name in ("func.return", jaxpp.YIELD_OP)
                if owner not in members and not is_terminator:
                    pending.append(op)
    while pending:
        op = pending.pop()
        if op in needed:
            continue
        needed.add(op)
        for value in ir_utils.external_operands(op):
            producer = ir_utils.defining_op(value)
            if producer is not None and producer in members:
                pending.append(producer)
    return [op for op in group if op in needed]
