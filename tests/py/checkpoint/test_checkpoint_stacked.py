"""Checkpoints of stacked arrays split over ranks: ``StackedArray``s and arrays sharded along
the mpmd axis, saved where their rows live and restored into the same or another split.

The arrays are the outputs of ``stacked_programs`` (hand-written partitioned programs
whose stacked weight comes back split: evenly, one jax.Array; unevenly or interleaved, a
``StackedArray``). A round trip is bit for bit and lands where ``like`` says; a
checkpoint of one split restores into another (or into numpy); a damaged chunk path or a
deleted chunk is a ``CheckpointError``.
"""

from __future__ import annotations

import hashlib
import json
import os

import jax
import numpy as np
import pytest
import stacked_programs as sp
import toolkit
from jax.sharding import NamedSharding, PartitionSpec

import jaxpp_mlir as pp
from jaxpp_mlir.errors import CheckpointError

checkpoint = pytest.importorskip("jaxpp_mlir.checkpoint")
pytest.importorskip("tensorstore")

SPLITS = {
    "even": ((2, 2, 2, 2), pp.Std1F1B(4)),
    "uneven": ((2, 1, 3, 2), pp.Std1F1B(4)),
    "interleaved": ((1,) * 8, pp.Interleaved1F1B(8, 4)),
}


@pytest.fixture(scope="module")
def outputs():
    """Per split: its compiled step and the (w, b) one step returns."""
    found = {}
    for name, (rows, schedule) in SPLITS.items():
        layout = sp.layout_for(schedule, rows)
        step = sp.program(layout, schedule, toolkit.make_mesh(4)).compile()
        w, b, xs = sp.inputs(layout)
        found[name] = (step, step(w, b, xs)[:2], xs)
    return found


def _where(x) -> list:
    """Where each row block of ``x`` lives: (rows, devices) per chunk or shard."""
    if isinstance(x, pp.StackedArray):
        return [(c.rows, sorted(d.id for d in c.array.sharding.device_set)) for c in x.chunks]
    return sorted((s.index[0].indices(x.shape[0]), s.device.id) for s in x.addressable_shards)


@pytest.mark.parametrize("name", list(SPLITS))
def test_round_trip_is_exact_and_lands_where_like_says(name, outputs, tmp_path):
    step, (w, b), xs = outputs[name]
    checkpoint.save(tmp_path / "ckpt", {"w": w, "b": b})
    for like in ({"w": w, "b": b}, step.placement({"w": w, "b": b})):
        restored = checkpoint.restore(tmp_path / "ckpt", like)
        assert type(restored["w"]) is type(w)
        assert _where(restored["w"]) == _where(w)
        toolkit.assert_same_program(
            [np.asarray(restored["w"]), np.asarray(restored["b"])], [np.asarray(w), np.asarray(b)]
        )
    # The restored arrays run like the outputs they replace.
    toolkit.assert_same_program(step(restored["w"], restored["b"], xs), step(w, b, xs))


def test_a_stacked_array_is_saved_by_chunks(outputs, tmp_path):
    _, (w, _), _ = outputs["uneven"]
    checkpoint.save(tmp_path / "ckpt", {"w": w})
    with open(tmp_path / "ckpt" / "metadata.json") as handle:
        (item,) = json.load(handle)["leaves"]
    assert item["kind"] == "stacked" and item["shape"] == [8, 4, 4]
    assert [(c["rows"], c["rank"]) for c in item["chunks"]] == [
        ([0, 2], 0), ([2, 3], 1), ([3, 6], 2), ([6, 8], 3)
    ]  # fmt: skip
    assert sorted(os.listdir(tmp_path / "ckpt" / "stacked" / "leaf_0")) == [
        "rows_0_2", "rows_2_3", "rows_3_6", "rows_6_8"
    ]  # fmt: skip


def test_one_split_restores_into_another(outputs, tmp_path):
    """Interleaved chunks into the uneven split, the even array into the interleaved one and
    into numpy: the same numbers, each rank's rows where the target holds them."""
    pairs = [("interleaved", "uneven"), ("even", "interleaved"), ("uneven", "even")]
    for source, target in pairs:
        _, (w, _), _ = outputs[source]
        _, (like, _), _ = outputs[target]
        path = tmp_path / f"{source}_to_{target}"
        checkpoint.save(path, {"w": w})
        restored = checkpoint.restore(path, {"w": like})["w"]
        assert _where(restored) == _where(like)
        np.testing.assert_array_equal(np.asarray(restored), np.asarray(w))
        host = checkpoint.restore(path, {"w": np.zeros(w.shape, np.float32)})["w"]
        assert isinstance(host, np.ndarray)
        np.testing.assert_array_equal(host, np.asarray(w))


def test_an_array_sharded_over_the_mpmd_axis_round_trips(outputs, tmp_path):
    """A user's own array laid out as the even split's output, restored onto a
    ShapeDtypeStruct with that sharding."""
    step, (w, _), _ = outputs["even"]
    mesh = step.program.mesh.jax_mesh
    mine = jax.device_put(np.arange(128, dtype=np.float32).reshape(8, 4, 4), w.sharding)
    assert w.sharding == NamedSharding(mesh, PartitionSpec("stage", None, None))
    checkpoint.save(tmp_path / "ckpt", {"w": mine})
    like = jax.ShapeDtypeStruct(mine.shape, mine.dtype, sharding=mine.sharding)
    restored = checkpoint.restore(tmp_path / "ckpt", {"w": like})["w"]
    assert restored.sharding == mine.sharding
    np.testing.assert_array_equal(np.asarray(restored), np.asarray(mine))


def test_a_deleted_chunk_is_refused(outputs, tmp_path):
    _, (w, _), _ = outputs["interleaved"]
    copy = pp.StackedArray(
        [c._replace(array=jax.device_put(np.asarray(c.array), c.array.sharding)) for c in w.chunks]
    )
    copy.chunks[3].array.delete()
    with pytest.raises(CheckpointError, match=r"rows \[3, 4\) on rank 3 were deleted"):
        checkpoint.save(tmp_path / "ckpt", {"w": copy})


def test_a_chunk_outside_its_leaf_is_refused(outputs, tmp_path):
    """A crafted checkpoint (metadata and manifest rewritten together) whose chunk names a
    folder outside its leaf's: refused before anything is read."""
    _, (w, _), _ = outputs["uneven"]
    path = tmp_path / "ckpt"
    checkpoint.save(path, {"w": w})
    with open(path / "metadata.json") as handle:
        metadata = json.load(handle)
    metadata["leaves"][0]["chunks"][1]["file"] = "stacked/leaf_0/../../elsewhere"
    text = json.dumps(metadata).encode()
    (path / "metadata.json").write_bytes(text)
    with open(path / "manifest.json") as handle:
        manifest = json.load(handle)
    manifest["metadata"] = hashlib.sha256(text).hexdigest()
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match=r"its chunk .* is not a folder of rows of the leaf"):
        checkpoint.restore(path, {"w": w})
