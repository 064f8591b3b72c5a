"""jaxpp-segment-layer-scans: each iteration of a loop over stacked layers is a segment."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from jax.interpreters.mlir import ir

from jaxpp_mlir import diagnostics
from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.passes import name_stacks, segment_slot
from jaxpp_mlir.passes.base import Evidence, register_pass
from jaxpp_mlir.passes.segment_positions import place_unanchored, segments_left
from jaxpp_mlir.runtime import records

if TYPE_CHECKING:  # loaded when a step is read for layer scans, not for a marked step
    from jaxpp_mlir.passes import layer_loops


@register_pass
@records.frozen
class SegmentLayerScans(segment_slot.Segmenter):
    """Make every iteration of a layer scan a segment, and tag its loops with their range.

    The segmenter of layer scans, in the segment slot (``passes/segment_slot.py``).
    A layer scan is a top-level ``stablehlo.while`` of the stage block that
    ``layer_loops.analyze`` reads as a loop of layers: a counter from a constant to a
    constant (2 or more iterations), stacked operands read a row at a time at an index
    affine in it (``jax.lax.scan``, flax ``nn.scan``, ``nnx.scan`` over stacked layer
    parameters). It applies to a step whose stage markers all end the body of a
    top-level while (``pipeline_enter_stage`` at the end of the scanned function: every
    iteration ends a segment), or that has no stage marker and holds a layer scan (then
    every iteration of every layer scan ends a segment; without markers, a forward scan
    must read a stacked weight: a stack that does not change with the microbatch).

    The forward scans, in program order, take segments ``[first, first + L)`` one after
    the other (several scans: an encoder's, then a decoder's). A scan's gradient (the
    loop ``jax.grad`` lowers its transpose to, running the layers backwards; told apart
    by the backward markers in its body, else by the ``transpose(...)`` of its location,
    else by its reading the forward loop's stacks in reverse order) covers the same
    segments, backward. Every other op gets a segment from the loops it depends on: code
    before the first scan joins its first segment, code between two scans the second's
    first, code after the last scan the last segment (the loss, the head's gradient);
    code downstream of a backward loop is backward code of that loop's first segment (the
    embedding's gradient: the backward of segment 0). Ops that depend on no scan (casts
    of parameters, the start values of stacks) are placed with their earliest user.

    Precondition: ``@main`` holds no ``func.call`` (jaxpp-inline-calls), the microbatch
    loop is normalized (jaxpp-normalize-loop).
    Postcondition: every op of the stage block but its terminator carries
    ``jaxpp.segment`` and ``jaxpp.kind``; each layer scan's loop also carries
    ``jaxpp.segments = array<i64: first, count>`` (its ``jaxpp.segment`` is ``first``);
    the module carries ``jaxpp.num_segments``. The stage markers inside the loops stay
    (jaxpp-split-layer-scans removes them).
    Options: ``chained`` and ``optional`` (the segment slot's chain: ``segment_slot``).
    """

    name = "jaxpp-segment-layer-scans"
    requires = ("jaxpp-normalize-loop", "jaxpp-inline-calls")

    @classmethod
    def unfinished(cls, module: ir.Operation) -> Evidence | None:
        return segments_left(module)

    def applies(self, module: ir.Operation) -> bool:
        main = ir_utils.find_main(module)
        if main is None:
            return False
        if segment_slot.stage_markers(main):
            return not segment_slot.markers_outside_loops(main)
        block = ir_utils.stage_block(main)
        return any(scan.kind == jaxpp.FORWARD for scan in _Scans(main, block).found)

    def segment(self, module: ir.Operation) -> None:
        main = ir_utils.get_main(module)
        block = ir_utils.stage_block(main)
        scans = _Scans(main, block, check_markers=True)
        _pair_backward(scans)
        forward = [scan for scan in scans.found if scan.kind == jaxpp.FORWARD]
        if not forward:
            raise segment_slot.nothing_to_segment(main)
        first = 0
        for scan in forward:
            scan.first = first
            first += scan.loop.trip_count
        _Assignment(scans, num_segments=first).apply()
        jaxpp.set_int_attr(module, jaxpp.NUM_SEGMENTS_ATTR, first)


@dataclasses.dataclass(eq=False)
class _Scan:
    """A layer scan of the stage block: its loop, direction and segments."""

    loop: layer_loops.LayerLoop
    kind: str
    marked: bool
    first: int = 0
    pair: _Scan | None = None

    @property
    def op(self) -> ir.Operation:
        return self.loop.op

    def check_not_recomputed(self) -> None:
        """A forward scan that autodiff placed in the backward pass is a rematerialization
        of a whole scan (jax.checkpoint around it): its layers would all be recomputed
        before the first layer's gradient, which no split into stages can run."""
        if self.kind == jaxpp.FORWARD and name_stacks.recomputed_in_backward(self.op.location):
            raise diagnostics.error(
                self.op,
                "this layer scan is recomputed in the backward pass (jax.checkpoint or remat "
                "around the whole scan): its layers cannot be split into pipeline stages "
                "that way; put jax.checkpoint (nn.remat, nnx.remat) on the scanned function, "
                "which recomputes each layer in its own stage",
            )


class _Scans:
    """The layer scans of the stage block (``found``, in program order): with stage
    markers, the loops whose bodies they end; without, every loop of layers."""

    def __init__(self, main: ir.Operation, block: ir.Block, *, check_markers: bool = False):
        self.main = main
        self.block = block
        self.top_ops = ir_utils.block_ops(block)[:-1]
        self.found: list[_Scan] = []
        markers = segment_slot.stage_markers(main)
        if markers:
            self._marked(markers, check_markers)
        else:
            self._unmarked()

    def _marked(self, markers: list[ir.Operation], check: bool) -> None:
        from jaxpp_mlir.passes import layer_loops

        directions: dict[ir.Operation, set[str]] = {}
        for marker in markers:
            owner = segment_slot.owner_in(marker, self.block)
            if owner is None or owner == marker or owner.name != ir_utils.WHILE_OP:
                if check:
                    raise diagnostics.error(
                        marker,
                        "this stage marker is not at the end of a layer scan's body: "
                        "jaxpp-segment-layer-scans reads steps whose markers all end the body "
                        "of a top-level loop over layers (jaxpp-assign-segments reads markers "
                        "at the top level of the step)",
                    )
                continue
            if marker.block != owner.regions[1].blocks[0]:
                raise diagnostics.error(
                    marker,
                    "stage marker in a loop or conditional nested inside a loop over layers: "
                    "a marker may only end the body of the layer scan itself (the function "
                    "jax.lax.scan, nn.scan or nnx.scan applies to each layer)",
                )
            directions.setdefault(owner, set()).add(jaxpp.marker_direction(marker))
        for op in self.top_ops:
            if op not in directions:
                continue
            try:
                loop = layer_loops.analyze(op)
            except layer_loops.NotALayerLoop as reason:
                marker = next(m for m in markers if segment_slot.owner_in(m, self.block) == op)
                raise diagnostics.error(
                    marker,
                    f"stage marker inside a 'stablehlo.while' that is not a layer scan: "
                    f"{reason}. A marker may end the body of a loop over stacked layers "
                    "(jax.lax.scan, flax nn.scan or nnx.scan over layer parameters: a static "
                    "trip count of 2 or more, each stacked parameter read a row at a time at "
                    "the loop counter); otherwise unroll the loop",
                ) from None
            kind = jaxpp.FORWARD if directions[op] == {jaxpp.FORWARD} else jaxpp.BACKWARD
            self.found.append(_Scan(loop, kind, marked=True))
        for scan in self.found:
            scan.check_not_recomputed()

    def _unmarked(self) -> None:
        from jaxpp_mlir.passes import layer_loops

        varying = _varying_values(self.block, self.top_ops)
        loops = []
        for op in self.top_ops:
            if op.name != ir_utils.WHILE_OP:
                continue
            try:
                loops.append(layer_loops.analyze(op))
            except layer_loops.NotALayerLoop:
                continue
        for loop in loops:
            kind = _unmarked_kind(loop, [s for s in self.found if s.kind == jaxpp.FORWARD])
            if kind == jaxpp.FORWARD and not _reads_a_weight(loop, varying):
                continue  # a loop over time steps or chunks of the microbatch: not layers
            scan = _Scan(loop, kind, marked=False)
            scan.check_not_recomputed()
            self.found.append(scan)


def _varying_values(block: ir.Block, top_ops: list[ir.Operation]) -> set[ir.Value] | None:
    """The values of the stage block that change with the microbatch (None: no microbatch
    loop, every input may)."""
    if block.owner.operation.name != jaxpp.LOOP_OP:
        return None
    varying: set[ir.Value] = set(block.arguments)
    for op in top_ops:
        if op.name == jaxpp.MARKER_OP:  # an optimization barrier: each result its operand
            varying.update(r for r, v in zip(op.results, op.operands, strict=True) if v in varying)
        elif any(v in varying for v in ir_utils.operands_read(op)):
            varying.update(op.results)
    return varying


def _reads_a_weight(loop: layer_loops.LayerLoop, varying: set[ir.Value] | None) -> bool:
    if varying is None:
        return bool(loop.reads)
    return any(read.source not in varying for read in loop.reads)


def _unmarked_kind(loop: layer_loops.LayerLoop, forward: list[_Scan]) -> str:
    """Backward if the loop's location says autodiff transposed it, else if it reads the
    stacks of an earlier forward scan in the other order; forward otherwise."""
    if name_stacks.in_transpose_scope(loop.op.location):
        return jaxpp.BACKWARD
    return jaxpp.BACKWARD if any(_reverses(loop, scan.loop) for scan in forward) else jaxpp.FORWARD


def _reverses(loop: layer_loops.LayerLoop, earlier: layer_loops.LayerLoop) -> bool:
    """``loop`` reads a stack ``earlier`` reads or writes, in the other row order."""
    if loop.trip_count != earlier.trip_count:
        return False
    order: dict[ir.Value, int] = {}
    for read in earlier.reads:
        order[read.source] = read.accesses[0].index.scale
    for write in earlier.writes:
        order[earlier.op.results[write.carry]] = write.access.index.scale
    return any(
        read.source in order and order[read.source] == -read.accesses[0].index.scale
        for read in loop.reads
    )


def _pair_backward(scans: _Scans) -> None:
    """Gives each backward scan the forward scan it is the gradient of: one with the same
    trip count before it whose stacks it reads in reverse, else the latest one left (the
    gradients run in the reverse order of the scans). One without is an error if marked,
    else not a layer scan."""
    unpaired = [s for s in scans.found if s.kind == jaxpp.FORWARD]
    kept = []
    for scan in scans.found:
        if scan.kind == jaxpp.FORWARD:
            kept.append(scan)
            continue
        position = scans.top_ops.index(scan.op)
        candidates = [
            s
            for s in unpaired
            if s.loop.trip_count == scan.loop.trip_count and scans.top_ops.index(s.op) < position
        ]
        reading = [s for s in candidates if _reverses(scan.loop, s.loop)]
        chosen = (reading or candidates or [None])[-1]
        if chosen is None:
            if scan.marked:
                raise diagnostics.error(
                    scan.op,
                    "a loop over layers holds backward stage markers but no forward layer scan "
                    f"of {scan.loop.trip_count} iterations comes before it: a backward marker "
                    "in a loop is the transpose of a marker ending a layer scan's body",
                )
            continue
        unpaired.remove(chosen)
        scan.pair = chosen
        kept.append(scan)
    scans.found = kept


class _Assignment:
    """Segments of the ops of the stage block from the scans they depend on."""

    def __init__(self, scans: _Scans, num_segments: int):
        self.scans = scans
        self.num = num_segments
        self.scan_at = {scan.op: scan for scan in scans.found}

    def apply(self) -> None:
        top_ops = self.scans.top_ops
        n = self.num
        where: dict[ir.Value, int] = {}
        # Per op: the forward level it reaches (the segment after the scans upstream),
        # the first segment of the backward scans upstream, and its position (forward
        # segments 0..n-1, then backward segments n-1..0 as n..2n-1).
        level: list[int | None] = []
        backward: list[int | None] = []
        positions: list[int | None] = []
        producers: list[list[int]] = []
        for index, op in enumerate(top_ops):
            feeding = sorted({where[v] for v in ir_utils.operands_read(op) if v in where})
            producers.append(feeding)
            up_level = max((level[p] for p in feeding if level[p] is not None), default=None)
            up_backward = min(
                (backward[p] for p in feeding if backward[p] is not None), default=None
            )
            scan = self.scan_at.get(op)
            if scan is None:
                out_level, out_backward = up_level, up_backward
                if up_backward is not None:
                    position = 2 * n - 1 - up_backward
                elif up_level is not None:
                    position = min(up_level, n - 1)
                else:
                    position = None
            elif scan.kind == jaxpp.FORWARD:
                self._check_forward(scan, up_level, up_backward)
                position, out_level, out_backward = scan.first, scan.first + _count(scan), None
            else:
                scan.first = scan.pair.first
                self._check_backward(scan, up_backward)
                position = 2 * n - 1 - (scan.first + _count(scan) - 1)
                out_level, out_backward = up_level, scan.first
            level.append(out_level)
            backward.append(out_backward)
            positions.append(position)
            for result in op.results:
                where[result] = index
        place_unanchored(producers, positions)
        for op, position in zip(top_ops, positions, strict=True):
            scan = self.scan_at.get(op)
            if scan is not None:
                jaxpp.set_segment_range(op, scan.first, _count(scan), scan.kind)
            elif position < n:
                jaxpp.set_segment(op, position, jaxpp.FORWARD)
            else:
                jaxpp.set_segment(op, 2 * n - 1 - position, jaxpp.BACKWARD)

    def _check_forward(self, scan: _Scan, up_level: int | None, up_backward: int | None) -> None:
        if up_backward is not None:
            raise diagnostics.error(
                scan.op,
                "this layer scan reads a gradient computed by a backward layer scan: "
                "higher-order gradients through layer scans are not supported",
            )
        if up_level is not None and up_level > scan.first:
            raise diagnostics.error(
                scan.op,
                "this layer scan reads the result of a layer scan that comes after it in the "
                "program: the layer scans of a step must run one after the other, in program "
                "order",
            )

    def _check_backward(self, scan: _Scan, up_backward: int | None) -> None:
        if up_backward is not None and up_backward < scan.first + _count(scan):
            raise diagnostics.error(
                scan.op,
                "this backward layer scan reads a gradient of an earlier layer of its own "
                "or of an earlier scan: the gradients of the layer scans must run in the "
                "reverse order of the scans",
            )


def _count(scan: _Scan) -> int:
    return scan.loop.trip_count
