"""The jaxpp ops: their names, attributes, builders and accessors.

jaxpp ops are spelled in MLIR's generic form (the context allows unregistered
dialects). The names come from ``dialect.vocabulary``; every other module goes
through the helpers below, and through those of ``dialect.markers`` (the stage
and loop markers, in either form), re-exported here.

Ops
---
``"jaxpp.task"(%args) {callee, jaxpp.stage, jaxpp.kind, jaxpp.rank?}``
    Runs the outlined stage function ``callee`` (a ``func.func``) once. ``kind``
    is ``"fwd"`` or ``"bwd"``.
``"jaxpp.send"(%value) {jaxpp.channel, jaxpp.rank, jaxpp.peer}``
    Sends ``value`` from rank ``jaxpp.rank`` to rank ``jaxpp.peer``.
``%v = "jaxpp.recv"() {jaxpp.channel, jaxpp.rank, jaxpp.peer}``
    Receives on rank ``jaxpp.rank`` the value sent by rank ``jaxpp.peer`` on the
    same channel.
``%c = "jaxpp.chunk"(%arg) {jaxpp.start, jaxpp.rows, jaxpp.stage?, jaxpp.rank?}``
    Rows ``[start, start + rows)`` along axis 0 of ``%arg``, an argument of ``@main``
    (a program input), as held by the rank that reads it: the caller's array arrives
    there split, so the piece moves no data (a stacked layer parameter whose layers
    are split into stages). Its result type is the argument's with ``rows`` leading.
    jaxpp-split-stacked-values makes them, at the top of ``@main``, each tagged with
    the stage holding its rows (``jaxpp.stage``); jaxpp-place-stages gives each the
    rank of that stage. The chunks of one argument hold disjoint rows, and an
    argument with chunks is read only through them.
``%v = "jaxpp.assemble"(%pieces)``
    The concatenation along axis 0 of ``%pieces``, each held by its own rank, in
    order. Its only use is the return of ``@main``: that result is one array whose
    rows live on the ranks of the pieces (the updated stacked parameters).
``%v = "jaxpp.replicated"(%copies) {jaxpp.ranks}``
    One value held on several ranks: operand i is its copy on rank
    ``jaxpp.ranks[i]`` (the copies are equal, each computed on its rank). Its
    only use is the return of ``@main``: that result is one array over the
    devices of all those ranks.

Attributes on ops of the input program (set by the passes)
----------------------------------------------------------
``jaxpp.segment`` (i64) and ``jaxpp.kind`` (string) on every top-level op of the
stage block once a segmenter ran (jaxpp-assign-segments), ``jaxpp.num_segments``
(i64) on the module; a segmenter that cuts by module paths also records its name
(``jaxpp.segmenter``, a string) and where each segment after the first starts
(``jaxpp.segment_starts``, an array of module paths). jaxpp-choose-stages replaces
each op's ``jaxpp.segment`` by its ``jaxpp.stage`` (i64) and records on the module
``jaxpp.num_stages`` (i64), ``jaxpp.stage_split`` (segments per stage), the chosen
schedule ``jaxpp.schedule`` (a dictionary, ``schedules.record``; none without a
microbatch loop) and, where the planner chose or checked the split,
``jaxpp.stage_estimate`` (a dictionary).
``jaxpp.calls_inlined`` (unit) on the module once jaxpp-inline-calls ran.

A loop of layers (a ``stablehlo.while`` whose iterations are segments:
jaxpp-segment-layer-scans) carries besides ``jaxpp.segment`` (its first segment)
``jaxpp.segments = array<i64: first, count>``; jaxpp-choose-stages adds
``jaxpp.stage_rows = array<i64: stage, first, count, ...>`` (which stage takes which of
its segments, as offsets within the loop), and jaxpp-split-layer-scans replaces it by one
loop per stage, tagged like any op.
"""

from __future__ import annotations

from collections.abc import Sequence

from jax.interpreters.mlir import ir

from jaxpp_mlir import _jax_compat

# Lets the bindings find jaxpp_mlir/dialect/python/jaxpp.py for jaxpp ops (see there).
_jax_compat.append_dialect_search_prefix("jaxpp_mlir.dialect.python")

