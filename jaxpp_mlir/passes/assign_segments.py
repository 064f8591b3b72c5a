"""jaxpp-assign-segments: give every op of @main a segment and a direction, from the markers."""

from __future__ import annotations

import dataclasses

from jax.interpreters.mlir import ir

from jaxpp_mlir import diagnostics
from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.passes import segment_slot
from jaxpp_mlir.passes.base import Evidence, register_pass
from jaxpp_mlir.passes.marker_flow import MarkerFlow
from jaxpp_mlir.passes.segment_positions import place_unanchored, segments_left, set_segments


@register_pass
@dataclasses.dataclass(frozen=True)
class AssignSegments(segment_slot.Segmenter):
    """Assign every op of @main to a segment and a direction (fwd/bwd) from the markers.

    The segmenter of markers, in the segment slot of the pipeline (``passes/pipelines.py``,
    ``passes/segment_slot.py``), after which jaxpp-choose-stages makes stages of the
    segments. It applies to a step with a stage marker anywhere but in the body of a
    top-level ``stablehlo.while`` of the stage block (those are jaxpp-segment-layer-scans').
    Forward stage markers (direction fwd) end a segment: a value
    computed from the output of the k-th marker on its path belongs to segment k
    (the ops after the last marker, typically the loss and its gradient seed,
    join the last segment). The number of segments is the longest chain of forward
    markers, or of backward markers where that is longer (``jax.grad`` of a
    model whose last segment's output only feeds the loss keeps the backward
    marker but not the forward one). Backward markers, the transposes autodiff places,
    open the backward of a segment: a value downstream of c backward markers
    belongs to the backward of segment N - c. Ops that depend on no marker at all
    (casts of parameters, for instance) are placed with their earliest user, so
    they are not computed on one rank and sent to another.

    With a microbatch loop (``jaxpp.loop``, from jaxpp-normalize-loop) this
    applies to the ops of the loop body, which is one microbatch's work; the
    code before and after the loop is placed later (jaxpp-outline-outer-code).

    Precondition: ``@main`` holds no ``func.call`` (run jaxpp-inline-calls) and
    at least one stage marker, every marker at the top level of the stage
    block (the loop body if there is a loop, else ``@main``).
    Options: ``chained`` and ``optional`` (the segment slot's chain: ``segment_slot``).
    Postcondition: every op of the stage block but its terminator carries
    ``jaxpp.segment`` and ``jaxpp.kind``; the module carries ``jaxpp.num_segments``.
    Ordering groups by (forward segments ascending, then backward segments
    descending) is a topological order of the assignment.
    """

    name = "jaxpp-assign-segments"
    requires = ("jaxpp-normalize-loop", "jaxpp-inline-calls")

    @classmethod
    def unfinished(cls, module: ir.Operation) -> Evidence | None:
        return segments_left(module)

    def applies(self, module: ir.Operation) -> bool:
        main = ir_utils.find_main(module)
        if main is None:
            return True  # its error names what is missing
        block = ir_utils.stage_block(main)
        for marker in segment_slot.stage_markers(main):
            owner = segment_slot.owner_in(marker, block)
            if owner is None or owner == marker or owner.name != "stablehlo.while":
                return True
        return False

    def segment(self, module: ir.Operation) -> None:
        main = ir_utils.get_main(module)
        loop = ir_utils.find_loop(main)
        block = jaxpp.loop_body(loop) if loop is not None else ir_utils.body(main)
        _check_marker_placement(main, block, in_loop=loop is not None)
        top_ops = ir_utils.block_ops(block)[:-1]
        flow = MarkerFlow(top_ops)
        for index, direction in enumerate(flow.direction):
            if direction == jaxpp.FORWARD and flow.backward[index] > 0:
                raise diagnostics.error(
                    top_ops[index],
                    "a forward stage marker depends on a backward (gradient) value: "
                    "higher-order gradients through stage markers are not supported",
                )
        markers = [i for i, direction in enumerate(flow.direction) if direction is not None]
        if not markers:
            raise segment_slot.nothing_to_segment(main)
        forward_stage, backward_count = flow.forward, flow.backward
        # Stage k's forward marker ends stage k; the backward markers on a path count the
        # stages from the last. Under jax.grad (no loss value returned) JAX drops the last
        # forward marker when nothing the backward needs depends on it: one more backward
        # marker than forward markers on a path is that, more is an error.
        forward_stages = max(
            (1 + forward_stage[i] for i in markers if flow.direction[i] == jaxpp.FORWARD),
            default=0,
        )
        backward_stages = 0
        for i in markers:
            if flow.direction[i] == jaxpp.FORWARD:
                continue
            backward_stages = max(backward_stages, 1 + backward_count[i])
            if 1 + backward_count[i] > forward_stages + 1:
                raise diagnostics.error(
                    top_ops[i],
                    f"this is backward marker {1 + backward_count[i]} on its path, but the "
                    f"forward markers make {forward_stages} stage(s): more transposed markers "
                    "than markers",
                )
        num_segments = max(forward_stages, backward_stages)
        positions: list[int | None] = []
        for count, stage, anchored, direction in zip(
            backward_count, forward_stage, flow.anchored, flow.direction, strict=True
        ):
            if count > 0:
                positions.append(num_segments - 1 + count)
            elif direction is not None and direction != jaxpp.FORWARD:
                positions.append(num_segments - 1)  # the gradient seed enters the last segment
            elif anchored:
                positions.append(min(stage, num_segments - 1))
            else:
                positions.append(None)
        place_unanchored(flow.producers, positions)
        set_segments(top_ops, positions, num_segments)
        jaxpp.set_int_attr(module, jaxpp.NUM_SEGMENTS_ATTR, num_segments)


def _is_forward(marker: ir.Operation) -> bool:
    return jaxpp.marker_direction(marker) == jaxpp.FORWARD


def _check_marker_placement(main: ir.Operation, block: ir.Block, *, in_loop: bool) -> None:
    for op in ir_utils.walk(main):
        if op.name in jaxpp.MARKER_OP_NAMES and jaxpp.is_stage_marker(op) and op.block != block:
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
            what, hint = _NESTING.get(parent.name, ("", "move the markers out of it"))
            if not in_loop:
                hint += "; for the microbatch loop use jaxpp_mlir.treduce"
            raise diagnostics.error(
                op,
                f"stage marker inside '{parent.name}'{what} is not supported: stage "
                f"boundaries must sit at the top level of {where}: {hint}",
            )


#: What holds a marker it cannot hold, in the user's words, and what to do instead.
_NESTING = {
    "stablehlo.while": (
        "",
        "markers inside a layer scan are read by jaxpp-segment-layer-scans, which "
        "partition runs when every marker ends a layer scan's body (each scanned layer "
        "then ends a segment): drop the markers outside the scan, or unroll the loop "
        "over layers",
    ),
    "stablehlo.case": ("", "move the markers out of the conditional"),
    "stablehlo.if": ("", "move the markers out of the conditional"),
    "sdy.manual_computation": (
        " (a shard_map body)",
        "a shard_map body runs per device shard, inside one stage; mark its results "
        "outside it (pipeline_enter_stage(shard_map(f, ...)(x)))",
    ),
}
