"""The checkpoint format in one process: device groups, metadata, scalars, and clear errors."""

from __future__ import annotations

import json
import logging
import math
import pathlib
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import toolkit
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

pytest.importorskip("tensorstore")

from jaxpp_mlir import checkpoint  # noqa: E402


def rank_sharding(rank: int, spec: P) -> NamedSharding:
    """Rank ``rank`` of a 4-rank (stage, model) mesh of 8 devices: its 2-device submesh."""
    devices = np.array(jax.devices()[2 * rank : 2 * rank + 2]).reshape(1, 2)
    return NamedSharding(Mesh(devices, ("stage", "model")), spec)


@pytest.fixture
def state():
    w = jax.device_put(jnp.arange(32.0).reshape(4, 8), rank_sharding(0, P(None, "model")))
    b = jax.device_put(jnp.arange(8, dtype=jnp.bfloat16), rank_sharding(1, P("model")))
    return {
        "params": [{"w": w}, {"b": b}],
        "count": jax.device_put(jnp.int32(7), rank_sharding(1, P())),
        "host": np.arange(6, dtype=np.int16).reshape(2, 3),
        "lr": 0.1,
        "step": 3,
        "done": False,
        "name": "adam",
        "tiny": np.float32(1e-30),
    }


def test_arrays_and_scalars_round_trip_exactly_with_their_shardings(state, tmp_path):
    checkpoint.save(tmp_path / "c", state)
    restored = checkpoint.restore(tmp_path / "c", state)
    assert jax.tree.structure(restored) == jax.tree.structure(state)
    for path in (("params", 0, "w"), ("params", 1, "b"), ("count",)):
        got, want = restored, state
        for key in path:
            got, want = got[key], want[key]
        assert got.sharding == want.sharding
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    for key in ("lr", "step", "done", "name"):
        assert type(restored[key]) is type(state[key]) and restored[key] == state[key]
    np.testing.assert_array_equal(restored["host"], state["host"])
    assert restored["host"].dtype == np.int16
    assert restored["tiny"] == np.float32(1e-30) and restored["tiny"].dtype == np.float32


def test_one_directory_per_device_group_and_a_metadata_file(state, tmp_path):
    checkpoint.save(tmp_path / "c", state)
    metadata = json.loads((tmp_path / "c" / "metadata.json").read_text())
    assert metadata["format"] == "jaxpp_mlir.checkpoint" and metadata["version"] == 2
    assert metadata["groups"] == {"group_0": [0, 1], "group_1": [2, 3]}
    leaves = {item["path"]: item for item in metadata["leaves"]}
    w = leaves["['params'][0]['w']"]
    assert (w["group"], w["shape"], w["dtype"], w["spec"]) == ("group_0", [4, 8], "float32",
                                                                [None, "model"])  # fmt: skip
    assert (tmp_path / "c" / w["file"]).is_dir() and w["file"].startswith("group_0/")
    assert leaves["['params'][1]['b']"]["group"] == "group_1"
    assert leaves["['params'][1]['b']"]["dtype"] == "bfloat16"
    assert leaves["['step']"] == {"path": "['step']", "kind": "python", "type": "int", "value": 3}
    assert leaves["['host']"]["file"].startswith("host/")


def test_float_scalars_keep_every_bit(tmp_path):
    values = {"a": 0.1, "b": 1 / 3, "c": float("inf"), "d": float("nan"), "e": -0.0}
    checkpoint.save(tmp_path / "c", values)
    restored = checkpoint.restore(tmp_path / "c", values)
    for key, value in values.items():
        got = restored[key]
        assert type(got) is float
        assert (math.isnan(got) and math.isnan(value)) or got.hex() == value.hex()


def test_restore_onto_shapes_without_sharding_gives_host_arrays(state, tmp_path):
    checkpoint.save(tmp_path / "c", state)
    like = jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype) if isinstance(x, jax.Array) else x, state
    )
    restored = checkpoint.restore(tmp_path / "c", like)
    assert isinstance(restored["params"][0]["w"], np.ndarray)
    np.testing.assert_array_equal(restored["params"][0]["w"], np.asarray(state["params"][0]["w"]))


