"""Every ``jaxpp.*`` attribute the dialect knows, with its kind and range: one closed table.

``problem(op_name, name, attr)`` says what is wrong with the attribute ``name`` (a
``jaxpp.*`` name) holding ``attr`` on an op named ``op_name``, or None: an unknown name,
a value of another kind (``jaxpp.marker = 1 : i64``) or out of range
(``jaxpp.marker = "fwdx"``, ``jaxpp.stage = -1 : i64``), or a known attribute on an op
that never carries it (``jaxpp.marker`` on anything but an optimization barrier).
``frontend_problem`` does the same for the ``jaxpp.*`` entries of a saved custom-call
marker's ``mhlo.frontend_attributes``, which are all strings.

jaxpp-check-attributes runs these on every op of a module before any pass reads them,
so that the accessors of ``dialect.ops`` and ``dialect.markers`` read values of the
kind they expect.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable

from jax.interpreters.mlir import ir

from jaxpp_mlir.dialect import vocabulary as v
from jaxpp_mlir.dialect.records import attr_record
from jaxpp_mlir.runtime import records

PREFIX = "jaxpp."


@records.frozen
class AttributeKind:
    """What an attribute holds: ``expected`` in words, ``accepts`` the test of a value,
    ``ops`` the only ops that may carry it (empty: any)."""

    expected: str
    accepts: Callable[[ir.Attribute], bool]
    ops: tuple[str, ...] = ()


def _string(*choices: str) -> Callable[[ir.Attribute], bool]:
    def accepts(attr: ir.Attribute) -> bool:
        return isinstance(attr, ir.StringAttr) and (not choices or attr.value in choices)

    return accepts


def _int(minimum: int) -> Callable[[ir.Attribute], bool]:
    def accepts(attr: ir.Attribute) -> bool:
        return (
            isinstance(attr, ir.IntegerAttr)
            and not isinstance(attr, ir.BoolAttr)
            and attr.value >= minimum
        )

    return accepts


def _ints(minimum: int) -> Callable[[ir.Attribute], bool]:
    def accepts(attr: ir.Attribute) -> bool:
        if isinstance(attr, ir.DenseI64ArrayAttr):
            return all(value >= minimum for value in attr)
        return isinstance(attr, ir.ArrayAttr) and all(_int(minimum)(item) for item in attr)

    return accepts


def _record(attr: ir.Attribute) -> bool:
    if not isinstance(attr, ir.DictAttr):
        return False
    try:
        attr_record(attr)
    except TypeError:
        return False
    return True


def _schedule(attr: ir.Attribute) -> bool:
    # A record; modules lowered before schedules became records carry its text.
    return isinstance(attr, ir.StringAttr) or _record(attr)


_REDUCTION = re.compile(r"add|max|concat\(-?[0-9]+\)")


def _reductions(attr: ir.Attribute) -> bool:
    if not isinstance(attr, ir.StringAttr):
        return False
    return not attr.value or all(_REDUCTION.fullmatch(part) for part in attr.value.split(","))


def _unit(attr: ir.Attribute) -> bool:
    return isinstance(attr, ir.UnitAttr)


def _for_task(attr: ir.Attribute) -> bool:
    if not isinstance(attr, ir.ArrayAttr) or len(attr) != 2:
        return False
    stage, kind = attr
    return _int(0)(stage) and _string(*v.KINDS)(kind)


def _segment_range(attr: ir.Attribute) -> bool:
    # Written as array<i64: first, count> (dialect.ops.set_segment_range).
    return (
        isinstance(attr, ir.DenseI64ArrayAttr)
        and _ints(0)(attr)
        and len(attr) == 2
        and (list(attr)[1] >= 1)
    )


def _stage_rows(attr: ir.Attribute) -> bool:
    # Written as array<i64: stage, first, count, ...> (dialect.ops.set_stage_rows).
    return (
        isinstance(attr, ir.DenseI64ArrayAttr)
        and _ints(0)(attr)
        and (len(attr) > 0 and len(attr) % 3 == 0)
    )


def _strings(attr: ir.Attribute) -> bool:
    return isinstance(attr, ir.ArrayAttr) and all(_string()(item) for item in attr)


_TASK_KINDS = (*v.KINDS, v.PRE, v.POST)
_INDEX = AttributeKind("an integer of at least 0", _int(0))
_COUNT = AttributeKind("an integer of at least 1", _int(1))
_INDICES = AttributeKind("an array of integers of at least 0", _ints(0))

#: Every ``jaxpp.*`` attribute of an op, by name.
ATTRIBUTES: dict[str, AttributeKind] = {
    v.MARKER_ATTR: AttributeKind(
        f"a string: '{v.FORWARD}' or '{v.BACKWARD}' (a stage marker) or '{v.LOOP_MARKER}' "
        "(treduce's loop marker)",
        _string(v.FORWARD, v.BACKWARD, v.LOOP_MARKER),
        ops=(v.MARKER_OP,),
    ),
    v.STAGE_NAME_ATTR: AttributeKind("a string (the stage's name)", _string()),
    v.LOOP_NUM_MICROBATCHES_ATTR: _COUNT,
    v.SCHEDULE_ATTR: AttributeKind("a schedule record (a dictionary)", _schedule),
    v.LOOP_REDUCTIONS_ATTR: AttributeKind(
        "a string of comma-separated reductions (add, max, concat(AXIS))", _reductions
    ),
    v.LOOP_STAGE_MARKERS_ATTR: AttributeKind("a string (marker source lines)", _string()),
    v.SEGMENT_ATTR: _INDEX,
    v.SEGMENTS_ATTR: AttributeKind(
        "[first, count]: the segments a loop of layers covers (integers, count at least 1)",
        _segment_range,
    ),
    v.STAGE_ROWS_ATTR: AttributeKind(
        "[stage, first, count, ...]: integers of at least 0, three per stage", _stage_rows
    ),
    v.SEGMENTER_ATTR: AttributeKind("a string (the segmenter's pass name)", _string()),
    v.SEGMENT_STARTS_ATTR: AttributeKind(
        "an array of strings (the module paths where segments start)", _strings
    ),
    v.STAGE_ATTR: _INDEX,
    v.KIND_ATTR: AttributeKind(
        f"a string: {', '.join(repr(k) for k in _TASK_KINDS)}", _string(*_TASK_KINDS)
    ),
    v.RANK_ATTR: _INDEX,
    v.PEER_ATTR: _INDEX,
    v.CHANNEL_ATTR: _INDEX,
    v.RANKS_ATTR: _INDICES,
    v.STATE_RANKS_ATTR: _INDICES,
    v.FOR_TASK_ATTR: AttributeKind("[stage, kind]: an integer and a task kind", _for_task),
    v.CHUNK_START_ATTR: _INDEX,
    v.CHUNK_ROWS_ATTR: _COUNT,
    v.NUM_SEGMENTS_ATTR: _COUNT,
    v.NUM_STAGES_ATTR: _COUNT,
    v.NUM_RANKS_ATTR: _COUNT,
    v.STAGE_SPLIT_ATTR: AttributeKind("an array of integers of at least 1", _ints(1)),
    v.STAGE_ESTIMATE_ATTR: AttributeKind("an estimate record (a dictionary)", _record),
    v.CALLS_INLINED_ATTR: AttributeKind("a unit attribute", _unit),
}

_DIGITS = re.compile(r"[0-9]+")

#: The ``jaxpp.*`` entries of a saved custom-call marker's ``mhlo.frontend_attributes``.
FRONTEND_ATTRIBUTES: dict[str, AttributeKind] = {
    v.DIRECTION_ATTR: AttributeKind(
        f"the string '{v.FORWARD}' or '{v.BACKWARD}'", _string(v.FORWARD, v.BACKWARD)
    ),
    v.STAGE_NAME_ATTR: AttributeKind("a string (the stage's name)", _string()),
    v.LOOP_NUM_MICROBATCHES_ATTR: AttributeKind(
        "a string of digits (at least 1)",
        lambda a: _string()(a) and bool(_DIGITS.fullmatch(a.value)) and int(a.value) >= 1,
    ),
    v.SCHEDULE_ATTR: AttributeKind("a string (the schedule's text)", _string()),
    v.LOOP_REDUCTIONS_ATTR: ATTRIBUTES[v.LOOP_REDUCTIONS_ATTR],
    v.LOOP_STAGE_MARKERS_ATTR: ATTRIBUTES[v.LOOP_STAGE_MARKERS_ATTR],
}


def problem(op_name: str, name: str, attr: ir.Attribute) -> str | None:
    """What is wrong with ``name = attr`` on an op named ``op_name`` (None: nothing)."""
    return _problem(ATTRIBUTES, op_name, name, attr, "")


def frontend_problem(op_name: str, name: str, attr: ir.Attribute) -> str | None:
    """The same for an entry of ``mhlo.frontend_attributes``."""
    return _problem(FRONTEND_ATTRIBUTES, op_name, name, attr, " among its frontend attributes")


def _problem(
    table: dict[str, AttributeKind], op_name: str, name: str, attr: ir.Attribute, where: str
) -> str | None:
    kind = table.get(name)
    if kind is None:
        close = difflib.get_close_matches(name, table, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        return (
            f"unknown attribute '{name}' on '{op_name}'{where}{hint}: jaxpp_mlir knows "
            f"{', '.join(table)}; remove it, or give it one of those names"
        )
    if kind.ops and op_name not in kind.ops:
        return (
            f"attribute '{name}' on '{op_name}': only {' or '.join(kind.ops)} carries it; remove it"
        )
    if not kind.accepts(attr):
        return f"attribute '{name}' on '{op_name}'{where} must be {kind.expected}, got {attr}"
    return None