from jaxpp_mlir.dialect.markers import (  # noqa: E402, F401  (re-exported: one import for callers)
    clear_loop_schedule,
    create_loop_marker,
    create_stage_marker,
    is_loop_marker,
    is_stage_marker,
    loop_num_microbatches,
    loop_reductions,
    loop_schedule,
    loop_stage_markers,
    marker_direction,
    marker_stage_name,
    set_loop_schedule,
    set_marker_direction,
)
from jaxpp_mlir.dialect.op_access import as_operation as _operation  # noqa: E402
from jaxpp_mlir.dialect.op_access import i64_attr as _i64  # noqa: E402
from jaxpp_mlir.dialect.records import get_record, set_record  # noqa: E402
from jaxpp_mlir.dialect.vocabulary import (  # noqa: E402, F401  (re-exported: one vocabulary)
    ASSEMBLE_OP,
    BACKWARD,
    BACKWARD_INPUT,
    BACKWARD_WEIGHT,
    CALLEE_ATTR,
    CALLS_INLINED_ATTR,
    CHANNEL_ATTR,
    CHUNK_OP,
    CHUNK_ROWS_ATTR,
    CHUNK_START_ATTR,
    CUSTOM_CALL_OP,
    DIRECTION_ATTR,
    ENTER_STAGE_TARGET,
    FOR_TASK_ATTR,
    FORWARD,
    FRONTEND_ATTRIBUTES,
    JAXPP_OPS,
    KIND_ATTR,
    KINDS,
    LOOP_MARKER,
    LOOP_MARKER_TARGET,
    LOOP_NUM_MICROBATCHES_ATTR,
    LOOP_OP,
    LOOP_REDUCTIONS_ATTR,
    LOOP_STAGE_MARKERS_ATTR,
    MARKER_ATTR,
    MARKER_OP,
    MARKER_OP_NAMES,
    MARKER_PRIMITIVE,
    NUM_RANKS_ATTR,
    NUM_SEGMENTS_ATTR,
    NUM_STAGES_ATTR,
    PEER_ATTR,
    POST,
    PRE,
    RANK_ATTR,
    RANKS_ATTR,
    RECV_OP,
    REPLICATED_OP,
    SCHEDULE_ATTR,
    SEGMENT_ATTR,
    SEGMENT_STARTS_ATTR,
    SEGMENTER_ATTR,
    SEGMENTS_ATTR,
    SEND_OP,
    SHARDING_ATTR,
    STAGE_ATTR,
    STAGE_ESTIMATE_ATTR,
    STAGE_NAME_ATTR,
    STAGE_ROWS_ATTR,
    STAGE_SPLIT_ATTR,
    STATE_RANKS_ATTR,
    TASK_OP,
    YIELD_OP,
)

# ------------------------------------------------------------ stage/kind tags


def _set_tags(op: ir.Operation | ir.OpView, name: str, number: int, kind: str) -> None:
    attributes = _operation(op).attributes
    attributes[name] = _i64(number)
    attributes[KIND_ATTR] = ir.StringAttr.get(kind)


def set_segment(op: ir.Operation | ir.OpView, segment: int, kind: str) -> None:
    _set_tags(op, SEGMENT_ATTR, segment, kind)


def has_segment(op: ir.Operation | ir.OpView) -> bool:
    return SEGMENT_ATTR in _operation(op).attributes


def get_segment(op: ir.Operation | ir.OpView) -> int:
    return ir.IntegerAttr(_operation(op).attributes[SEGMENT_ATTR]).value


def set_segment_range(op: ir.Operation | ir.OpView, first: int, count: int, kind: str) -> None:
    """Tags a loop of layers whose iterations are the segments ``[first, first + count)``
    (its ``jaxpp.segment`` is ``first``)."""
    set_segment(op, first, kind)
    _operation(op).attributes[SEGMENTS_ATTR] = ir.DenseI64ArrayAttr.get([first, count])


def segment_range(op: ir.Operation | ir.OpView) -> tuple[int, int] | None:
    """``(first, count)`` of a loop of layers (None for any other op)."""
    attributes = _operation(op).attributes
    if SEGMENTS_ATTR not in attributes:
        return None
    first, count = ir.DenseI64ArrayAttr(attributes[SEGMENTS_ATTR])
    return first, count


def set_stage_rows(op: ir.Operation | ir.OpView, rows: Sequence[tuple[int, int, int]]) -> None:
    """Records on a loop of layers which stage takes which of its segments:
    ``(stage, first offset, count)`` in order (see ``STAGE_ROWS_ATTR``)."""
    flat = [number for row in rows for number in row]
    _operation(op).attributes[STAGE_ROWS_ATTR] = ir.DenseI64ArrayAttr.get(flat)


