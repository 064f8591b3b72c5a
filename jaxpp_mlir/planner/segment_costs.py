"""Estimated cost of each segment, read from its StableHLO ops.

Runs on a module whose stage block ops carry ``jaxpp.segment``/``jaxpp.kind`` (after
the segmenter, jaxpp-assign-segments, and before jaxpp-choose-stages, which runs it as
an analysis). It only reads the IR. Per segment and direction it counts

* FLOPs: ``dot_general``/``dot`` 2 x result elements x contracted size; convolution
  2 x result elements x kernel elements / output features; reductions one per input
  element; ``dynamic_update_slice`` one per element of its update; any other op
  (elementwise) one per result element; a loop's body once per iteration where its trip
  count is a constant;
* bytes: what each op reads and writes (its operands' and results' sizes), except that a
  slice (``slice``, ``dynamic_slice``, ``gather``) reads only what it returns, a
  ``dynamic_update_slice`` writes only its update in place, and a ``reshape`` or a
  region's terminator moves nothing; a loop's or conditional's body as for FLOPs;

and per segment boundary the bytes of forward values that cross it (a skip connection
crosses every boundary it spans; backward sends as much back). A segment's memory is
its parameters (values from outside the stage block it reads; with their gradient,
twice that) and its activations: forward values the backward of the same segment reads,
kept per microbatch in flight.

A loop of layers (``jaxpp.segments``: a layer scan, each iteration a segment) costs each
of its segments one iteration: its body's FLOPs and bytes, a share of the stacked
parameters and of the stacked activations it keeps for its backward, and the values its
iterations carry cross each boundary between its segments. (So a layer costs as it would
written out with a marker after it. Charged the bytes of the loop's operands and results
instead of its body's, and each row its body writes into a stacked value as the whole
stack, a layer looked a third of its cost next to an embedding and a head, and the planner
split 8 equal scanned layers (1, 3, 3, 1).) An op on a whole stacked
value such a loop computes (the gradient accumulator's add of a stacked gradient: as many
rows as the loop has iterations) is spread over the loop's segments too: each stage
computes its own rows once stacked values are split (jaxpp-split-layer-scans' pieces).

Ops are counted where the stage functions will hold them: what jaxpp-outline-stages copies
into every function that reads it (constants and cheap ops of constants alone,
``outlining.copyable_ops``) counts in each segment and direction that reads it and never
crosses a boundary. (Charged to the first segment that read it and sent from there, the
constant broadcasts JAX shares between equal layers, such as a dropout's random-bit
tables, made a boundary look costlier the earlier it sat, and the planner split 8 equal
dropout blocks (5, 1, 1, 1).)
"""

from __future__ import annotations

import math
from collections.abc import Callable

from jax.interpreters.mlir import ir

from jaxpp_mlir._jax_compat import stablehlo
from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.passes import outlining
from jaxpp_mlir.runtime import records

_CONTRACTIONS = ("stablehlo.dot_general", "stablehlo.dot")
_FREE = ("stablehlo.constant", "stablehlo.reshape", "stablehlo.custom_call", "stablehlo.iota")
# Ops that read only the elements they return (not their whole operand).
_SLICES = ("stablehlo.dynamic_slice", "stablehlo.slice", "stablehlo.gather")
# Writes its update into its operand in place: a loop's row of a stacked value.
_UPDATE = "stablehlo.dynamic_update_slice"
# Ops that move no data: a bitcast, a region's terminator.
_NO_TRAFFIC = ("stablehlo.reshape", "stablehlo.return")
_CONTROL_FLOW = (ir_utils.WHILE_OP, "stablehlo.case", "stablehlo.if")


@records.frozen
class SegmentCosts:
    """Per marked segment: FLOPs and bytes of its forward and backward, its parameter
    and saved-activation bytes; per boundary (after segment ``i``) the bytes crossing."""

    forward_flops: tuple[float, ...]
    backward_flops: tuple[float, ...]
    forward_bytes: tuple[float, ...]
    backward_bytes: tuple[float, ...]
    param_bytes: tuple[int, ...]
    activation_bytes: tuple[int, ...]
    boundary_bytes: tuple[int, ...]
    # Seconds measured on the devices (``calibration``), which replace the estimates.
    measured_forward_s: tuple[float, ...] | None = None
    measured_backward_s: tuple[float, ...] | None = None

    @property
    def num_segments(self) -> int:
        return len(self.forward_flops)


