"""The jaxpp ops: their names, attributes, builders and accessors.

jaxpp ops are spelled in MLIR's generic form (the context allows unregistered
dialects). This module is the only place that spells an op or attribute name;
every other module goes through the helpers below.

Ops
---
``stablehlo.optimization_barrier {jaxpp.marker = "fwd" | "bwd"}``
    The stage marker produced by the frontend. Variadic: one operand and one
    result per pytree leaf, result i is operand i. ``jaxpp.marker`` records the
    direction: ``"fwd"`` (the marker the user wrote) or ``"bwd"`` (its
    transpose, placed by autodiff). An optimization barrier runs under plain
    ``jax.jit`` with no handler, stops fusion across the stage boundary, and
    Shardy propagates shardings through it. A barrier without ``jaxpp.marker``
    (the user's own ``jax.lax.optimization_barrier``, remat) is not a marker.
``stablehlo.optimization_barrier {jaxpp.marker = "loop", ...}``
    The microbatch loop marker produced by ``treduce``: a barrier on the loop's
    microbatch counter (one integer scalar) that sits in the body of the
    ``stablehlo.while`` loop over microbatches. It carries
    ``jaxpp.num_microbatches`` (i64), ``jaxpp.schedule`` (the schedule's
    ``repr``, empty when none was given), ``jaxpp.reductions`` (the reduction
    of every result leaf, comma-separated: ``add``, ``max`` or
    ``concat(AXIS)``) and ``jaxpp.stage_markers`` (the ``file:line`` of every
    ``pipeline_enter_stage`` call made while tracing the body, newline-separated).
``stablehlo.custom_call @jaxpp.enter_stage`` / ``@jaxpp.loop_marker``
    The older form of the two markers, still read (modules saved before the
    markers became barriers): the same operands and results, the direction in
    ``mhlo.frontend_attributes`` as ``jaxpp.direction``, the loop marker's
    parameters there too, all as strings. The accessors below read both forms.
``"jaxpp.task"(%args) {callee, jaxpp.stage, jaxpp.kind, jaxpp.rank?}``
    Runs the outlined stage function ``callee`` (a ``func.func``) once. ``kind``
    is ``"fwd"`` or ``"bwd"``.
``"jaxpp.send"(%value) {jaxpp.channel, jaxpp.rank, jaxpp.peer}``
    Sends ``value`` from rank ``jaxpp.rank`` to rank ``jaxpp.peer``.
``%v = "jaxpp.recv"() {jaxpp.channel, jaxpp.rank, jaxpp.peer}``
    Receives on rank ``jaxpp.rank`` the value sent by rank ``jaxpp.peer`` on the
    same channel.
``%v = "jaxpp.replicated"(%copies) {jaxpp.ranks}``
    One value held on several ranks: operand i is its copy on rank
    ``jaxpp.ranks[i]`` (the copies are equal, each computed on its rank). Its
    only use is the return of ``@main``: that result is one array over the
    devices of all those ranks.

Attributes on ops of the input program (set by the passes)
----------------------------------------------------------
``jaxpp.stage`` (i64) and ``jaxpp.kind`` (string) on every top-level op of
``@main`` after stage assignment; ``jaxpp.num_stages`` (i64) on the module.
``jaxpp.calls_inlined`` (unit) on the module once jaxpp-inline-calls ran.
"""

from __future__ import annotations

from collections.abc import Sequence

from jax.extend.mlir import ir
from jax.extend.mlir.dialects import stablehlo

from jaxpp_mlir import _jax_compat

# Lets the bindings find jaxpp_mlir/dialect/python/jaxpp.py for jaxpp ops (see there).
_jax_compat.append_dialect_search_prefix("jaxpp_mlir.dialect.python")

from jaxpp_mlir.dialect.vocabulary import (  # noqa: E402, F401  (re-exported: one vocabulary)
    BACKWARD,
    BACKWARD_INPUT,
    BACKWARD_WEIGHT,
    CALLEE_ATTR,
    CALLS_INLINED_ATTR,
    CHANNEL_ATTR,
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
    LOOP_SCHEDULE_ATTR,
    LOOP_STAGE_MARKERS_ATTR,
    MARKER_ATTR,
    MARKER_OP,
    NUM_RANKS_ATTR,
    NUM_STAGES_ATTR,
    PEER_ATTR,
    POST,
    PRE,
    RANK_ATTR,
    RANKS_ATTR,
    RECV_OP,
    REPLICATED_OP,
    SEND_OP,
    SHARDING_ATTR,
    STAGE_ATTR,
    STAGE_NAME_ATTR,
    STAGE_SPLIT_ATTR,
    STATE_RANKS_ATTR,
    TASK_OP,
    YIELD_OP,
)

