"""jaxpp-assign-stages: give every op of @main a stage and a direction."""

from __future__ import annotations

import dataclasses

from jax.extend.mlir import ir

from jaxpp_mlir import diagnostics
from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.passes.base import (
    Evidence,
    ModulePass,
    find_in_stage_block,
    find_main,
    register_pass,
)

_TERMINATORS = ("func.return", jaxpp.YIELD_OP)


@register_pass
@dataclasses.dataclass(frozen=True)
class AssignStages(ModulePass):
    """Assign every op of @main to a stage and a direction (fwd/bwd) from the markers.

    Forward stage markers (direction fwd) end a stage: a value
    computed from the output of the k-th marker on its path belongs to stage k
    (the ops after the last marker, typically the loss and its gradient seed,
    join the last stage). The number of stages is the longest chain of forward
    markers, or of backward markers where that is longer (``jax.grad`` of a
    model whose last stage's output only feeds the loss keeps the backward
    marker but not the forward one). Backward markers, the transposes autodiff places,
    open the backward of a stage: a value downstream of c backward markers
    belongs to the backward of stage N - c. Ops that depend on no marker at all
    (casts of parameters, for instance) are placed with their earliest user, so
    they are not computed on one rank and sent to another.

    With a microbatch loop (``jaxpp.loop``, from jaxpp-normalize-loop) this
    applies to the ops of the loop body, which is one microbatch's work; the
    code before and after the loop is placed later (jaxpp-outline-outer-code).

    Precondition: ``@main`` holds no ``func.call`` (run jaxpp-inline-calls) and
    at least one stage marker, every marker at the top level of the stage
    block (the loop body if there is a loop, else ``@main``).
    Postcondition: every op of the stage block but its terminator carries
    ``jaxpp.stage`` and ``jaxpp.kind``; the module carries ``jaxpp.num_stages``.
    Ordering tasks by (forward stages ascending, then backward stages
    descending) is a topological order of the assignment.
    """

    name = "jaxpp-assign-stages"
    requires = ("jaxpp-normalize-loop", "jaxpp-inline-calls")

    @classmethod
    def finished(cls, module: ir.Operation) -> Evidence | None:
        if jaxpp.NUM_STAGES_ATTR not in module.attributes:
            return None
        return Evidence(module, f"the stages are already assigned (found {jaxpp.NUM_STAGES_ATTR})")

    @classmethod
    def unfinished(cls, module: ir.Operation) -> Evidence | None:
        found = find_in_stage_block(
            module,
            lambda op: (
                f"'{op.name}' has no stage assignment"
                if not jaxpp.has_stage(op) and op.name not in _TERMINATORS
                else None
            ),
        )
        if found is not None or find_main(module) is None:
            return found
        if jaxpp.NUM_STAGES_ATTR not in module.attributes:
            return Evidence(module, f"module has no {jaxpp.NUM_STAGES_ATTR} attribute")
        return None

    def run(self, module: ir.Operation) -> None:
        main = ir_utils.get_main(module)
        block = ir_utils.stage_block(main)
        _check_marker_placement(main, block, in_loop=ir_utils.find_loop(main) is not None)
        top_ops = [op.operation for op in block.operations][:-1]
        markers = [op for op in top_ops if jaxpp.is_stage_marker(op)]
        if not markers:
            raise diagnostics.error(
                main,
                "no stage markers found: mark the end of every stage with "
                "jaxpp_mlir.pipeline_enter_stage (the last one after the last layer)",
            )
        forward_stage, backward_count, anchored, producers = _propagate(top_ops)
        # Stage k's forward marker ends stage k; the backward markers on a path count the
        # stages from the last. Under jax.grad (no loss value returned) JAX drops the last
        # forward marker when nothing the backward needs depends on it: one more backward
        # marker than forward markers on a path is that, more is an error.
        forward_stages = max(
            (1 + forward_stage[op] for op in markers if _is_forward(op)), default=0
        )
        backward_stages = 0
        for op in markers:
            if _is_forward(op):
                continue
            backward_stages = max(backward_stages, 1 + backward_count[op])
            if 1 + backward_count[op] > forward_stages + 1:
                raise diagnostics.error(
                    op,
                    f"this is backward marker {1 + backward_count[op]} on its path, but the "
                    f"forward markers make {forward_stages} stage(s): more transposed markers "
                    "than markers",
                )
        num_stages = max(forward_stages, backward_stages)
        positions = {}
        for op in top_ops:
            count = backward_count[op]
            if count > 0:
                positions[op] = num_stages - 1 + count
            elif jaxpp.is_stage_marker(op) and not _is_forward(op):
                positions[op] = num_stages - 1  # the gradient seed enters the last stage
            elif anchored[op]:
                positions[op] = min(forward_stage[op], num_stages - 1)
        _place_unanchored(top_ops, producers, positions)
        for op in top_ops:
            position = positions[op]
            if position < num_stages:
                jaxpp.set_stage(op, position, jaxpp.FORWARD)
            else:
                jaxpp.set_stage(op, 2 * num_stages - 1 - position, jaxpp.BACKWARD)
        jaxpp.set_int_attr(module, jaxpp.NUM_STAGES_ATTR, num_stages)