def test_restore_onto_another_sharding_reads_each_slice_there(state, tmp_path):
    checkpoint.save(tmp_path / "c", state)
    like = dict(state)
    w = state["params"][0]["w"]
    target = rank_sharding(3, P("model", None))  # other devices, other layout
    like["params"] = [{"w": jax.ShapeDtypeStruct(w.shape, w.dtype, sharding=target)},
                      state["params"][1]]  # fmt: skip
    restored = checkpoint.restore(tmp_path / "c", like)
    assert restored["params"][0]["w"].sharding == target
    np.testing.assert_array_equal(np.asarray(restored["params"][0]["w"]), np.asarray(w))


def test_a_numpy_leaf_restores_onto_a_sharded_target(tmp_path):
    x = np.arange(8, dtype=np.float32)
    checkpoint.save(tmp_path / "c", {"x": x})
    target = rank_sharding(2, P("model"))
    like = {"x": jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=target)}
    restored = checkpoint.restore(tmp_path / "c", like)
    assert restored["x"].sharding == target
    np.testing.assert_array_equal(np.asarray(restored["x"]), x)


def test_arrays_go_through_the_host_in_bounded_batches(state, tmp_path, monkeypatch):
    from jaxpp_mlir.checkpoint import store as checkpoint_store

    monkeypatch.setattr(checkpoint_store, "MAX_IN_FLIGHT_BYTES", 64)
    assert checkpoint_store._batches("abcd", [40, 20, 10, 100]) == [["a", "b"], ["c"], ["d"]]
    checkpoint.save(tmp_path / "c", state)  # w (128 bytes) and b, count in their own batches
    restored = checkpoint.restore(tmp_path / "c", state)
    for got, want in zip(jax.tree.leaves(restored), jax.tree.leaves(state), strict=True):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


# ------------------------------------------------------------------ errors


def test_restore_into_another_structure_names_the_leaf(state, tmp_path):
    checkpoint.save(tmp_path / "c", state)
    other = dict(state, params=[state["params"][0]])
    with pytest.raises(checkpoint.CheckpointError, match=r"no leaf \['params'\]\[1\]\['b'\]"):
        checkpoint.restore(tmp_path / "c", other)
    renamed = dict(state, momentum=state.pop("count"))
    with pytest.raises(checkpoint.CheckpointError, match=r"has no leaf \['momentum'\]"):
        checkpoint.restore(tmp_path / "c", renamed)


def test_restore_into_another_shape_or_dtype_names_the_leaf(state, tmp_path):
    checkpoint.save(tmp_path / "c", state)
    w = state["params"][0]["w"]
    for bad, what in (((8, 4), "float32"), ((4, 8), "float16")):
        like = dict(state, params=[{"w": jax.ShapeDtypeStruct(bad, what, sharding=w.sharding)},
                                   state["params"][1]])  # fmt: skip
        with pytest.raises(
            checkpoint.CheckpointError,
            match=rf"leaf \['params'\]\[0\]\['w'\] of the checkpoint .* has shape \(4, 8\) and "
            rf"dtype float32, but the tree to restore into has shape \({bad[0]}, {bad[1]}\) "
            rf"and dtype {what}",
        ):
            checkpoint.restore(tmp_path / "c", like)


def test_restore_a_scalar_into_an_array_names_the_leaf(state, tmp_path):
    checkpoint.save(tmp_path / "c", state)
    with pytest.raises(checkpoint.CheckpointError, match=r"leaf \['step'\] .* Python int 3"):
        checkpoint.restore(tmp_path / "c", dict(state, step=jnp.zeros(())))


def test_an_existing_checkpoint_is_kept_unless_forced(state, tmp_path):
    checkpoint.save(tmp_path / "c", state)
    with pytest.raises(checkpoint.CheckpointError, match="exists; pass force=True"):
        checkpoint.save(tmp_path / "c", {"other": 1})
    checkpoint.save(tmp_path / "c", {"other": 1}, force=True)
    assert checkpoint.restore(tmp_path / "c", {"other": 0}) == {"other": 1}


