"""jaxpp-outline-stages: one ``func.func`` per (stage, direction), called by jaxpp.task."""

from __future__ import annotations

from jax.interpreters.mlir import ir

from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.passes import outlining
from jaxpp_mlir.passes.base import Evidence, ModulePass, find_in_stage_block, register_pass
from jaxpp_mlir.runtime import records


@register_pass
@records.frozen
class OutlineStages(ModulePass):
    """Outline each stage's forward and backward into its own func.func, called by jaxpp.task.

    Stage markers are erased (they are identities); the name a forward marker
    gives its stage (``jaxpp.stage_name``, from ``mark_stage_end(x, name=)``)
    goes onto that stage's functions, forward and backward. The ops of each
    (stage, direction) group move, in their original order, into a private
    function ``@stage<k>_<fwd|bwd>`` whose arguments are the values the group
    reads from outside and whose results are the values other groups or the
    return of ``@main`` read. Constants and cheap ops computed from constants
    alone (iota, broadcast, reshape, convert) are copied into every group that
    needs them instead of being passed around, also those defined in ``@main``
    above the loop (JAX hoists a closed-over array such as a position table
    there, read by the loop as an invariant); each copy is located at
    ``loc("jaxpp.copied_constant"(<the original's location>))``, and an
    original no longer read is erased. Nothing else is computed twice.

    Precondition: every top-level op of the stage block (``@main``, or the body
    of its ``jaxpp.loop``) but the terminator carries ``jaxpp.stage`` and
    ``jaxpp.kind`` (jaxpp-choose-stages) and none is a ``jaxpp.task`` yet.
    Postcondition: ``@main`` holds only ``jaxpp.task`` ops (forward stages in
    ascending order, then backward stages in descending order, a topological
    order) and its return; stage functions hold no stage marker, no
    ``stablehlo.while`` with an iteration argument its body returns unchanged (it is
    read from above, its ``sdy.sharding`` entry gone), and no single-result op with an
    ``sdy.sharding`` reading a result of an op with several results: XLA's import
    would fold both and leave shardings that do not fit (``passes/xla_import.py``).
    """

    name = "jaxpp-outline-stages"
    # A reshard left would reach a stage module.
    requires = (
        "jaxpp-normalize-loop",
        "jaxpp-restore-sharding-constraints",
        "jaxpp-choose-stages",
        "jaxpp-split-layer-scans",
    )

    @classmethod
    def unfinished(cls, module: ir.Operation) -> Evidence | None:
        return find_in_stage_block(
            module,
            lambda op: (
                f"unexpected '{op.name}' among the stages"
                if not (jaxpp.is_task(op) or jaxpp.is_chunk(op) or jaxpp.is_assemble(op))
                and op.name not in ("func.return", jaxpp.YIELD_OP)
                else None
            ),
        )

    @classmethod
    def finished(cls, module: ir.Operation) -> Evidence | None:
        return find_in_stage_block(
            module,
            lambda op: (
                f"the stages are already outlined (found jaxpp.task @{jaxpp.task_callee(op)})"
                if jaxpp.is_task(op)
                else None
            ),
        )

    def run(self, module: ir.Operation) -> None:
        main = ir_utils.get_main(module)
        block = ir_utils.stage_block(main)
        block_ops = ir_utils.block_ops(block)
        num_stages = jaxpp.get_int_attr(module, jaxpp.NUM_STAGES_ATTR)  # checked by `requires`
        markers = []
        kept = []
        for op in block_ops[:-1]:
            (markers if jaxpp.is_stage_marker(op) else kept).append(op)
        names = _stage_names(markers)
        for op in markers:
            for result, operand in zip(op.results, op.operands, strict=True):
                result.replace_all_uses_with(operand)
            op.erase()
        terminator = block_ops[-1]
        outside = outlining.constants_from_outside(kept)
        copyable = outlining.copyable_ops(kept, set(terminator.operands), outside)
        members: dict[tuple[int, str], list[ir.Operation]] = {}
        # (stage, kind) by the attributes holding them: reading an attribute is cheaper
        # than converting it
        tags: dict[tuple[ir.Attribute, ir.Attribute], tuple[int, str]] = {}
        for op in kept:
            if op.name in ir_utils.CHEAP_OPS and op in copyable:
                continue
            attributes = op.attributes
            held = (attributes[jaxpp.STAGE_ATTR], attributes[jaxpp.KIND_ATTR])
            key = tags.get(held)
            if key is None:
                key = tags[held] = (jaxpp.get_stage(op), jaxpp.get_kind(op))
            members.setdefault(key, []).append(op)
        groups = [
            outlining.Group(
                members[(stage, kind)],
                insert_before=terminator,
                name=f"stage{stage}_{kind}",
                stage=stage,
                kind=kind,
            )
            for stage, kind in sorted(members, key=lambda k: task_position(k, num_stages))
        ]
        outlined = outlining.outline_groups(module, groups, copyable, [terminator])
        for group, result in zip(groups, outlined, strict=True):
            if group.stage in names:
                name = ir.StringAttr.get(names[group.stage])
                result.function.attributes[jaxpp.STAGE_NAME_ATTR] = name
        for op in reversed(copyable):
            if outlining.unused(op):
                op.erase()


def _stage_names(ops: list[ir.Operation]) -> dict[int, str]:
    """Stage -> the name its forward marker gives it (``mark_stage_end(x, name=...)``)."""
    names: dict[int, str] = {}
    for op in ops:
        if jaxpp.is_stage_marker(op) and jaxpp.marker_direction(op) == jaxpp.FORWARD:
            name = jaxpp.marker_stage_name(op)
            if name:
                names.setdefault(jaxpp.get_stage(op), name)
    return names


def task_position(key: tuple[int, str], num_stages: int) -> tuple[int, int]:
    """Where a (stage, kind) task sits in the one-microbatch topological order."""
    stage, kind = key
    if kind == jaxpp.FORWARD:
        return stage, 0
    return 2 * num_stages - 1 - stage, 1 if kind == jaxpp.BACKWARD_WEIGHT else 0