# ----------------------------------------------------------------- markers


def is_stage_marker(op: ir.Operation | ir.OpView) -> bool:
    """True for a stage marker, in either form (see the module docstring)."""
    op = _operation(op)
    name = op.name
    if name == MARKER_OP:
        return _marker_tag(op) in (FORWARD, BACKWARD)
    return name == CUSTOM_CALL_OP and _custom_call_target(op) == ENTER_STAGE_TARGET


def marker_direction(op: ir.Operation | ir.OpView) -> str:
    """``"fwd"`` or ``"bwd"`` for a stage marker (``"fwd"`` when unspecified)."""
    op = _operation(op)
    if op.name == MARKER_OP:
        return _marker_tag(op) or FORWARD
    return _frontend_attribute(op, DIRECTION_ATTR) or FORWARD


def set_marker_direction(op: ir.Operation | ir.OpView, direction: str) -> None:
    """Rewrites a stage marker's direction, in the form the marker has."""
    op = _operation(op)
    if op.name == MARKER_OP:
        op.attributes[MARKER_ATTR] = ir.StringAttr.get(direction)
    else:
        op.attributes[FRONTEND_ATTRIBUTES] = ir.DictAttr.get(
            {DIRECTION_ATTR: ir.StringAttr.get(direction)}
        )


def marker_stage_name(op: ir.Operation | ir.OpView) -> str:
    """The name ``mark_stage_end(x, name=...)`` gave a stage marker ("" when none): an
    attribute of the barrier form, a frontend attribute of the saved custom-call form."""
    op = _operation(op)
    if STAGE_NAME_ATTR in op.attributes:
        return ir.StringAttr(op.attributes[STAGE_NAME_ATTR]).value
    if FRONTEND_ATTRIBUTES not in op.attributes:
        return ""
    attrs = ir.DictAttr(op.attributes[FRONTEND_ATTRIBUTES])
    return ir.StringAttr(attrs[STAGE_NAME_ATTR]).value if STAGE_NAME_ATTR in attrs else ""


def is_loop_marker(op: ir.Operation | ir.OpView) -> bool:
    """True for treduce's microbatch loop marker, in either form."""
    op = _operation(op)
    name = op.name
    if name == MARKER_OP:
        return _marker_tag(op) == LOOP_MARKER
    return name == CUSTOM_CALL_OP and _custom_call_target(op) == LOOP_MARKER_TARGET


def create_stage_marker(values: Sequence[ir.Value], direction: str, name: str = "") -> ir.Operation:
    """Builds a stage marker on ``values`` at the current insertion point; a non-empty
    ``name`` (``mark_stage_end(..., name=)``) labels the stage it ends."""
    op = stablehlo.OptimizationBarrierOp(list(values)).operation
    op.attributes[MARKER_ATTR] = ir.StringAttr.get(direction)
    if name:
        op.attributes[STAGE_NAME_ATTR] = ir.StringAttr.get(name)
    return op


def create_loop_marker(
    counter: ir.Value,
    *,
    num_microbatches: int,
    schedule: str,
    reductions: Sequence[str],
    stage_markers: Sequence[str],
) -> ir.Operation:
    """Builds treduce's loop marker on the microbatch ``counter`` at the current insertion point."""
    op = stablehlo.OptimizationBarrierOp([counter]).operation
    op.attributes[MARKER_ATTR] = ir.StringAttr.get(LOOP_MARKER)
    op.attributes[LOOP_NUM_MICROBATCHES_ATTR] = _i64(num_microbatches)
    op.attributes[LOOP_SCHEDULE_ATTR] = ir.StringAttr.get(schedule)
    op.attributes[LOOP_REDUCTIONS_ATTR] = ir.StringAttr.get(",".join(reductions))
    op.attributes[LOOP_STAGE_MARKERS_ATTR] = ir.StringAttr.get("\n".join(stage_markers))
    return op


def _marker_tag(op: ir.Operation) -> str | None:
    if MARKER_ATTR not in op.attributes:
        return None
    attr = op.attributes[MARKER_ATTR]
    return ir.StringAttr(attr).value if isinstance(attr, ir.StringAttr) else None


def _custom_call_target(op: ir.Operation) -> str | None:
    if op.name != CUSTOM_CALL_OP or "call_target_name" not in op.attributes:
        return None
    return ir.StringAttr(op.attributes["call_target_name"]).value