def _elements(value_type: ir.Type) -> int:
    if not isinstance(value_type, ir.RankedTensorType) or not value_type.has_static_shape:
        return 1
    return math.prod(value_type.shape)


def _bytes(value_type: ir.Type) -> int:
    if not isinstance(value_type, ir.RankedTensorType):
        return 0
    element = value_type.element_type
    width = element.width if isinstance(element, ir.FloatType | ir.IntegerType) else 32
    return _elements(value_type) * max(1, width // 8)


def op_flops(op: ir.Operation) -> float:
    """Estimated floating-point operations of one StableHLO op (see the module doc)."""
    name = op.name
    if name in _FREE:
        return 0.0
    results = op.results
    if len(results) == 1:  # most ops: one result, no generator
        out = _elements(results[0].type)
    elif not len(results):
        return 0.0
    else:
        out = sum(_elements(result.type) for result in results)
    if name in _CONTRACTIONS:
        lhs = op.operands[0].type.shape
        if name == "stablehlo.dot":
            contracted = lhs[-1]
        else:
            dims = op.attributes["dot_dimension_numbers"]
            contracted = math.prod(lhs[d] for d in _lhs_contracting(dims))
        return 2.0 * out * contracted
    if name == "stablehlo.convolution":
        kernel = op.operands[1].type.shape
        features = max(1, op.results[0].type.shape[-1])
        return 2.0 * out * math.prod(kernel) / features
    if name in ("stablehlo.reduce", "stablehlo.reduce_window"):
        return float(sum(_elements(v.type) for v in op.operands))
    if name == _UPDATE:
        return float(_elements(op.operands[1].type))
    return float(out)


def op_bytes(op: ir.Operation) -> float:
    """Estimated bytes one StableHLO op reads and writes (see the module doc)."""
    name = op.name
    if name in _NO_TRAFFIC:
        return 0.0
    if name in _SLICES:
        indices = sum(_bytes(v.type) for v in list(op.operands)[1:])
        return 2.0 * sum(_bytes(r.type) for r in op.results) + indices
    if name == _UPDATE:
        indices = sum(_bytes(v.type) for v in list(op.operands)[2:])
        return 2.0 * _bytes(op.operands[1].type) + indices
    return float(sum(_bytes(v.type) for v in op.operands) + sum(_bytes(r.type) for r in op.results))


def nested_flops(op: ir.Operation) -> float:
    """The FLOPs of the ops nested in ``op``, a loop's body counted once per iteration
    where its trip count is a constant (``layer_loops``), else once."""
    return _nested(op, op_flops)


def nested_bytes(op: ir.Operation) -> float:
    """``nested_flops`` for bytes: what the ops nested in a loop or conditional read and
    write (a reduction's scalar body moves nothing of its own)."""
    return _nested(op, op_bytes) if op.name in _CONTROL_FLOW else 0.0


def _nested(op: ir.Operation, cost: Callable[[ir.Operation], float]) -> float:
    if not len(op.regions):
        return 0.0
    total = 0.0
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                inner = inner.operation
                total += cost(inner)
                if len(inner.regions):
                    total += _nested(inner, cost) * _iterations(inner)
    return total


def _iterations(op: ir.Operation) -> int:
    if op.name != ir_utils.WHILE_OP:
        return 1
    from jaxpp_mlir.passes import layer_loops  # loaded for steps with loops only

    try:
        return layer_loops.analyze(op).trip_count
    except layer_loops.NotALayerLoop:
        return 1


def _lhs_contracting(dims: ir.Attribute) -> list[int]:
    return list(stablehlo.DotDimensionNumbers(dims).lhs_contracting_dimensions)


def _copy_into(
    op: ir.Operation, copies: set[ir.Operation], copied: dict[ir.Operation, None]
) -> None:
    """Adds ``op`` and the copied ops it is computed from to ``copies``."""
    pending = [op]
    while pending:
        op = pending.pop()
        if op in copies:
            continue
        copies.add(op)
        for operand in op.operands:
            producer = ir_utils.defining_op(operand)
            if producer in copied:
                pending.append(producer)


def segment_costs(module: ir.Operation) -> SegmentCosts:
    """The costs of every segment of a segmented module (see the module doc)."""
    num = jaxpp.get_int_attr(module, jaxpp.NUM_SEGMENTS_ATTR) or 0
    block = ir_utils.stage_block(ir_utils.get_main(module))
    top_ops = ir_utils.block_ops(block)[:-1]
    flops = {jaxpp.FORWARD: [0.0] * num, jaxpp.BACKWARD: [0.0] * num}
    traffic = {jaxpp.FORWARD: [0.0] * num, jaxpp.BACKWARD: [0.0] * num}
    params, activations, crossing = [0] * num, [0] * num, [0] * max(0, num - 1)
    where: dict[ir.Operation, tuple[int, str]] = {}
    seen_params: list[set[ir.Value]] = [set() for _ in range(num)]
    loops = _LoopCosts(flops, traffic, params, activations, crossing, where)
    # What jaxpp-outline-stages copies into every function that reads it (constants and
    # cheap ops of constants alone, such as the broadcasts JAX shares between layers) is
    # computed in each segment that reads it, never sent across a boundary.
    terminator = ir_utils.block_ops(block)[-1]
    copied = outlining.copyable_ops(
        top_ops, set(terminator.operands), outlining.constants_from_outside(top_ops)
    )
    copies: dict[tuple[int, str], set[ir.Operation]] = {}
    saved: set[ir.Value] = set()  # forward values counted as activations
    crossed: dict[ir.Value, int] = {}  # forward value -> the segment it is sent up to
    for op in top_ops:
        span = jaxpp.segment_range(op)
        if span is not None:
            loops.add(op, span, seen_params)
            continue
        if op in copied:
            continue
        stage, kind = jaxpp.get_segment(op), jaxpp.get_kind(op)
        direction = jaxpp.FORWARD if kind == jaxpp.FORWARD else jaxpp.BACKWARD
        where[op] = (stage, direction)
        if loops.spread(op, direction, seen_params):
            continue
        repeats = _iterations(op)
        flops[direction][stage] += op_flops(op) + nested_flops(op) * repeats
        traffic[direction][stage] += op_bytes(op) + nested_bytes(op) * repeats
        for operand in ir_utils.external_operands(op):
            producer = ir_utils.defining_op(operand)
            if producer in copied:
                _copy_into(producer, copies.setdefault((stage, direction), set()), copied)
                continue
            if producer is None or producer not in where:
                if operand not in seen_params[stage] and ir_utils.defining_op(operand) is None:
                    seen_params[stage].add(operand)
                    params[stage] += _bytes(operand.type)
                continue
            source, source_direction = where[producer]
            if source_direction != jaxpp.FORWARD:
                continue
            # A value read by several ops is kept, or sent over a boundary, once.
            if direction == jaxpp.BACKWARD:
                if source == stage and operand not in saved:
                    saved.add(operand)
                    activations[source] += _bytes(operand.type)
                continue
            reached = crossed.get(operand, source)
            for boundary in range(reached, stage):
                crossing[boundary] += _bytes(operand.type)
            crossed[operand] = max(reached, stage)
    for (stage, direction), ops in copies.items():
        flops[direction][stage] += sum(map(op_flops, ops))
        traffic[direction][stage] += sum(map(op_bytes, ops))
    return SegmentCosts(
        forward_flops=tuple(flops[jaxpp.FORWARD]),
        backward_flops=tuple(flops[jaxpp.BACKWARD]),
        forward_bytes=tuple(traffic[jaxpp.FORWARD]),
        backward_bytes=tuple(traffic[jaxpp.BACKWARD]),
        param_bytes=tuple(params),
        activation_bytes=tuple(activations),
        boundary_bytes=tuple(crossing),
    )


class _LoopCosts:
    """Adds a loop of layers to the per-segment tallies of ``segment_costs``."""

    def __init__(self, flops, traffic, params, activations, crossing, where):
        self.flops, self.traffic = flops, traffic
        self.params, self.activations, self.crossing = params, activations, crossing
        self.where = where
        self.forward_loops: dict[ir.Operation, tuple[int, int]] = {}

    def add(self, op: ir.Operation, span: tuple[int, int], seen_params: list[set]) -> None:
        first, count = span
        direction = jaxpp.FORWARD if jaxpp.get_kind(op) == jaxpp.FORWARD else jaxpp.BACKWARD
        segments = range(first, first + count)
        # One iteration each: its body's ops (the loop's carried values stay in place).
        per_iteration, share = nested_flops(op), nested_bytes(op)
        for segment in segments:
            self.flops[direction][segment] += per_iteration
            self.traffic[direction][segment] += share
        for operand in ir_utils.external_operands(op):
            self._operand(op, operand, first, count, direction, seen_params)
        if direction == jaxpp.FORWARD:
            self.forward_loops[op] = span
            carried = _carried_bytes(op)
            for boundary in range(first, first + count - 1):
                self.crossing[boundary] += carried
        # Its results leave from the segment its last iteration runs in.
        self.where[op] = (first + count - 1 if direction == jaxpp.FORWARD else first, direction)

    def spread(self, op: ir.Operation, direction: str, seen_params: list[set]) -> bool:
        """Spreads ``op`` over the segments of the loop of layers whose stacked result it
        reads, if its results have the loop's rows (True); else leaves it (False)."""
        span = self._stacked_source(op)
        if span is None:
            return False
        first, count = span
        flops = (op_flops(op) + nested_flops(op)) / count
        traffic = op_bytes(op) / count
        for segment in range(first, first + count):
            self.flops[direction][segment] += flops
            self.traffic[direction][segment] += traffic
        for operand in ir_utils.external_operands(op):
            if ir_utils.defining_op(operand) is None and operand not in seen_params[first]:
                seen_params[first].add(operand)
                size = _bytes(operand.type)
                spread = _rows(operand.type) == count
                for segment in range(first, first + count) if spread else (first,):
                    self.params[segment] += size // count if spread else size
        return True

    def _stacked_source(self, op: ir.Operation) -> tuple[int, int] | None:
        for operand in op.operands:
            producer = ir_utils.defining_op(operand)
            span = jaxpp.segment_range(producer) if producer is not None else None
            if span is None or _rows(operand.type) != span[1]:
                continue
            if all(_rows(result.type) == span[1] for result in op.results):
                return span
        return None

    def _operand(self, op, operand, first, count, direction, seen_params) -> None:
        size = _bytes(operand.type)
        stacked = _rows(operand.type) == count
        producer = ir_utils.defining_op(operand)
        if producer is None or producer not in self.where:
            if producer is None and operand not in seen_params[first]:
                seen_params[first].add(operand)
                if stacked:
                    for segment in range(first, first + count):
                        self.params[segment] += size // count
                else:
                    self.params[first] += size
            return
        source, source_direction = self.where[producer]
        if source_direction == jaxpp.FORWARD and direction == jaxpp.BACKWARD:
            if stacked and producer in self.forward_loops:
                for segment in range(first, first + count):
                    self.activations[segment] += size // count
            elif first <= source < first + count:
                self.activations[source] += size
        elif source_direction == direction == jaxpp.FORWARD:
            for boundary in range(source, first):
                self.crossing[boundary] += size


def _rows(value_type: ir.Type) -> int | None:
    if not isinstance(value_type, ir.RankedTensorType) or not value_type.shape:
        return None
    return value_type.shape[0]


def _carried_bytes(op: ir.Operation) -> int:
    """The bytes a loop of layers carries from one iteration to the next."""
    from jaxpp_mlir.passes import layer_loops

    try:
        loop = layer_loops.analyze(op)
    except layer_loops.NotALayerLoop:
        return 0
    return sum(_bytes(op.operands[i].type) for i in loop.carried())
