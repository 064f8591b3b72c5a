"""The stage and loop markers: recognising them in either form, building them, reading them.

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
    ``jaxpp.num_microbatches`` (i64), ``jaxpp.schedule`` (the schedule given
    to treduce as a dictionary, ``schedules.record``; absent when none was given;
    modules lowered by older versions carry its ``repr`` as a string, ``""`` for
    none), ``jaxpp.reductions`` (the reduction
    of every result leaf, comma-separated: ``add``, ``max`` or
    ``concat(AXIS)``) and ``jaxpp.stage_markers`` (the ``file:line`` of every
    ``pipeline_enter_stage`` call made while tracing the body, newline-separated).
``stablehlo.custom_call @jaxpp.enter_stage`` / ``@jaxpp.loop_marker``
    The older form of the two markers, still read (modules saved before the
    markers became barriers): the same operands and results, the direction in
    ``mhlo.frontend_attributes`` as ``jaxpp.direction``, the loop marker's
    parameters there too, all as strings. The accessors below read both forms.

``dialect.ops`` re-exports every public name here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jax.interpreters.mlir import ir

from jaxpp_mlir._jax_compat import stablehlo
from jaxpp_mlir.dialect.op_access import as_operation as _operation
from jaxpp_mlir.dialect.op_access import i64_attr as _i64
from jaxpp_mlir.dialect.records import attr_record, record_attr
from jaxpp_mlir.dialect.vocabulary import (
    BACKWARD,
    CUSTOM_CALL_OP,
    DIRECTION_ATTR,
    ENTER_STAGE_TARGET,
    FORWARD,
    FRONTEND_ATTRIBUTES,
    LOOP_MARKER,
    LOOP_MARKER_TARGET,
    LOOP_NUM_MICROBATCHES_ATTR,
    LOOP_REDUCTIONS_ATTR,
    LOOP_STAGE_MARKERS_ATTR,
    MARKER_ATTR,
    MARKER_OP,
    SCHEDULE_ATTR,
    STAGE_NAME_ATTR,
)


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
    return _frontend_attribute(op, STAGE_NAME_ATTR) or ""


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
    schedule: Mapping[str, Any] | None,
    reductions: Sequence[str],
    stage_markers: Sequence[str],
) -> ir.Operation:
    """Builds treduce's loop marker on the microbatch ``counter`` at the current insertion
    point; ``schedule`` is the record of the schedule treduce was given (None: none)."""
    op = stablehlo.OptimizationBarrierOp([counter]).operation
    op.attributes[MARKER_ATTR] = ir.StringAttr.get(LOOP_MARKER)
    op.attributes[LOOP_NUM_MICROBATCHES_ATTR] = _i64(num_microbatches)
    if schedule is not None:
        op.attributes[SCHEDULE_ATTR] = record_attr(schedule)
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


def loop_schedule(op: ir.Operation | ir.OpView) -> dict[str, Any] | str | None:
    """The schedule recorded on a loop marker or a ``jaxpp.loop``: its record, the text
    an older version wrote (decoded by ``schedules.record``), or None when none."""
    op = _operation(op)
    if op.name == CUSTOM_CALL_OP:
        return _frontend_attribute(op, SCHEDULE_ATTR) or None
    attr = op.attributes[SCHEDULE_ATTR] if SCHEDULE_ATTR in op.attributes else None
    if isinstance(attr, ir.DictAttr):
        return attr_record(attr)
    if isinstance(attr, ir.StringAttr):
        return attr.value or None
    return None


def set_loop_schedule(op: ir.Operation | ir.OpView, schedule: Mapping[str, Any] | str) -> None:
    """Records ``schedule`` (a record, or an older version's text) on a ``jaxpp.loop``."""
    attr = ir.StringAttr.get(schedule) if isinstance(schedule, str) else record_attr(schedule)
    _operation(op).attributes[SCHEDULE_ATTR] = attr


def clear_loop_schedule(op: ir.Operation | ir.OpView) -> None:
    attributes = _operation(op).attributes
    if SCHEDULE_ATTR in attributes:
        del attributes[SCHEDULE_ATTR]


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
