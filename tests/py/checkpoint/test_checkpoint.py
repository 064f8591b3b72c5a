"""Stage-local checkpoints: saved and restored where they live, exact round trip."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import toolkit
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import jaxpp_mlir as pp

checkpoint = pytest.importorskip("jaxpp_mlir.checkpoint")
pytest.importorskip("tensorstore")

SPECS = [{"w": P(None, "model"), "b": P("model")}] * 2


shared_stage_compiles = toolkit.stage_compiles_shared_by_file()


def make_state():
    return toolkit.adam_mlp_state(num_layers=2, width=4)


@pytest.fixture(scope="module")
def programs():
    mesh = pp.MpmdMesh(
        Mesh(np.array(jax.devices()).reshape(2, 2, 2), ("stage", "data", "model")), "stage"
    )
    lowering = mesh.lowering_mesh()
    params, opt_state, batch = make_state()
    param_sh = jax.tree.map(lambda s: NamedSharding(lowering, s), SPECS)
    jitted = jax.jit(toolkit.adam_train_step, in_shardings=(param_sh, None, None))
    lowered = jitted.lower(params, opt_state, batch)
    std = pp.partition(lowered, mesh=mesh, schedule=pp.Std1F1B(2)).compile()
    gpipe = pp.partition(lowered, mesh=mesh, schedule=pp.GPipe(2)).compile()
    return mesh, std, gpipe, (params, opt_state, batch)


def train(step, params, opt_state, batch, steps):
    for _ in range(steps):
        params, opt_state, _ = step(params, opt_state, batch)
    return params, opt_state


def assert_same(actual, expected):
    a_leaves, a_tree = jax.tree_util.tree_flatten(actual)
    e_leaves, e_tree = jax.tree_util.tree_flatten(expected)
    assert a_tree == e_tree
    for a, e in zip(a_leaves, e_leaves, strict=True):
        assert a.sharding == e.sharding
        np.testing.assert_array_equal(np.asarray(a), np.asarray(e))


def test_train_checkpoint_train_restore_train_is_exact(programs, tmp_path):
    mesh, std, gpipe, (params, opt_state, batch) = programs
    state = train(std, params, opt_state, batch, 3)
    checkpoint.save(tmp_path / "step3", state)
    after_five = train(std, *state, batch, 2)

    restored = checkpoint.restore(tmp_path / "step3", state)
    assert_same(restored, state)  # each leaf back on its rank with its sharding
    assert_same(train(std, *restored, batch, 2), after_five)


def test_restore_into_a_program_with_another_schedule(programs, tmp_path):
    mesh, std, gpipe, (params, opt_state, batch) = programs
    state = train(std, params, opt_state, batch, 3)
    checkpoint.save(tmp_path / "ckpt", state)
    expected = train(std, *state, batch, 2)
    # The target placement comes from the other program's own state.
    target = gpipe.placement(train(gpipe, params, opt_state, batch, 1))
    restored = checkpoint.restore(tmp_path / "ckpt", target)
    assert restored[0][1]["w"].sharding.spec == P(None, "model")
    assert restored[0][1]["w"].devices() == set(mesh.rank_devices(1))
    assert_same(train(gpipe, *restored, batch, 2), expected)


def test_restore_onto_a_missing_checkpoint_names_the_path(programs, tmp_path):
    mesh, std, gpipe, (params, opt_state, batch) = programs
    with pytest.raises(Exception, match="nothing_here"):
        checkpoint.restore(tmp_path / "nothing_here", (params, opt_state))


def test_an_output_held_by_no_process_is_refused_by_name(tmp_path):
    # In one process nobody holds a RemoteOutput: there is nothing to write for it.
    from jaxpp_mlir.runtime.multiprocess.distributed import RemoteOutput
    from jaxpp_mlir.runtime.plan import TensorSpec

    remote = RemoteOutput(0, 0, 1, rank=1, process=1, spec=TensorSpec((4,), "float32"))
    with pytest.raises(checkpoint.CheckpointError, match=r"leaf \['w'\] is held by no process"):
        checkpoint.save(tmp_path / "ckpt", {"b": jnp.ones(2), "w": remote})
    assert not (tmp_path / "ckpt" / "metadata.json").exists()


class _NeverDone:
    """A storage operation that never finishes (a hung network file system)."""

    def __init__(self, real):
        self.real = real

    def result(self, timeout=None):
        import time

        time.sleep(timeout if timeout is not None else 3600)
        raise TimeoutError

    def __getattr__(self, name):
        return getattr(self.real, name)


@pytest.mark.parametrize("hang", ["_create", "open"])
def test_a_storage_that_does_not_answer_is_named_after_the_io_timeout(tmp_path, monkeypatch, hang):
    """A save whose storage never finishes creating a leaf's array, or a restore whose
    storage never opens it, raises after JAXPP_MLIR_CHECKPOINT_IO_TIMEOUT, naming the
    file, instead of waiting forever."""
    from jaxpp_mlir.checkpoint import store

    state = {"b": jnp.arange(3.0), "w": jnp.ones((2, 2))}
    if hang == "open":
        checkpoint.save(tmp_path / "ckpt", state)
    monkeypatch.setenv("JAXPP_MLIR_CHECKPOINT_IO_TIMEOUT", "0.2")
    if hang == "_create":
        real = store._create
        monkeypatch.setattr(store, "_create", lambda *args: _NeverDone(real(*args)))
        with pytest.raises(checkpoint.CheckpointError) as caught:
            checkpoint.save(tmp_path / "ckpt", state)
        assert "creating " in str(caught.value)
    else:
        tensorstore = store._tensorstore()
        real_open = tensorstore.open
        monkeypatch.setattr(tensorstore, "open", lambda *a, **k: _NeverDone(real_open(*a, **k)))
        with pytest.raises(checkpoint.CheckpointError) as caught:
            checkpoint.restore(tmp_path / "ckpt", state)
        assert "opening " in str(caught.value)
    message = str(caught.value)
    assert str(tmp_path / "ckpt") in message
    assert "did not finish within JAXPP_MLIR_CHECKPOINT_IO_TIMEOUT=0.2 s" in message