def stage_rows(op: ir.Operation | ir.OpView) -> list[tuple[int, int, int]]:
    """``(stage, first offset, count)`` per stage of a loop of layers (empty: none recorded)."""
    attributes = _operation(op).attributes
    if STAGE_ROWS_ATTR not in attributes:
        return []
    flat = list(ir.DenseI64ArrayAttr(attributes[STAGE_ROWS_ATTR]))
    return [(flat[i], flat[i + 1], flat[i + 2]) for i in range(0, len(flat), 3)]


def clear_segment_range(op: ir.Operation | ir.OpView) -> None:
    """Removes the tags of a loop of layers (``jaxpp.segments``, ``jaxpp.stage_rows``)."""
    attributes = _operation(op).attributes
    for name in (SEGMENTS_ATTR, STAGE_ROWS_ATTR):
        if name in attributes:
            del attributes[name]


def set_stage(op: ir.Operation | ir.OpView, stage: int, kind: str) -> None:
    _set_tags(op, STAGE_ATTR, stage, kind)


def has_stage(op: ir.Operation | ir.OpView) -> bool:
    return STAGE_ATTR in _operation(op).attributes


def get_stage(op: ir.Operation | ir.OpView) -> int:
    return ir.IntegerAttr(_operation(op).attributes[STAGE_ATTR]).value


def get_kind(op: ir.Operation | ir.OpView) -> str:
    return ir.StringAttr(_operation(op).attributes[KIND_ATTR]).value


def clear_stage(op: ir.Operation | ir.OpView) -> None:
    """Removes the stage, kind and rank tags (from an op moved into a stage function)."""
    attributes = _operation(op).attributes
    for name in (STAGE_ATTR, KIND_ATTR, RANK_ATTR):
        if name in attributes:
            del attributes[name]


def set_stage_split(module: ir.Operation | ir.OpView, split: tuple[int, ...]) -> None:
    """Record on the module how many segments each stage holds."""
    _operation(module).attributes[STAGE_SPLIT_ATTR] = ir.DenseI64ArrayAttr.get(list(split))


def get_stage_split(module: ir.Operation | ir.OpView) -> tuple[int, ...] | None:
    """The module's recorded stage split (None: stages not chosen yet)."""
    attributes = _operation(module).attributes
    if STAGE_SPLIT_ATTR not in attributes:
        return None
    return tuple(ir.DenseI64ArrayAttr(attributes[STAGE_SPLIT_ATTR]))


def get_schedule(module: ir.Operation | ir.OpView) -> dict | None:
    """The record of the schedule jaxpp-choose-stages chose (None: none, no loop)."""
    return get_record(module, SCHEDULE_ATTR)


def set_schedule(module: ir.Operation | ir.OpView, record: dict) -> None:
    set_record(module, SCHEDULE_ATTR, record)


def get_stage_estimate(module: ir.Operation | ir.OpView) -> dict | None:
    """The planner's estimate of the chosen split (None where none was made)."""
    return get_record(module, STAGE_ESTIMATE_ATTR)


def set_stage_estimate(module: ir.Operation | ir.OpView, record: dict) -> None:
    set_record(module, STAGE_ESTIMATE_ATTR, record)


def set_rank(op: ir.Operation | ir.OpView, rank: int) -> None:
    _operation(op).attributes[RANK_ATTR] = _i64(rank)


def has_rank(op: ir.Operation | ir.OpView) -> bool:
    return RANK_ATTR in _operation(op).attributes


def get_rank(op: ir.Operation | ir.OpView) -> int:
    return ir.IntegerAttr(_operation(op).attributes[RANK_ATTR]).value


def get_peer(op: ir.Operation | ir.OpView) -> int:
    return ir.IntegerAttr(_operation(op).attributes[PEER_ATTR]).value


def get_channel(op: ir.Operation | ir.OpView) -> int:
    return ir.IntegerAttr(_operation(op).attributes[CHANNEL_ATTR]).value


def get_int_attr(op: ir.Operation | ir.OpView, name: str) -> int | None:
    attributes = _operation(op).attributes
    if name not in attributes:
        return None
    return ir.IntegerAttr(attributes[name]).value


def set_int_attr(op: ir.Operation | ir.OpView, name: str, value: int) -> None:
    _operation(op).attributes[name] = _i64(value)


