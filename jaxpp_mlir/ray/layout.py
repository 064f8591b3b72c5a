"""Where a driver's mesh lands on the workers: its shape travels, not its devices.

The driver lowers and partitions over a mesh of its own devices; only the mesh's
shape and axis names matter to the plan. The workers rebuild the mesh from
their global device list as ``jaxpp_mlir.launch.pipeline_devices`` lays it
out: ranks spread evenly over the workers, in order, each rank's devices in
one worker.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from jaxpp_mlir.runtime import records


@records.frozen
class MeshLayout:
    axis_names: tuple[str, ...]
    shape: tuple[int, ...]
    mpmd_axis_name: str

    @classmethod
    def of(cls, mesh: Any) -> MeshLayout:
        """The layout of ``mesh`` (a ``jaxpp_mlir.MpmdMesh``)."""
        jax_mesh = mesh.jax_mesh
        return cls(tuple(jax_mesh.axis_names), tuple(jax_mesh.devices.shape), mesh.mpmd_axis_name)

    @property
    def mpmd_dim(self) -> int:
        return self.shape[self.axis_names.index(self.mpmd_axis_name)]

    def on_workers(self) -> tuple[list[list[Any]], list[Any]]:
        """Each rank's devices and submesh, in a worker (after ``jax.distributed``)."""
        from jax.sharding import Mesh

        from jaxpp_mlir.distributed.script_setup import pipeline_devices
        from jaxpp_mlir.mesh import MpmdMesh

        axis = self.axis_names.index(self.mpmd_axis_name)
        per_rank = int(np.prod(self.shape)) // self.mpmd_dim
        grid = pipeline_devices(self.mpmd_dim, per_rank)  # [rank, device of the rank]
        rest = self.shape[:axis] + self.shape[axis + 1 :]
        devices = np.moveaxis(grid.reshape((self.mpmd_dim, *rest)), 0, axis)
        mesh = MpmdMesh(Mesh(devices, self.axis_names), self.mpmd_axis_name)
        return [mesh.rank_devices(r) for r in range(self.mpmd_dim)], mesh.unstack
