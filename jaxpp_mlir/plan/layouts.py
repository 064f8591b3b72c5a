"""Boundary layouts for the plan: each stage input's and output's ``sdy.sharding`` as data.

``with_layouts`` gives each ``TensorSpec`` of an executable the ``Layout`` its
``sdy.sharding`` fixes. A layout XLA is free to choose (no sharding, an open
dimension, a sub-axis, a mesh with explicit device ids) stays unknown (None).
``with_receive_layouts`` gives each received value the layout it is read (or sent)
in, so every value sent between ranks of a sharded step has its layout in the plan.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from jax.interpreters.mlir import ir

from jaxpp_mlir._jax_compat import sdy
from jaxpp_mlir.runtime import plan as rt
from jaxpp_mlir.runtime.instructions import receive, run, send
from jaxpp_mlir.runtime.instructions.receive import Recv


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
    result = []
    for spec, sharding in zip(specs, shardings, strict=True):
        layout = None if sharding is None else layout_of(sharding, meshes)
        if layout is not None or spec.layout is not None:
            spec = dataclasses.replace(spec, layout=layout)
        result.append(spec)
    return tuple(result)


def with_receive_layouts(
    instructions: Sequence[rt.Instruction], executables: Mapping[str, rt.StageExecutable]
) -> list[rt.Instruction]:
    """``instructions``, each receive's spec with the layout its value has on the
    receiving rank: its first reader's input layout there, else the layout it is sent in
    (its producer's output layout on the sender, else its first reader's there)."""
    if not any(
        spec.layout is not None
        for stage in executables.values()
        for spec in (*stage.input_specs, *stage.output_specs)
    ):
        return list(instructions)  # no sharded stage: nothing to give
    produced: dict[tuple[int, int], rt.Layout | None] = {}
    read: dict[tuple[int, int], rt.Layout | None] = {}
    sent: dict[int, tuple[int, int]] = {}  # channel -> (sender, value)
    for inst in instructions:
        if inst.kind == run.KIND:
            stage = executables[inst.executable]
            for value, spec in zip(inst.inputs, stage.input_specs, strict=True):
                read.setdefault((inst.rank, value), spec.layout)
            for value, spec in zip(inst.outputs, stage.output_specs, strict=True):
                produced[(inst.rank, value)] = spec.layout
        elif inst.kind == send.KIND:
            sent[inst.channel] = (inst.rank, inst.value)
    specs: dict[tuple[rt.TensorSpec, rt.Layout], rt.TensorSpec] = {}
    result: list[rt.Instruction] = []
    for inst in instructions:
        if inst.kind == receive.KIND and inst.spec.layout is None:
            layout = read.get((inst.rank, inst.value))
            if layout is None and inst.channel in sent:
                sender = sent[inst.channel]
                layout = produced.get(sender) or read.get(sender)
            if layout is not None:
                key = (inst.spec, layout)
                if key not in specs:
                    specs[key] = dataclasses.replace(inst.spec, layout=layout)
                inst = Recv(inst.rank, inst.peer, inst.channel, inst.value, specs[key])
        result.append(inst)
    return result
