"""Plain data as MLIR attributes: dictionaries the jaxpp attributes carry, and back.

A record (``schedules.record``, a stage split's estimate) is a ``dict`` of bools, ints,
floats, strs, tuples and dicts; it is written as a ``DictionaryAttr`` of ``BoolAttr``,
``i64`` ``IntegerAttr``, ``f64`` ``FloatAttr``, ``StringAttr``, ``ArrayAttr`` and
nested ``DictionaryAttr`` (``{kind = "Std1F1B", num_stages = 4 : i64}``), and read back
as the same record (tuples for arrays).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jax.interpreters.mlir import ir

from jaxpp_mlir.dialect.op_access import as_operation as _operation
from jaxpp_mlir.dialect.op_access import i64_attr as _i64


def record_attr(value: Any) -> ir.Attribute:
    """``value`` (a record, or one of its entries) as an attribute (see the module doc)."""
    if isinstance(value, bool):
        return ir.BoolAttr.get(value)
    if isinstance(value, int):
        return _i64(value)
    if isinstance(value, float):
        return ir.FloatAttr.get_f64(value)
    if isinstance(value, str):
        return ir.StringAttr.get(value)
    if isinstance(value, (tuple, list)):
        return ir.ArrayAttr.get([record_attr(item) for item in value])
    if isinstance(value, Mapping):
        return ir.DictAttr.get({str(key): record_attr(item) for key, item in value.items()})
    raise TypeError(f"a record holds bools, ints, floats, strs, tuples and dicts, got {value!r}")


def attr_record(attr: ir.Attribute) -> Any:
    """The record (or entry) an attribute written by ``record_attr`` holds."""
    if isinstance(attr, ir.BoolAttr):
        return attr.value
    if isinstance(attr, ir.IntegerAttr):
        return attr.value
    if isinstance(attr, ir.FloatAttr):
        return attr.value
    if isinstance(attr, ir.StringAttr):
        return attr.value
    if isinstance(attr, ir.ArrayAttr):
        return tuple(attr_record(item) for item in attr)
    if isinstance(attr, ir.DictAttr):
        return {named.name: attr_record(named.attr) for named in attr}
    raise TypeError(f"not an attribute of a record: {attr}")


def parse_record(text: str) -> Any:
    """The record MLIR attribute text holds (``{kind = "GPipe"}``), in the current context;
    a ``ValueError`` naming the text if it does not parse as one."""
    try:
        attr = ir.Attribute.parse(text)
    except ir.MLIRError as error:
        raise ValueError(f"{text!r} is not an MLIR attribute: {error}") from None
    try:
        return attr_record(attr)
    except TypeError as error:
        raise ValueError(f"{text!r} is not a record: {error}") from None


def record_text(record: Mapping[str, Any]) -> str:
    """``record`` as MLIR attribute text (needs a current context)."""
    return str(record_attr(record))


def get_record(op: ir.Operation | ir.OpView, name: str) -> Any:
    """The record attribute ``name`` of ``op`` (None when absent)."""
    attributes = _operation(op).attributes
    return attr_record(attributes[name]) if name in attributes else None


def set_record(op: ir.Operation | ir.OpView, name: str, record: Any) -> None:
    _operation(op).attributes[name] = record_attr(record)
