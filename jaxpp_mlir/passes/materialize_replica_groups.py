"""jaxpp-materialize-replica-groups: mesh-axis replica groups as explicit device groups."""

from __future__ import annotations

import numpy as np
from jax.interpreters.mlir import ir

from jaxpp_mlir import diagnostics
from jaxpp_mlir._jax_compat import sdy, stablehlo
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.passes.base import UNCHANGED, Evidence, ModulePass, Unchanged, register_pass
from jaxpp_mlir.runtime import records

_ATTR = "replica_groups"


@register_pass
@records.frozen
class MaterializeReplicaGroups(ModulePass):
    """Rewrite ``#stablehlo.replica_group_mesh_axes`` into dense ``replica_groups``.

    JAX (0.11 and later) lowers a collective inside ``shard_map``
    (``all_to_all``, ``all_gather``, ``psum``...) with replica groups that name
    mesh axes of an ``sdy.mesh`` symbol. The symbol is looked up from the
    collective through its enclosing ops, which fails once the collective sits
    inside ``jaxpp.loop`` (an op of no registered dialect holding one region,
    which MLIR treats as a possible symbol table of unknown contents). The
    groups are therefore written out as device ids, as JAX wrote them before:
    the devices of the mesh (its ``device_ids``, else 0..n-1 in mesh order)
    that differ only along the named axes form one group, ordered by those
    axes in the order named.

    Precondition: every mesh the groups name is a top-level ``sdy.mesh``.
    Postcondition: no op has a ``replica_groups`` attribute that names mesh
    axes; a group naming a sub-axis (``"x":(1)2``) or an unknown mesh or axis
    fails with a located error.
    """

    name = "jaxpp-materialize-replica-groups"

    @classmethod
    def unfinished(cls, module: ir.Operation) -> Evidence | None:
        for op in ir_utils.walk(module):
            if _mesh_axes_groups(op) is not None:
                return Evidence(op, "a collective still names mesh axes in its replica groups")
        return None

    def run(self, module: ir.Operation) -> Unchanged | None:
        meshes = _meshes(module)
        materialized = False
        for op in ir_utils.walk(module):
            groups = _mesh_axes_groups(op)
            if groups is None:
                continue
            name = groups.mesh.value
            if name not in meshes:
                raise diagnostics.error(
                    op, f"the replica groups name mesh @{name}, which the module does not define"
                )
            op.attributes[_ATTR] = ir.DenseIntElementsAttr.get(
                _device_groups(op, meshes[name], groups)
            )
            materialized = True
        return None if materialized else UNCHANGED


def _mesh_axes_groups(op: ir.Operation) -> stablehlo.ReplicaGroupMeshAxesAttr | None:
    if _ATTR not in op.attributes:
        return None
    attr = op.attributes[_ATTR]
    if not stablehlo.ReplicaGroupMeshAxesAttr.isinstance(attr):
        return None
    return stablehlo.ReplicaGroupMeshAxesAttr(attr)


def _meshes(module: ir.Operation) -> dict[str, sdy.MeshAttr]:
    """The module's ``sdy.mesh`` symbols by name."""
    found = {}
    for op in module.regions[0].blocks[0].operations:
        op = op.operation
        if op.name == "sdy.mesh":
            found[ir.StringAttr(op.attributes["sym_name"]).value] = sdy.MeshAttr(
                op.attributes["mesh"]
            )
    return found


def _device_groups(
    op: ir.Operation, mesh: sdy.MeshAttr, groups: stablehlo.ReplicaGroupMeshAxesAttr
) -> np.ndarray:
    """[number of groups, group size] device ids of the devices that differ only along the
    named axes of ``mesh``."""
    axes = [sdy.MeshAxisAttr(a) for a in mesh.axes]
    names, sizes = [a.name for a in axes], [a.size for a in axes]
    ids = np.array(list(mesh.device_ids), dtype=np.int64)
    if ids.size == 0:
        ids = np.arange(int(np.prod(sizes, dtype=np.int64)), dtype=np.int64)
    ids = ids.reshape(sizes)
    grouped = []
    for ref in groups.axes:
        ref = stablehlo.AxisRefAttr(ref)
        if ref.sub_axis_info is not None:
            raise diagnostics.error(
                op, f"replica groups over a sub-axis of '{ref.name}' are not supported"
            )
        if ref.name not in names:
            raise diagnostics.error(
                op, f"the replica groups name axis '{ref.name}', which the mesh lacks ({names})"
            )
        grouped.append(names.index(ref.name))
    order = [i for i in range(len(names)) if i not in grouped] + grouped
    size = int(np.prod([sizes[i] for i in grouped], dtype=np.int64))
    return np.ascontiguousarray(ids.transpose(order).reshape(-1, size))
