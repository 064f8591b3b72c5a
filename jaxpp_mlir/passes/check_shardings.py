"""jaxpp-check-shardings: the step's mesh and shardings fit the MPMD mesh."""

from __future__ import annotations

import dataclasses
import math

from jax.interpreters.mlir import ir

from jaxpp_mlir import diagnostics
from jaxpp_mlir._jax_compat import sdy
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.passes import shardings
from jaxpp_mlir.passes.base import UNCHANGED, ModulePass, Unchanged, register_pass
from jaxpp_mlir.runtime import records


@register_pass
@records.frozen
class CheckShardings(ModulePass):
    """Check that the step was lowered on the lowering mesh and shards within a stage only.

    A step runs SPMD inside each stage's submesh, so it must be lowered on the
    lowering mesh (``MpmdMesh.lowering_mesh()``: the mpmd axis of size 1, the
    other axes those of one submesh), and no sharding may name the mpmd axis,
    except a ``with_sharding_constraint`` inside the step (JaxPP accepts one
    such as ``P(("stage", "fsdp"))``): the axis has size 1 there, so it is
    dropped from the constraint, which shards the same way without it.

    Precondition: none; a module without an ``sdy.mesh`` passes unchanged.
    Postcondition: no ``sdy.sharding_constraint`` names the mpmd axis; nothing
    else changed; a violation fails with an error at the mesh or at the op
    whose sharding names the mpmd axis.
    """

    name = "jaxpp-check-shardings"
    mpmd_axis: str = dataclasses.field(
        default="", metadata={"help": "name of the mpmd axis ('' skips the axis checks)"}
    )
    submesh_size: int = dataclasses.field(
        default=0, metadata={"help": "devices per submesh (0: not checked)", "min": 0}
    )

    def run(self, module: ir.Operation) -> Unchanged | None:
        self._check_meshes(module)
        if self.mpmd_axis and self._check_shardings(ir_utils.get_main(module)):
            return None
        return UNCHANGED

    def _check_meshes(self, module: ir.Operation) -> None:
        for mesh in shardings.mesh_ops(module):
            axes = dict(shardings.mesh_axes(mesh))
            if not axes:  # a maximal mesh (one device, e.g. for jax.debug.print): no SPMD
                continue
            if self.mpmd_axis and axes.get(self.mpmd_axis, 1) != 1:
                where, user = _first_user(module, mesh)
                raise diagnostics.error(
                    where,
                    f"the step was lowered on a mesh whose mpmd axis '{self.mpmd_axis}' has "
                    f"size {axes[self.mpmd_axis]}{user}: lower it on "
                    "mpmd_mesh.lowering_mesh(), where that axis has size 1",
                )
            size = math.prod(axes.values())
            if self.submesh_size and size != self.submesh_size:
                where, user = _first_user(module, mesh)
                raise diagnostics.error(
                    where,
                    f"the step's mesh has {size} devices{user} but each submesh has "
                    f"{self.submesh_size}: lower it on mpmd_mesh.lowering_mesh()",
                )

    def _check_shardings(self, main: ir.Operation) -> bool:
        """Checks every sharding in ``main``; True if a constraint lost the mpmd axis."""
        rewritten = False
        for what, sharding in _boundary_shardings(main):
            if self.mpmd_axis in _sharding_axes(sharding):
                raise diagnostics.error(
                    diagnostics.step_call_location(main, what),
                    f"the sharding of {what} names the mpmd axis '{self.mpmd_axis}': shard "
                    "the step's arguments and results over the other mesh axes only (the "
                    "mpmd axis separates the stages)",
                )
        for op in ir_utils.walk(main):
            attributes = op.attributes
            if op.name == "sdy.sharding_constraint":
                sharding = attributes["sharding"]
                kept = self._without_mpmd_axis(sharding)
                if kept != sharding:
                    attributes["sharding"] = kept
                    rewritten = True
                continue
            if not len(attributes):
                continue
            for name in (shardings.SHARDING_ATTR, "sharding", "in_shardings", "out_shardings"):
                if name not in attributes:
                    continue
                attr = attributes[name]
                if sdy.TensorShardingPerValueAttr.isinstance(attr):
                    for sharding in sdy.TensorShardingPerValueAttr(attr).shardings:
                        self._check(op, sharding)
                elif sdy.TensorShardingAttr.isinstance(attr):
                    self._check(op, attr)
        return rewritten

    def _check(self, op: ir.Operation, sharding: ir.Attribute) -> None:
        if self.mpmd_axis in _sharding_axes(sharding):
            raise diagnostics.error(op, self._message(op))

    def _without_mpmd_axis(self, sharding: ir.Attribute) -> ir.Attribute:
        """``sharding`` without the mpmd axis (size 1 in the mesh, checked before)."""
        sharding = sdy.TensorShardingAttr(sharding)

        def kept(axes) -> list[ir.Attribute]:
            return [a for a in axes if sdy.AxisRefAttr(a).name != self.mpmd_axis]

        dims = []
        for dim in sharding.dimension_shardings:
            dim = sdy.DimensionShardingAttr(dim)
            dims.append(sdy.DimensionShardingAttr.get(kept(dim.axes), dim.is_closed, dim.priority))
        return sdy.TensorShardingAttr.get(
            sharding.mesh_or_ref,
            dims,
            kept(sharding.replicated_axes),
            kept(sharding.unreduced_axes),
        )

    def _message(self, op: ir.Operation) -> str:
        return (
            f"the sharding of '{op.name}' names the mpmd axis '{self.mpmd_axis}': inside a "
            "stage, shard over the other mesh axes only (the mpmd axis separates the stages)"
        )