def _is_forward(marker: ir.Operation) -> bool:
    return jaxpp.marker_direction(marker) == jaxpp.FORWARD


def _check_marker_placement(main: ir.Operation, block: ir.Block, *, in_loop: bool) -> None:
    for op in ir_utils.walk(main):
        if jaxpp.is_stage_marker(op) and op.block != block:
            parent = ir_utils.parent_op(op)
            if in_loop and parent == main:
                raise diagnostics.error(
                    op,
                    "stage marker outside the microbatch loop: with treduce, every stage "
                    "marker must be inside the function treduce applies to each microbatch",
                )
            if in_loop and not _is_forward(op):
                raise diagnostics.error(
                    op,
                    "a backward stage marker inside a loop: jax.grad of a function that "
                    "calls treduce is not supported; take the gradient inside treduce, as "
                    "in treduce(lambda mb: jax.value_and_grad(loss)(params, mb), batch)",
                )
            where = "the function treduce applies to each microbatch" if in_loop else "the step"
            hint = (
                "unroll the loop over layers (a lax.scan or fori_loop cannot hold markers)"
                if parent.name == "stablehlo.while"
                else "move the markers out of the conditional"
            )
            if not in_loop:
                hint += "; for the microbatch loop use jaxpp_mlir.treduce"
            raise diagnostics.error(
                op,
                f"stage marker inside '{parent.name}' is not supported: stage boundaries "
                f"must sit at the top level of {where}: {hint}",
            )


def _propagate(
    top_ops: list[ir.Operation],
) -> tuple[
    dict[ir.Operation, int],
    dict[ir.Operation, int],
    dict[ir.Operation, bool],
    dict[ir.Operation, list[ir.Operation]],
]:
    """Forward stage, backward-marker count and anchoring of every op, in program order,
    and the ops of ``top_ops`` each op reads from (its producers).

    For a marker, the forward stage is the stage it ends (that of its inputs);
    its results start the next stage, which the info of its results accounts for.
    """
    forward_stage: dict[ir.Operation, int] = {}
    backward_count: dict[ir.Operation, int] = {}
    anchored: dict[ir.Operation, bool] = {}
    producers: dict[ir.Operation, list[ir.Operation]] = {}
    # Per value defined by an op of the block: (its op, forward stage, count, anchored).
    # Looked up by value: asking a value for its defining op costs far more.
    result_info: dict[ir.Value, tuple[ir.Operation, int, int, bool]] = {}
    outside = (None, 0, 0, False)
    for op in top_ops:
        infos = [result_info.get(v, outside) for v in ir_utils.external_operands(op)]
        producers[op] = [i[0] for i in infos if i[0] is not None]
        stage = max((i[1] for i in infos), default=0)
        count = max((i[2] for i in infos), default=0)
        direction = jaxpp.marker_direction(op) if jaxpp.is_stage_marker(op) else None
        forward_stage[op] = stage
        backward_count[op] = count
        anchored[op] = any(i[3] for i in infos) or direction is not None
        if direction == jaxpp.FORWARD and count > 0:
            raise diagnostics.error(
                op,
                "a forward stage marker depends on a backward (gradient) value: "
                "higher-order gradients through stage markers are not supported",
            )
        if direction == jaxpp.FORWARD:
            info = (op, stage + 1, count, True)
        elif direction is not None:
            info = (op, stage, count + 1, True)
        else:
            info = (op, stage, count, anchored[op])
        for result in op.results:
            result_info[result] = info
    return forward_stage, backward_count, anchored, producers


def _place_unanchored(
    top_ops: list[ir.Operation],
    producers: dict[ir.Operation, list[ir.Operation]],
    positions: dict[ir.Operation, int],
) -> None:
    """Places ops that depend on no marker with their earliest user (stage 0 if none)."""
    # Users come after their producers: in reverse order every user of an op is placed
    # before the op, and has handed its position to its producers.
    earliest_user: dict[ir.Operation, int] = {}
    for op in reversed(top_ops):
        if op not in positions:
            positions[op] = earliest_user.get(op, 0)
        position = positions[op]
        for producer in producers[op]:
            known = earliest_user.get(producer)
            if known is None or position < known:
                earliest_user[producer] = position