def segmenter(module: ir.Operation | ir.OpView) -> str | None:
    """The segmenter that recorded its name on ``module`` (None: none did)."""
    attributes = _operation(module).attributes
    if SEGMENTER_ATTR not in attributes:
        return None
    return ir.StringAttr(attributes[SEGMENTER_ATTR]).value


def set_segmenter(
    module: ir.Operation | ir.OpView, name: str, segment_starts: Sequence[str]
) -> None:
    attributes = _operation(module).attributes
    attributes[SEGMENTER_ATTR] = ir.StringAttr.get(name)
    attributes[SEGMENT_STARTS_ATTR] = ir.ArrayAttr.get(
        [ir.StringAttr.get(start) for start in segment_starts]
    )


def segment_starts(module: ir.Operation | ir.OpView) -> list[str]:
    """The module paths recorded as segment starts (empty when none were)."""
    attributes = _operation(module).attributes
    if SEGMENT_STARTS_ATTR not in attributes:
        return []
    return [ir.StringAttr(start).value for start in ir.ArrayAttr(attributes[SEGMENT_STARTS_ATTR])]


# -------------------------------------------------------------- the task ops


def is_task(op: ir.Operation | ir.OpView) -> bool:
    return _operation(op).name == TASK_OP


def is_send(op: ir.Operation | ir.OpView) -> bool:
    return _operation(op).name == SEND_OP


def is_recv(op: ir.Operation | ir.OpView) -> bool:
    return _operation(op).name == RECV_OP


def is_jaxpp_op(op: ir.Operation | ir.OpView) -> bool:
    return _operation(op).name in JAXPP_OPS


def create_task(
    callee: str,
    operands: Sequence[ir.Value],
    result_types: Sequence[ir.Type],
    *,
    stage: int,
    kind: str,
    loc: ir.Location | None = None,
) -> ir.Operation:
    """Builds ``"jaxpp.task"`` at the current insertion point."""
    op = ir.Operation.create(
        TASK_OP,
        results=list(result_types),
        operands=list(operands),
        attributes={CALLEE_ATTR: ir.FlatSymbolRefAttr.get(callee)},
        loc=loc,
    )
    set_stage(op, stage, kind)
    return op


def task_callee(op: ir.Operation | ir.OpView) -> str:
    return ir.FlatSymbolRefAttr(_operation(op).attributes[CALLEE_ATTR]).value


def create_send(
    value: ir.Value, *, channel: int, rank: int, peer: int, loc: ir.Location | None = None
) -> ir.Operation:
    op = ir.Operation.create(SEND_OP, results=[], operands=[value], loc=loc)
    _set_transfer_attrs(op, channel=channel, rank=rank, peer=peer)
    return op


def create_recv(
    result_type: ir.Type, *, channel: int, rank: int, peer: int, loc: ir.Location | None = None
) -> ir.Operation:
    op = ir.Operation.create(RECV_OP, results=[result_type], operands=[], loc=loc)
    _set_transfer_attrs(op, channel=channel, rank=rank, peer=peer)
    return op


def _set_transfer_attrs(op: ir.Operation, *, channel: int, rank: int, peer: int) -> None:
    op.attributes[CHANNEL_ATTR] = _i64(channel)
    op.attributes[RANK_ATTR] = _i64(rank)
    op.attributes[PEER_ATTR] = _i64(peer)


def set_for_task(op: ir.Operation | ir.OpView, stage: int, kind: str) -> None:
    """Records on a transfer the task it belongs to (see ``FOR_TASK_ATTR``)."""
    attr = ir.ArrayAttr.get([_i64(stage), ir.StringAttr.get(kind)])
    _operation(op).attributes[FOR_TASK_ATTR] = attr


def get_for_task(op: ir.Operation | ir.OpView) -> tuple[int, str] | None:
    """The (stage, kind) of the task a transfer belongs to; None where not recorded."""
    attributes = _operation(op).attributes
    if FOR_TASK_ATTR not in attributes:
        return None
    stage, kind = ir.ArrayAttr(attributes[FOR_TASK_ATTR])
    return ir.IntegerAttr(stage).value, ir.StringAttr(kind).value


# ------------------------------------------------------------ the loop op


def is_loop(op: ir.Operation | ir.OpView) -> bool:
    return _operation(op).name == LOOP_OP


def is_yield(op: ir.Operation | ir.OpView) -> bool:
    return _operation(op).name == YIELD_OP