def _frontend_attribute(op: ir.Operation, name: str) -> str | None:
    if FRONTEND_ATTRIBUTES not in op.attributes:
        return None
    attrs = ir.DictAttr(op.attributes[FRONTEND_ATTRIBUTES])
    if name not in attrs:
        return None
    return ir.StringAttr(attrs[name]).value


def _loop_marker_attr(op: ir.Operation | ir.OpView, name: str) -> str | None:
    """A loop marker parameter as text: from the op (barrier form) or its frontend attributes."""
    op = _operation(op)
    if op.name != MARKER_OP:
        return _frontend_attribute(op, name)
    if name not in op.attributes:
        return None
    attr = op.attributes[name]
    if isinstance(attr, ir.IntegerAttr):
        return str(attr.value)
    return ir.StringAttr(attr).value if isinstance(attr, ir.StringAttr) else None


def loop_num_microbatches(op: ir.Operation | ir.OpView) -> int | None:
    """The microbatch count recorded on a loop marker (None when absent or not a number)."""
    value = _loop_marker_attr(op, LOOP_NUM_MICROBATCHES_ATTR)
    return int(value) if value is not None and value.strip().isdigit() else None


def loop_schedule(op: ir.Operation | ir.OpView) -> str:
    """The schedule's ``repr`` recorded on a loop marker (``""`` when none)."""
    return _loop_marker_attr(op, LOOP_SCHEDULE_ATTR) or ""


def loop_stage_markers(op: ir.Operation | ir.OpView) -> tuple[str, ...] | None:
    """The ``file:line`` of every stage marker written in the loop's body (None when unrecorded)."""
    value = _loop_marker_attr(op, LOOP_STAGE_MARKERS_ATTR)
    if value is None:
        return None
    return tuple(value.split("\n")) if value else ()


def loop_reductions(op: ir.Operation | ir.OpView) -> tuple[str, ...]:
    """The reduction of every result leaf of the loop (``add``, ``max``, ``concat(N)``)."""
    value = _loop_marker_attr(op, LOOP_REDUCTIONS_ATTR)
    return tuple(value.split(",")) if value else ()


# ------------------------------------------------------------ stage/kind tags


def set_stage(op: ir.Operation | ir.OpView, stage: int, kind: str) -> None:
    op = _operation(op)
    op.attributes[STAGE_ATTR] = _i64(stage)
    op.attributes[KIND_ATTR] = ir.StringAttr.get(kind)


def has_stage(op: ir.Operation | ir.OpView) -> bool:
    return STAGE_ATTR in _operation(op).attributes


def get_stage(op: ir.Operation | ir.OpView) -> int:
    return ir.IntegerAttr(_operation(op).attributes[STAGE_ATTR]).value


def get_kind(op: ir.Operation | ir.OpView) -> str:
    return ir.StringAttr(_operation(op).attributes[KIND_ATTR]).value


def clear_stage(op: ir.Operation | ir.OpView) -> None:
    """Removes the stage, kind and rank tags (from an op moved into a stage function)."""
    op = _operation(op)
    for name in (STAGE_ATTR, KIND_ATTR, RANK_ATTR):
        if name in op.attributes:
            del op.attributes[name]


def set_stage_split(module: ir.Operation | ir.OpView, split: tuple[int, ...]) -> None:
    """Record on the module how many marked segments each stage holds."""
    _operation(module).attributes[STAGE_SPLIT_ATTR] = ir.DenseI64ArrayAttr.get(list(split))


def get_stage_split(module: ir.Operation | ir.OpView) -> tuple[int, ...] | None:
    """The module's recorded stage split (None: one segment per stage, not merged)."""
    attributes = _operation(module).attributes
    if STAGE_SPLIT_ATTR not in attributes:
        return None
    return tuple(ir.DenseI64ArrayAttr(attributes[STAGE_SPLIT_ATTR]))


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
    op = _operation(op)
    if name not in op.attributes:
        return None
    return ir.IntegerAttr(op.attributes[name]).value


def set_int_attr(op: ir.Operation | ir.OpView, name: str, value: int) -> None:
    _operation(op).attributes[name] = _i64(value)


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


def get_replica_ranks(op: ir.Operation | ir.OpView) -> list[int]:
    """The rank of each operand of a ``jaxpp.replicated`` (empty without the attribute)."""
    op = _operation(op)
    if RANKS_ATTR not in op.attributes:
        return []
    return [ir.IntegerAttr(a).value for a in ir.ArrayAttr(op.attributes[RANKS_ATTR])]


# ------------------------------------------------------------------ helpers


def _i64(value: int) -> ir.IntegerAttr:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)


def _operation(op: ir.Operation | ir.OpView) -> ir.Operation:
    return op.operation  # an Operation's is itself (cheaper than asking for the type)
