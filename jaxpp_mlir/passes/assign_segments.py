"""jaxpp-assign-segments: give every op of @main a segment and a direction, from the markers."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from jax.interpreters.mlir import ir

from jaxpp_mlir import diagnostics
from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.passes import segment_slot
from jaxpp_mlir.passes.base import Evidence, register_pass
from jaxpp_mlir.passes.marker_flow import MarkerFlow
from jaxpp_mlir.passes.segment_positions import place_unanchored, segments_left, set_segments
from jaxpp_mlir.runtime import records

if TYPE_CHECKING:
    from jaxpp_mlir.partition_options import PartitionOptions


@register_pass
@records.frozen
class AssignSegments(segment_slot.Segmenter):
    """Assign every op of @main to a segment and a direction (fwd/bwd) from the markers.

    The segmenter of markers, in the segment slot of the pipeline (``passes/pipelines.py``,
    ``passes/segment_slot.py``), after which jaxpp-choose-stages makes stages of the
    segments. It applies to a step with a stage marker anywhere but in the body of a
    top-level ``stablehlo.while`` of the stage block (those are jaxpp-segment-layer-scans').

    Each forward stage marker (direction fwd) ends its own segment, in program order
    (NVIDIA JaxPP's rule): the k-th forward marker ends segment k, also where markers do
    not depend on each other (the towers of a two-tower model end two segments, which
    can run on two ranks at once). An op runs in the earliest segment its inputs allow:
    after the segment of every marker upstream of it, so an op reading the k-th
    marker's output is in segment k + 1 or later; an op a marker reads is in that
    marker's segment or earlier. The ops after the last marker, typically the loss and
    its gradient seed, join the last segment. Backward markers, the transposes autodiff
    places (in reverse program order), open the backward of their forward marker's
    segment: an op downstream of backward markers belongs to the backward of the
    lowest segment among theirs. A backward marker is paired with its forward marker by
    their places in the marker chains (the c-th backward marker on a path with the
    forward markers that end the (N - c)-th step of the chains), and among forward
    markers that do not depend on each other by the forward code the gradient code
    after it reads (the derivative of a tanh reads the tanh), then by operand types and
    reverse program order (so a frozen branch, whose marker has no transpose, takes no
    other branch's backward). ``jax.grad`` of a model whose last segment's output only
    feeds the loss keeps the last backward marker but not its forward one: that
    backward marker opens a last segment of its own. Ops that depend on no marker at
    all (casts of parameters, for instance) are placed with their earliest user, so
    they are not computed on one rank and sent to another.

    ``merge-parallel`` keeps the rule of earlier releases: a value computed from the
    output of the k-th marker on its longest path belongs to segment k, so markers that
    do not depend on each other end one segment; the number of segments is the longest
    chain of forward markers (or of backward markers where that is longer), and a value
    downstream of c backward markers belongs to the backward of segment N - c. For a
    chain of markers (no marker independent of another) both rules give the same
    segments.

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
    merge_parallel: bool = dataclasses.field(
        default=False,
        metadata={
            "help": "markers that do not depend on each other end one segment (default: "
            "each marker ends its own, in program order, as in JaxPP)"
        },
    )
    requires = ("jaxpp-normalize-loop", "jaxpp-inline-calls")

    @classmethod
    def unfinished(cls, module: ir.Operation) -> Evidence | None:
        return segments_left(module)

    @classmethod
    def for_partition(cls, options: PartitionOptions, **chain: bool) -> AssignSegments:
        return cls(merge_parallel=options.merge_parallel_markers, **chain)

    def applies(self, module: ir.Operation) -> bool:
        main = ir_utils.find_main(module)
        if main is None:
            return True  # its error names what is missing
        return bool(segment_slot.markers_outside_loops(main))

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
        if self.merge_parallel:
            num_segments, positions = _chain_positions(flow, max(forward_stages, backward_stages))
        else:
            num_segments, positions = _marker_positions(
                flow, markers, max(forward_stages, backward_stages)
            )
        place_unanchored(flow.producers, positions)
        set_segments(top_ops, positions, num_segments)
        jaxpp.set_int_attr(module, jaxpp.NUM_SEGMENTS_ATTR, num_segments)


def _chain_positions(flow: MarkerFlow, num_segments: int) -> tuple[int, list[int | None]]:
    """``merge-parallel``: positions from the marker counts on each op's longest path
    (forward segments, then the backward segments from the last; None: no marker
    upstream)."""
    positions: list[int | None] = []
    for count, stage, anchored, direction in zip(
        flow.backward, flow.forward, flow.anchored, flow.direction, strict=True
    ):
        if count > 0:
            positions.append(num_segments - 1 + count)
        elif direction is not None and direction != jaxpp.FORWARD:
            positions.append(num_segments - 1)  # the gradient seed enters the last segment
        elif anchored:
            positions.append(min(stage, num_segments - 1))
        else:
            positions.append(None)
    return num_segments, positions


def _marker_positions(
    flow: MarkerFlow, markers: list[int], chain_length: int
) -> tuple[int, list[int | None]]:
    """One segment per forward marker, in program order (the class doc): the segment
    count and each op's position (forward segments, then the backward segments from the
    last; None: no marker upstream)."""
    forward = [i for i in markers if flow.direction[i] == jaxpp.FORWARD]
    segment_of = {marker: k for k, marker in enumerate(forward)}
    opens = _pair_backward_markers(flow, markers, forward, segment_of, chain_length)
    num_segments = max([len(forward), *(segment + 1 for segment in opens.values())])
    last = num_segments - 1
    # Per op: the earliest forward segment its inputs allow, and (for gradient code) the
    # lowest segment whose backward a backward marker upstream of it opened.
    earliest: list[int | None] = []
    lowest_open: list[int | None] = []
    positions: list[int | None] = []
    for index, producers in enumerate(flow.producers):
        after = None
        opened = None
        for producer in producers:
            if producer in opens:
                candidate = opens[producer]
            else:
                candidate = lowest_open[producer]
            if candidate is not None and (opened is None or candidate < opened):
                opened = candidate
            bound = segment_of[producer] + 1 if producer in segment_of else earliest[producer]
            if bound is not None and (after is None or bound > after):
                after = bound
        if index in segment_of:
            after = segment_of[index]
        earliest.append(after)
        lowest_open.append(opened)
        if opened is not None:
            positions.append(2 * num_segments - 1 - opened)
        elif index in opens:
            positions.append(last)  # the first backward marker: the gradient seed's segment
        elif after is not None:
            positions.append(min(after, last))
        else:
            positions.append(None)
    return num_segments, positions


def _pair_backward_markers(
    flow: MarkerFlow,
    markers: list[int],
    forward: list[int],
    segment_of: dict[int, int],
    chain_length: int,
) -> dict[int, int]:
    """Backward marker -> the segment of the forward marker it is the transpose of.

    The c-th backward marker on its longest path transposes a forward marker that ends
    step ``chain_length - 1 - c`` of the forward chains. Among several such forward
    markers (independent ones), it is the one whose own forward code the gradient code
    after the backward marker reads most (the derivative of a tanh reads the tanh);
    then one that returns the types the transpose takes, the latest in program order
    first (autodiff places transposes in reverse program order). A backward marker with
    no forward marker at its step (``jax.grad`` dropped the last forward marker) opens a
    segment after the forward ones.
    """
    by_step: dict[int, list[int]] = {}
    for marker in forward:
        by_step.setdefault(flow.forward[marker], []).append(marker)
    own_code = _OwnCode(flow)
    opens: dict[int, int] = {}
    for marker in markers:
        if flow.direction[marker] == jaxpp.FORWARD:
            continue
        candidates = by_step.get(chain_length - 1 - flow.backward[marker])
        if not candidates:
            opens[marker] = len(forward)
            continue
        if len(candidates) == 1:
            opens[marker] = segment_of[candidates[0]]
            continue
        types = [value.type for value in flow.ops[marker].operands]
        reads = own_code.read_after(marker)
        ranked = max(
            range(len(candidates)),
            key=lambda k: (
                len(reads & own_code.of(candidates[k], candidates)),
                [result.type for result in flow.ops[candidates[k]].results] == types,
                k,
            ),
        )
        match = candidates.pop(ranked)
        opens[marker] = segment_of[match]
    return opens


class _OwnCode:
    """The forward code of independent markers, and what gradient code reads of it."""

    def __init__(self, flow: MarkerFlow):
        self.flow = flow
        self._cones: dict[int, set[int]] = {}
        self._consumers: list[list[int]] | None = None

    def of(self, marker: int, group: list[int]) -> set[int]:
        """The ops ``marker`` reads (through no other marker) that no other marker of
        ``group`` reads."""
        others = set().union(*(self._cone(m) for m in group if m != marker))
        return self._cone(marker) - others

    def read_after(self, backward_marker: int) -> set[int]:
        """The forward ops (and what they are computed from, up to the markers) that the
        gradient code after ``backward_marker`` reads, up to the next stage markers."""
        flow = self.flow
        if self._consumers is None:
            self._consumers = [[] for _ in flow.ops]
            for index, producers in enumerate(flow.producers):
                for producer in producers:
                    self._consumers[producer].append(index)
        forward_reads: set[int] = set()
        pending, seen = list(self._consumers[backward_marker]), set()
        while pending:
            index = pending.pop()
            if index in seen or flow.direction[index] is not None:
                continue
            seen.add(index)
            for producer in flow.producers[index]:
                if flow.backward[producer] == 0 and flow.direction[producer] is None:
                    forward_reads.add(producer)
            pending.extend(self._consumers[index])
        return self._upstream(forward_reads)

    def _cone(self, marker: int) -> set[int]:
        if marker not in self._cones:
            self._cones[marker] = self._upstream(set(self.flow.producers[marker]))
        return self._cones[marker]

    def _upstream(self, start: set[int]) -> set[int]:
        """``start`` and the ops it is computed from, not crossing a stage marker."""
        flow = self.flow
        found: set[int] = set()
        pending = [i for i in start if flow.direction[i] is None]
        while pending:
            index = pending.pop()
            if index in found:
                continue
            found.add(index)
            pending.extend(p for p in flow.producers[index] if flow.direction[p] is None)
        return found


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
