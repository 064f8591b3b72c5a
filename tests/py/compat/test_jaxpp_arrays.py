"""``MpmdArray``, ``MpmdSharding`` and the SPMD <-> MPMD moves of ``jaxpp_mlir.jaxpp``."""

from __future__ import annotations

import jax
import numpy as np
import pytest
import toolkit
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import jaxpp_mlir
import jaxpp_mlir.jaxpp as jaxpp


@pytest.fixture(scope="module")
def mesh():
    return toolkit.mpmd_mesh({"stage": 2, "data": 2})


def test_mesh_coordinates_and_submeshes(mesh):
    assert mesh.mpmd_axis == 0
    devices = mesh.jax_mesh.devices
    assert mesh.device_coords[devices[1, 0]] == (1, 0)
    assert mesh.mpmd_submesh([1]).jax_mesh == mesh.unstack[1]
    assert mesh.mpmd_submesh([0, 1]) == mesh


def test_sharding_drops_the_mpmd_axis(mesh):
    sharding = jaxpp.MpmdSharding(mesh, {1}, P(("stage", "data"), None))
    assert sharding.spec == P("data", None)
    assert sharding.sharding.mesh == mesh.unstack[1]


def test_spmd_to_mpmd_and_back(mesh):
    data = np.arange(32.0, dtype=np.float32).reshape(8, 4)
    spmd = NamedSharding(mesh.jax_mesh, P(("stage", "data"), None))
    array = jax.device_put(data, spmd)
    targets = [jaxpp.MpmdSharding(mesh, {1}, P("data")), jaxpp.MpmdSharding(mesh, {0, 1}, P())]
    on_one, on_both = jaxpp.spmd_to_mpmd_reshard(mesh, [array, array], targets)
    assert array.is_deleted()  # consumed, even when given twice
    assert on_one.mpmd_idxs == (1,) and not on_one.is_mpmd_replicated
    assert on_one.to_mpmd_local_array.devices() == set(mesh.rank_devices(1))
    assert on_both.is_mpmd_replicated and len(on_both.to_mpmd_local_array) == 2
    np.testing.assert_array_equal(np.asarray(on_one), data)
    back = jaxpp.mpmd_to_spmd_reshard(mesh, [on_one, on_both], [spmd, spmd])
    for out in back:
        assert out.sharding == spmd
        np.testing.assert_array_equal(np.asarray(out), data)


def test_array_on_a_rank_outside_its_sharding_is_refused(mesh):
    on_rank0 = jax.device_put(np.zeros(2, np.float32), NamedSharding(mesh.unstack[0], P()))
    with pytest.raises(jaxpp_mlir.CallError, match="is on rank 0, which is not in mpmd_idxs"):
        jaxpp.MpmdArray([on_rank0], jaxpp.MpmdSharding(mesh, {1}, P()))
    empty = jaxpp.MpmdArray([], jaxpp.MpmdSharding(mesh, {1}, P()), shape=(2,), dtype=np.float32)
    assert empty.to_mpmd_local_array is None and empty.first_mpmd_replica is None
    with pytest.raises(jaxpp_mlir.CallError, match="holds no copy of the array on ranks"):
        np.asarray(empty)


def test_task_times_are_collected(mesh):
    import functools

    import jax.numpy as jnp

    def loss(w, x):
        return jnp.sum(jaxpp.mark_stage_end(jnp.tanh(x @ w[1]) @ w[0]) ** 2)

    def step(w, xs):
        return jaxpp.treduce(functools.partial(jax.grad(loss), w), xs, schedule=jaxpp.GPipe(1))

    w = [jnp.eye(4), jnp.eye(4)]
    compiled = jaxpp.mpmd_jit_with_loop(step, toolkit.make_mesh(1)).compile(w, jnp.ones((2, 2, 4)))
    with jaxpp.collect_task_times_ms() as times:
        compiled(w, jnp.ones((2, 2, 4)))
    # One entry per launched task (fused launches under their fused name), each timed once.
    assert times and all(len(runs) == 1 and runs[0] >= 0 for runs in times.values())
    with jaxpp.collect_task_times_ms(enabled=False) as nothing:
        assert nothing is None


def test_rows_split_over_ranks_are_returned_as_they_are(mesh):
    """An output split along the mpmd axis (a stacked parameter over its stages) is no set
    of copies: it stays the array it is, its rows on their ranks, nothing moved."""
    from jaxpp_mlir.compat.arrays import as_mpmd_array

    data = np.arange(32.0, dtype=np.float32).reshape(8, 4)
    split = jax.device_put(data, NamedSharding(mesh.jax_mesh, P("stage", None)))
    assert as_mpmd_array(split, mesh) is split
    replicated = jax.device_put(data, NamedSharding(mesh.jax_mesh, P()))
    assert isinstance(as_mpmd_array(replicated, mesh), jaxpp.MpmdArray)
