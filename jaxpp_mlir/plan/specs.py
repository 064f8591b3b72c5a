"""Tensor specs of MLIR values, read through the runtime's one dtype table."""

from __future__ import annotations

from collections.abc import Iterable

from jax.interpreters.mlir import ir

from jaxpp_mlir.errors import PartitionError
from jaxpp_mlir.runtime import dtypes
from jaxpp_mlir.runtime.plan import TensorSpec


def tensor_spec(value_type: ir.Type) -> TensorSpec:
    tensor = ir.RankedTensorType(value_type)
    return TensorSpec(tuple(tensor.shape), dtype_name(tensor.element_type))


class TensorSpecs:
    """``tensor_spec`` of each type read once: a plan's values have few distinct types,
    and MLIR uniques types, so equal types are one key. One per plan (types belong to
    the plan's context)."""

    def __init__(self) -> None:
        self._by_type: dict[ir.Type, TensorSpec] = {}

    def __call__(self, value_type: ir.Type) -> TensorSpec:
        spec = self._by_type.get(value_type)
        if spec is None:
            spec = self._by_type[value_type] = tensor_spec(value_type)
        return spec

    def all(self, types: Iterable[ir.Type]) -> tuple[TensorSpec, ...]:
        """The spec of each of ``types``."""
        return tuple(map(self, types))


def dtype_name(element_type: ir.Type) -> str:
    """The numpy dtype name of an MLIR element type; ``PartitionError`` if unsupported."""
    name = dtypes.dtype_name(str(element_type))
    if name is None:
        raise PartitionError(f"unsupported element type {element_type}")
    return name


def argument_name(argument: ir.Value) -> str:
    """The path jax's lowering names an argument of ``@main`` with (``params['w'][0]``)."""
    location = ir.Location.from_attr(argument.location.attr)
    return location.name_str if isinstance(location, ir.NameLoc) else ""