def _axes(dimension: ir.Attribute) -> list[str]:
    return [sdy.AxisRefAttr(a).name for a in sdy.DimensionShardingAttr(dimension).axes]


def _sharding_axes(sharding: ir.Attribute) -> list[str]:
    sharding = sdy.TensorShardingAttr(sharding)
    axes = [axis for dim in sharding.dimension_shardings for axis in _axes(dim)]
    return axes + [sdy.AxisRefAttr(a).name for a in sharding.replicated_axes]


def _boundary_shardings(main: ir.Operation) -> list[tuple[str, ir.Attribute]]:
    """The shardings of ``main``'s arguments and results, each with what it shards as the
    user wrote it (``argument 'params[0]'``, ``result[1]``: JAX's names)."""
    found = []
    entry = main.regions[0].blocks[0]
    for attrs_name, kind in (("arg_attrs", "argument"), ("res_attrs", "result")):
        if attrs_name not in main.attributes:
            continue
        for index, attrs in enumerate(ir.ArrayAttr(main.attributes[attrs_name])):
            attrs = ir.DictAttr(attrs)
            if shardings.SHARDING_ATTR not in attrs:
                continue
            if kind == "argument":
                name = _location_name(entry.arguments[index].location)
                what = f"argument {index}" + (f" ('{name}')" if name else "")
            elif "jax.result_info" in attrs:
                what = f"result {index} ('{ir.StringAttr(attrs['jax.result_info']).value}')"
            else:
                what = f"result {index}"
            found.append((what, attrs[shardings.SHARDING_ATTR]))
    return found


def _location_name(location: ir.Location) -> str | None:
    location = ir.Location.from_attr(location.attr)
    return location.name_str if isinstance(location, ir.NameLoc) else None


def _mesh_of(sharding: ir.Attribute) -> str | None:
    mesh = sdy.TensorShardingAttr(sharding).mesh_or_ref
    return ir.FlatSymbolRefAttr(mesh).value if isinstance(mesh, ir.FlatSymbolRefAttr) else None


def _first_user(module: ir.Operation, mesh: ir.Operation) -> tuple[ir.Location, str]:
    """Where the step first shards a value over ``mesh`` (an argument or result of the
    step, else an op), and those words for the message ('' if nothing does)."""
    name = ir.StringAttr(mesh.attributes["sym_name"]).value
    main = ir_utils.get_main(module)
    for what, sharding in _boundary_shardings(main):
        if _mesh_of(sharding) == name:
            return diagnostics.step_call_location(main, what), f" ({what} is sharded over it)"
    for op in ir_utils.walk(main):
        for attr_name in ("sharding", shardings.SHARDING_ATTR):
            if attr_name not in op.attributes:
                continue
            attr = op.attributes[attr_name]
            values = (
                sdy.TensorShardingPerValueAttr(attr).shardings
                if sdy.TensorShardingPerValueAttr.isinstance(attr)
                else [attr]
            )
            if any(_mesh_of(sharding) == name for sharding in values):
                return op.location, f" ('{op.name}' is sharded over it)"
    return mesh.location, ""
