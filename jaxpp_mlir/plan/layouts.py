"""Boundary layouts for the plan: each stage input's and output's ``sdy.sharding`` as data.

``with_layouts`` gives each ``TensorSpec`` of an executable the ``Layout`` its
``sdy.sharding`` fixes. A layout XLA is free to choose (no sharding, an open
dimension, a sub-axis, a mesh with explicit device ids) stays unknown (None).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from jax.extend.mlir import ir
from jax.extend.mlir.dialects import sdy

from jaxpp_mlir.runtime import plan as rt


def mesh_axes(module: ir.Module) -> dict[str, tuple[tuple[str, int], ...] | None]:
    """Each ``sdy.mesh`` of ``module`` by name: its axes, or None for explicit device ids."""
    meshes: dict[str, tuple[tuple[str, int], ...] | None] = {}
    for op in module.body.operations:
        if op.operation.name != "sdy.mesh":
            continue
        mesh = sdy.MeshAttr(op.operation.attributes["mesh"])
        axes = tuple((axis.name, axis.size) for axis in map(sdy.MeshAxisAttr, mesh.axes))
        name = ir.StringAttr(op.operation.attributes["sym_name"]).value
        meshes[name] = None if len(mesh.device_ids) else axes
    return meshes


def layout_of(
    attribute: ir.Attribute | None, meshes: dict[str, tuple[tuple[str, int], ...] | None]
) -> rt.Layout | None:
    """The layout an ``sdy.sharding`` fixes, or None where XLA may choose."""
    if attribute is None:
        return None
    sharding = sdy.TensorShardingAttr(attribute)
    mesh = sharding.mesh_or_ref
    if not isinstance(mesh, ir.FlatSymbolRefAttr):
        return None
    axes = meshes.get(mesh.value)
    if not axes:
        return None
    dims = []
    for dimension in map(sdy.DimensionShardingAttr, sharding.dimension_shardings):
        refs = [sdy.AxisRefAttr(a) for a in dimension.axes]
        if not dimension.is_closed or any(r.sub_axis_info is not None for r in refs):
            return None
        dims.append(tuple(r.name for r in refs))
    return rt.Layout(axes, tuple(dims))


def with_layouts(
    specs: Sequence[rt.TensorSpec],
    shardings: Sequence[ir.Attribute | None],
    meshes: dict[str, tuple[tuple[str, int], ...] | None],
) -> tuple[rt.TensorSpec, ...]:
    """``specs``, each with the layout of its ``sdy.sharding``."""
    return tuple(
        dataclasses.replace(spec, layout=layout_of(sharding, meshes))
        for spec, sharding in zip(specs, shardings, strict=True)
    )