def test_a_directory_without_metadata_is_an_incomplete_checkpoint(tmp_path):
    (tmp_path / "c" / "group_0").mkdir(parents=True)
    with pytest.raises(checkpoint.CheckpointError, match=r"c is an incomplete checkpoint"):
        checkpoint.restore(tmp_path / "c", {"x": 1})
    with pytest.raises(checkpoint.CheckpointError, match=r"nothing_here is no checkpoint"):
        checkpoint.restore(tmp_path / "nothing_here", {"x": 1})


def test_a_leaf_that_cannot_be_saved_is_named(tmp_path):
    with pytest.raises(checkpoint.CheckpointError, match=r"leaf \['opt'\]\[1\] is a object"):
        checkpoint.save(tmp_path / "c", {"opt": [1, object()]})
    assert not (tmp_path / "c").exists()


FORMAT_1 = pathlib.Path(__file__).parent / "data" / "format1"  # saved by the library at 6d9e5f4


def test_a_checkpoint_saved_before_manifests_still_restores(tmp_path, caplog):
    """Format 1 (no manifest.json) is read as before, with a warning that its files are
    not checked against checksums: a user's old checkpoints are never locked out."""
    copy = tmp_path / "format1"
    shutil.copytree(FORMAT_1, copy)
    like = {
        "w": jax.ShapeDtypeStruct((3, 4), jnp.float32, sharding=rank_sharding(0, P())),
        "host": np.zeros((2, 3), np.int16),
        "step": 0,
        "lr": 0.0,
    }
    with caplog.at_level(logging.WARNING, logger="jaxpp_mlir.checkpoint"):
        restored = checkpoint.restore(copy, like)
    assert "checkpoint format 1 (before manifests)" in caplog.text
    toolkit.assert_same_program(  # the bits the old library saved
        restored["w"], np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    )
    np.testing.assert_array_equal(restored["host"], np.arange(6, dtype=np.int16).reshape(2, 3))
    assert (restored["step"], restored["lr"]) == (3, 0.1)


def test_a_format_2_checkpoint_without_its_manifest_is_incomplete(state, tmp_path):
    checkpoint.save(tmp_path / "c", state)
    (tmp_path / "c" / "manifest.json").unlink()
    with pytest.raises(checkpoint.CheckpointError, match="incomplete checkpoint: it has no"):
        checkpoint.restore(tmp_path / "c", state)


def test_a_format_1_checkpoint_is_confined_too(tmp_path):
    """Without a manifest there is nothing to check files against, but a leaf's file must
    still lie inside the checkpoint."""
    copy = tmp_path / "format1"
    shutil.copytree(FORMAT_1, copy)
    shutil.copytree(FORMAT_1, tmp_path / "elsewhere")
    metadata = json.loads((copy / "metadata.json").read_text())
    for item in metadata["leaves"]:
        if item["path"] == "['w']":
            item["file"] = "../elsewhere/" + item["file"]
    (copy / "metadata.json").write_text(json.dumps(metadata))
    like = {
        "w": jax.ShapeDtypeStruct((3, 4), jnp.float32, sharding=rank_sharding(0, P())),
        "host": np.zeros((2, 3), np.int16),
        "step": 0,
        "lr": 0.0,
    }
    with pytest.raises(checkpoint.CheckpointError, match=r"leaf \['w'\].*is not a folder inside"):
        checkpoint.restore(copy, like)


def test_checksums_guard_against_damage_not_against_edits(state, tmp_path):
    """What docs/checkpoints.md says: an edit with a matching manifest restores the edit."""
    from jaxpp_mlir.checkpoint import manifest, store

    path = tmp_path / "c"
    checkpoint.save(path, state)
    metadata = json.loads((path / "metadata.json").read_text())
    host = next(item for item in metadata["leaves"] if item["path"] == "['host']")
    edited = np.full((2, 3), 42, np.int16)
    shutil.rmtree(path / host["file"])
    store.write_host_arrays([(str(path / host["file"]), edited)])
    with pytest.raises(checkpoint.CheckpointError, match="does not match its checksum"):
        checkpoint.restore(path, state)
    record = json.loads((path / "manifest.json").read_text())
    record["files"].update(manifest.checksums(str(path), [host["file"]]))
    (path / "manifest.json").write_text(json.dumps(record))
    np.testing.assert_array_equal(checkpoint.restore(path, state)["host"], edited)