def create_loop(
    inits: Sequence[ir.Value], *, num_microbatches: int, loc: ir.Location | None = None
) -> ir.Operation:
    """Builds ``"jaxpp.loop"`` with one region; its block takes (microbatch index, state...)."""
    op = ir.Operation.create(
        LOOP_OP,
        results=[v.type for v in inits],
        operands=list(inits),
        regions=1,
        loc=loc,
    )
    op.attributes[LOOP_NUM_MICROBATCHES_ATTR] = _i64(num_microbatches)
    index_type = ir.RankedTensorType.get([], ir.IntegerType.get_signless(32))
    op.regions[0].blocks.append(index_type, *[v.type for v in inits])
    return op


def create_yield(values: Sequence[ir.Value], loc: ir.Location | None = None) -> ir.Operation:
    return ir.Operation.create(YIELD_OP, results=[], operands=list(values), loc=loc)


def loop_body(op: ir.Operation | ir.OpView) -> ir.Block:
    return _operation(op).regions[0].blocks[0]


def get_state_ranks(op: ir.Operation | ir.OpView) -> list[int]:
    op = _operation(op)
    if STATE_RANKS_ATTR not in op.attributes:
        return []
    return [ir.IntegerAttr(a).value for a in ir.ArrayAttr(op.attributes[STATE_RANKS_ATTR])]


def set_state_ranks(op: ir.Operation | ir.OpView, ranks: Sequence[int]) -> None:
    _operation(op).attributes[STATE_RANKS_ATTR] = ir.ArrayAttr.get([_i64(r) for r in ranks])


def is_replicated(op: ir.Operation | ir.OpView) -> bool:
    return _operation(op).name == REPLICATED_OP


def create_replicated(
    copies: Sequence[ir.Value], ranks: Sequence[int], loc: ir.Location | None = None
) -> ir.Operation:
    """Builds ``"jaxpp.replicated"``: ``copies[i]`` is the value's copy on ``ranks[i]``."""
    op = ir.Operation.create(
        REPLICATED_OP, results=[copies[0].type], operands=list(copies), loc=loc
    )
    op.attributes[RANKS_ATTR] = ir.ArrayAttr.get([_i64(r) for r in ranks])
    return op


def is_chunk(op: ir.Operation | ir.OpView) -> bool:
    return _operation(op).name == CHUNK_OP


def create_chunk(
    argument: ir.Value, start: int, rows: int, loc: ir.Location | None = None
) -> ir.Operation:
    """Builds ``"jaxpp.chunk"``: rows ``[start, start + rows)`` of ``argument`` along axis 0."""
    whole = ir.RankedTensorType(argument.type)
    shape = [rows, *whole.shape[1:]]
    result = ir.RankedTensorType.get(shape, whole.element_type, whole.encoding)
    op = ir.Operation.create(CHUNK_OP, results=[result], operands=[argument], loc=loc)
    op.attributes[CHUNK_START_ATTR] = _i64(start)
    op.attributes[CHUNK_ROWS_ATTR] = _i64(rows)
    return op


def chunk_rows(op: ir.Operation | ir.OpView) -> tuple[int, int]:
    """``(start, rows)`` of a ``jaxpp.chunk``."""
    attributes = _operation(op).attributes
    start = ir.IntegerAttr(attributes[CHUNK_START_ATTR]).value
    return start, ir.IntegerAttr(attributes[CHUNK_ROWS_ATTR]).value


def is_assemble(op: ir.Operation | ir.OpView) -> bool:
    return _operation(op).name == ASSEMBLE_OP


def create_assemble(pieces: Sequence[ir.Value], loc: ir.Location | None = None) -> ir.Operation:
    """Builds ``"jaxpp.assemble"``: ``pieces`` concatenated along axis 0, in order."""
    first = ir.RankedTensorType(pieces[0].type)
    rows = sum(ir.RankedTensorType(p.type).shape[0] for p in pieces)
    result = ir.RankedTensorType.get([rows, *first.shape[1:]], first.element_type, first.encoding)
    return ir.Operation.create(ASSEMBLE_OP, results=[result], operands=list(pieces), loc=loc)


def get_replica_ranks(op: ir.Operation | ir.OpView) -> list[int]:
    """The rank of each operand of a ``jaxpp.replicated`` (empty without the attribute)."""
    op = _operation(op)
    if RANKS_ATTR not in op.attributes:
        return []
    return [ir.IntegerAttr(a).value for a in ir.ArrayAttr(op.attributes[RANKS_ATTR])]
