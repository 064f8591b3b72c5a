"""A RemoteOutput (an output held by another process) says its rank and sharding."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from jaxpp_mlir.runtime.multiprocess.distributed import RemoteOutput
from jaxpp_mlir.runtime.plan import TensorSpec

import jaxpp_mlir as pp
from jaxpp_mlir.placement import ArrayPlacement, placement


@pytest.fixture
def mesh():
    devices = np.array(jax.devices()[:4]).reshape(2, 2)
    return pp.MpmdMesh(Mesh(devices, ("stage", "model")), "stage")


def test_placement_of_a_remote_output_is_its_rank_and_sharding(mesh):
    sharding = NamedSharding(mesh.rank_mesh(1), P(None, "model"))
    remote = RemoteOutput(0, 3, 2, rank=1, process=1, spec=TensorSpec((4, 8), "float32"),
                          sharding=sharding)  # fmt: skip
    assert remote.partition_spec == P(None, "model")
    assert f"on rank 1, process 1, {sharding}" in repr(remote)
    local = jax.device_put(np.ones(8, np.float32), NamedSharding(mesh.rank_mesh(0), P("model")))
    placed = placement({"w": remote, "b": local}, mesh)
    assert placed["w"] == ArrayPlacement((4, 8), np.dtype("float32"), (1,), sharding)
    assert placed["b"].mpmd_idxs == (0,) and placed["b"].spec == P("model")
    assert "MpmdArray(shape=(4, 8), dtype=float32, mpmd_idxs=(1,)" in repr(placed["w"])


def test_a_remote_output_without_a_loader_refuses_to_be_read():
    remote = RemoteOutput(0, 0, 1, rank=1, process=1, spec=TensorSpec((2,), "float32"))
    assert remote.sharding is None and remote.partition_spec is None
    with pytest.raises(pp.CallError, match="held by rank 1 in process 1"):
        np.asarray(remote)
