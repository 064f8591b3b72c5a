"""Shardy shardings of values, read and written through the sdy Python bindings.

A helper for the passes, not a pass. After Shardy propagation every op result
carries ``sdy.sharding = #sdy.sharding_per_value<[...]>``; function arguments
and results carry ``sdy.sharding`` in their ``arg_attrs``/``res_attrs``.
"""

from __future__ import annotations

from collections.abc import Sequence

from jax.interpreters.mlir import ir

from jaxpp_mlir._jax_compat import sdy
from jaxpp_mlir.dialect.vocabulary import SHARDING_ATTR
from jaxpp_mlir.ir import utils as ir_utils


def mesh_ops(module: ir.Operation) -> list[ir.Operation]:
    """The ``sdy.mesh`` symbols of ``module`` (empty for an unsharded module)."""
    return [
        op.operation
        for op in module.regions[0].blocks[0].operations
        if op.operation.name == "sdy.mesh"
    ]


def mesh_name(module: ir.Operation) -> str | None:
    meshes = mesh_ops(module)
    return ir.StringAttr(meshes[0].attributes["sym_name"]).value if meshes else None


def mesh_axes(mesh_op: ir.Operation) -> list[tuple[str, int]]:
    mesh = sdy.MeshAttr(mesh_op.attributes["mesh"])
    return [(sdy.MeshAxisAttr(a).name, sdy.MeshAxisAttr(a).size) for a in mesh.axes]


def replicated(mesh: str, rank: int) -> ir.Attribute:
    dims = [sdy.DimensionShardingAttr.get([], is_closed=True) for _ in range(rank)]
    return sdy.TensorShardingAttr.get(mesh, dims)


def value_sharding(value: ir.Value) -> ir.Attribute | None:
    """The sharding Shardy gave ``value``, if any."""
    if isinstance(value, ir.OpResult):
        owner = ir_utils.defining_op(value)
        if owner.name in ("sdy.sharding_constraint", "sdy.reshard"):
            return owner.attributes["sharding"]  # the sharding the op imposes on its result
        if SHARDING_ATTR not in owner.attributes:
            return None
        per_value = sdy.TensorShardingPerValueAttr(owner.attributes[SHARDING_ATTR])
        return per_value.shardings[value.result_number]
    owner_op = value.owner.owner if isinstance(value, ir.BlockArgument) else None
    owner_op = owner_op.operation if isinstance(owner_op, ir.OpView) else owner_op
    if owner_op is None:
        return None
    if owner_op.name == "func.func":
        return _func_arg_sharding(owner_op, value.arg_number)
    if SHARDING_ATTR in owner_op.attributes:  # a loop: block args mirror the op's results
        shardings = sdy.TensorShardingPerValueAttr(owner_op.attributes[SHARDING_ATTR]).shardings
        offset = len(list(value.owner.arguments)) - len(shardings)
        if value.arg_number >= offset:
            return shardings[value.arg_number - offset]
    return None


def set_result_shardings(op: ir.Operation, shardings: Sequence[ir.Attribute]) -> None:
    op.attributes[SHARDING_ATTR] = sdy.TensorShardingPerValueAttr.get(list(shardings))


def set_function_shardings(
    function: ir.Operation, arguments: Sequence[ir.Attribute], results: Sequence[ir.Attribute]
) -> None:
    function.attributes["arg_attrs"] = ir.ArrayAttr.get(
        [ir.DictAttr.get({SHARDING_ATTR: s}) for s in arguments]
    )
    function.attributes["res_attrs"] = ir.ArrayAttr.get(
        [ir.DictAttr.get({SHARDING_ATTR: s}) for s in results]
    )


def closed(sharding: ir.Attribute) -> ir.Attribute:
    """``sharding`` with every dimension closed: a definite sharding for a stage boundary."""
    sharding = sdy.TensorShardingAttr(sharding)
    dims = [
        sdy.DimensionShardingAttr.get(sdy.DimensionShardingAttr(d).axes, is_closed=True)
        for d in sharding.dimension_shardings
    ]
    return sdy.TensorShardingAttr.get(
        sharding.mesh_or_ref, dims, list(sharding.replicated_axes), list(sharding.unreduced_axes)
    )


def shardings_or_replicated(
    module: ir.Operation, values: Sequence[ir.Value]
) -> list[ir.Attribute] | None:
    """Each value's sharding (replicated where Shardy left none); None without a mesh."""
    mesh = mesh_name(module)
    if mesh is None:
        return None
    result = []
    for value in values:
        sharding = value_sharding(value)
        if sharding is None:
            sharding = replicated(mesh, len(ir.RankedTensorType(value.type).shape))
        result.append(closed(sharding))
    return result


def _func_arg_sharding(function: ir.Operation, index: int) -> ir.Attribute | None:
    if "arg_attrs" not in function.attributes:
        return None
    attrs = ir.DictAttr(ir.ArrayAttr(function.attributes["arg_attrs"])[index])
    return attrs[SHARDING_ATTR] if SHARDING_ATTR in attrs else None
