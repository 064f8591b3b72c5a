"""The corpus, part 3 (issue 37): JaxPP's entry points, typed PRNG keys, Ray's arguments,
checkpoint paths from someone else, and the launcher's verdict on a stalled process. Same
table as ``corpus_cases.py`` (``Case``: what each case must give), run by
``test_hostile_inputs.py`` through the same harness.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import pathlib
import shutil
import sys

import numpy as np
from corpus_cases import case_table, run_tool
from hostile_cases import environment, scratch

CASES, case = case_table()


def _mesh():
    """A 2-rank mesh of 2 devices per rank (axes stage, data)."""
    import jax

    import jaxpp_mlir as pp

    devices = np.array(jax.devices()[:4]).reshape(2, 2)
    return pp.MpmdMesh(jax.sharding.Mesh(devices, ("stage", "data")), "stage")


def _on_rank(value, rank: int, spec=None):
    import jax

    sharding = jax.sharding.NamedSharding(_mesh().rank_mesh(rank), spec or jax.P())
    return jax.device_put(value, sharding)


# ------------------------------------------------------------------ JaxPP's entry points


@case(
    "jaxpp_all_reduce_of_two_shapes",
    "error",
    "CallError",
    "cross_mpmd_all_reduce needs arrays of one shape, got [(3,), (2, 3)]: it sums one "
    "partial result per stage and broadcasts nothing",
)
def _():
    import jax.numpy as jnp

    import jaxpp_mlir.jaxpp as jaxpp

    jaxpp.cross_mpmd_all_reduce(jnp.ones(3), jnp.ones((2, 3)))


@case(
    "jaxpp_all_reduce_of_one_list",
    "error",
    "CallError",
    "cross_mpmd_all_reduce: argument 0 is a list; it takes the arrays as separate arguments",
)
def _():
    import jax.numpy as jnp

    import jaxpp_mlir.jaxpp as jaxpp

    jaxpp.cross_mpmd_all_reduce([jnp.ones(3), jnp.ones(3)])


@case(
    "jaxpp_all_reduce_of_a_mesh",
    "error",
    "CallError",
    "cross_mpmd_all_reduce: argument 1 is a MpmdMesh, not an array",
)
def _():
    import jax.numpy as jnp

    import jaxpp_mlir.jaxpp as jaxpp

    jaxpp.cross_mpmd_all_reduce(jnp.ones(3), _mesh())


@case(
    "jaxpp_reshard_of_an_array_without_a_copy_here",
    "error",
    "CallError",
    ("mpmd_to_spmd_reshard: mpmd_arrays[0] (MpmdArray(shape=(3,)", "has no copy in this process"),
)
def _():
    import jax
    import jax.numpy as jnp

    import jaxpp_mlir.jaxpp as jaxpp

    mesh = _mesh()
    elsewhere = jaxpp.MpmdArray([], jaxpp.MpmdSharding(mesh, [1], jax.P()), (3,), jnp.float32)
    spmd = jax.sharding.NamedSharding(mesh.jax_mesh, jax.P())
    jaxpp.mpmd_to_spmd_reshard(mesh, [elsewhere], [spmd])


@case(
    "jaxpp_reshard_over_a_plain_mesh",
    "error",
    "CallError",
    "mpmd_to_spmd_reshard: mpmd_mesh must be an MpmdMesh, got a jax.Mesh (wrap it: "
    "MpmdMesh(mesh, mpmd_axis_name))",
)
def _():
    import jax
    import jax.numpy as jnp

    import jaxpp_mlir.jaxpp as jaxpp

    mesh = _mesh()
    spmd = jax.sharding.NamedSharding(mesh.jax_mesh, jax.P())
    jaxpp.mpmd_to_spmd_reshard(mesh.jax_mesh, [_on_rank(jnp.ones(3), 0)], [spmd])


@case(
    "jaxpp_reshard_onto_named_shardings",
    "error",
    "CallError",
    "spmd_to_mpmd_reshard: mpmd_shardings[0] is a jax.NamedSharding, not an MpmdSharding",
)
def _():
    import jax
    import jax.numpy as jnp

    import jaxpp_mlir.jaxpp as jaxpp

    mesh = _mesh()
    spmd = jax.sharding.NamedSharding(mesh.jax_mesh, jax.P())
    jaxpp.spmd_to_mpmd_reshard(mesh, [jax.device_put(jnp.ones(3), spmd)], [spmd])


@case(
    "jaxpp_mpmd_array_of_a_numpy_array",
    "error",
    "CallError",
    "MpmdArray: partially_addressable_arrays[0] is a numpy.ndarray, not a jax.Array on a "
    "rank's submesh",
)
def _():
    import jax

    import jaxpp_mlir.jaxpp as jaxpp

    jaxpp.MpmdArray([np.ones(3, np.float32)], jaxpp.MpmdSharding(_mesh(), [0], jax.P()))


@case(
    "jaxpp_mpmd_array_with_a_named_sharding",
    "error",
    "CallError",
    "MpmdArray: mpmd_sharding must be an MpmdSharding, got a jax.NamedSharding",
)
def _():
    import jax
    import jax.numpy as jnp

    import jaxpp_mlir.jaxpp as jaxpp

    mesh = _mesh()
    array = _on_rank(jnp.ones(3), 0)
    jaxpp.MpmdArray([array], jax.sharding.NamedSharding(mesh.rank_mesh(0), jax.P()))


@case(
    "jaxpp_mpmd_array_laid_out_otherwise",
    "error",
    "CallError",
    "MpmdArray: array 0 (4,) is laid out as P('data',), but mpmd_sharding.spec is P()",
)
def _():
    import jax
    import jax.numpy as jnp

    import jaxpp_mlir.jaxpp as jaxpp

    array = _on_rank(jnp.ones(4), 0, jax.P("data"))
    jaxpp.MpmdArray([array], jaxpp.MpmdSharding(_mesh(), [0], jax.P()))


@case(
    "jaxpp_mpmd_sharding_over_a_plain_mesh",
    "error",
    "CallError",
    "MpmdSharding: mpmd_mesh must be an MpmdMesh, got a jax.Mesh (wrap it: "
    "MpmdMesh(mesh, mpmd_axis_name))",
)
def _():
    import jax

    import jaxpp_mlir.jaxpp as jaxpp

    jaxpp.MpmdSharding(_mesh().jax_mesh, [0], jax.P())


@case(
    "jaxpp_mesh_from_devices_with_two_negative_sizes",
    "error",
    "MeshError",
    "MpmdMesh.from_devices: axis_sizes {'stage': -2, 'data': -4} gives axis 'stage' the size "
    "-2: each size is a positive int, or -1 for the one axis that takes the devices left over",
)
def _():
    import jax

    import jaxpp_mlir.jaxpp as jaxpp

    jaxpp.MpmdMesh.from_devices(jax.devices(), {"stage": -2, "data": -4}, "stage")


@case(
    "jaxpp_mesh_from_devices_with_two_unknown_sizes",
    "error",
    "MeshError",
    "gives 2 axes ('stage', 'data') the size -1; at most one axis may take the devices left over",
)
def _():
    import jax

    import jaxpp_mlir.jaxpp as jaxpp

    jaxpp.MpmdMesh.from_devices(jax.devices(), {"stage": -1, "data": -1}, "stage")


@case("jaxpp_submesh_of_a_numpy_int", "correct")
def _():
    mesh = _mesh()
    submesh = mesh.mpmd_submesh(np.int64(1))
    assert submesh.jax_mesh == mesh.unstack[1], submesh
    return "same as jax.jit"  # the harness's word for "the right result"


@case(
    "jaxpp_submesh_of_a_bool",
    "error",
    "MeshError",
    "mpmd_submesh: mpmd_indices must be a rank or a list of distinct ranks in [0, 2), got True",
)
def _():
    _mesh().mpmd_submesh(True)


@case(
    "jaxpp_by_yield_with_a_str_stage_count",
    "error",
    "CallError",
    "target_num_stages must be a positive int (or None), got '2' (a str)",
)
def _():
    import jaxpp_mlir.jaxpp as jaxpp

    jaxpp.mpmd_jit_by_yield(lambda x: x, _mesh(), target_num_stages="2")


def _key_step(w, xs, key):
    import jax
    import jax.numpy as jnp

    import jaxpp_mlir.jaxpp as jaxpp

    def loss(w, x, key):
        for layer, stage_key in zip(w, jax.random.split(key), strict=True):  # equal stages
            x = jnp.tanh(x @ layer) * jax.random.bernoulli(stage_key, 0.5, x.shape)
            x = jaxpp.mark_stage_end(x)
        return jnp.sum(x**2)

    key, sub = jax.random.split(key)
    grads = jaxpp.treduce(lambda x: jax.grad(loss)(w, x, sub), xs, schedule=jaxpp.GPipe(2))
    return [a - 0.1 * g for a, g in zip(w, grads, strict=True)], key


@case("jaxpp_key_returned_by_mpmd_jit_is_a_key", "correct")
def _():
    import jax
    import jax.numpy as jnp

    import jaxpp_mlir.jaxpp as jaxpp

    w, xs, key = [jnp.eye(4), jnp.eye(4)], jnp.ones((2, 2, 4)), jax.random.key(7)
    step = jaxpp.mpmd_jit_with_loop(_key_step, _mesh().mpmd_submesh([0, 1]))
    _, got = step(w, xs, key)
    _, expected = jax.jit(_key_step)(w, xs, key)
    assert jax.dtypes.issubdtype(got.dtype, jax.dtypes.prng_key), got
    np.testing.assert_array_equal(jax.random.key_data(got), jax.random.key_data(expected))
    np.testing.assert_array_equal(
        jax.random.key_data(jax.random.split(got)), jax.random.key_data(jax.random.split(expected))
    )
    _, again = step(w, xs, got)  # passed back to the step as a key
    _, expected_again = jax.jit(_key_step)(w, xs, expected)
    np.testing.assert_array_equal(jax.random.key_data(again), jax.random.key_data(expected_again))
    return "same as jax.jit"


# ------------------------------------------------------------------ Ray's arguments


@contextlib.contextmanager
def _no_ray_left_running():
    """The block must leave no Ray instance running in this process."""
    try:
        yield
    finally:
        if importlib.util.find_spec("ray") is not None:
            import ray

            assert not ray.is_initialized(), "Ray was left running"


def _ray_start_case(name: str, kwargs: dict, message: str) -> None:
    @case(f"ray_start_{name}", "error", "CallError", message)
    def _():
        import jaxpp_mlir as pp

        with _no_ray_left_running():
            pp.ray.start(**kwargs)


_ray_start_case(
    "with_no_devices",
    {"num_workers": 2, "devices_per_worker": 0},
    "pp.ray.start: devices_per_worker must be an int from 1 to 4096, got 0 (int)",
)
_ray_start_case(
    "with_a_fractional_worker_count",
    {"num_workers": 2.5},
    "pp.ray.start: num_workers must be an int from 1 to 1024, got 2.5 (float)",
)
_ray_start_case(
    "on_an_unknown_platform",
    {"num_workers": 2, "platform": "gpu"},
    "pp.ray.start: platform must be 'cpu' (CPU devices, devices_per_worker each) or None",
)
_ray_start_case(
    "with_devices_per_worker_on_the_hosts_devices",
    {"num_workers": 2, "platform": None, "devices_per_worker": 4},
    "pp.ray.start: devices_per_worker=4 applies to platform='cpu' only",
)
_ray_start_case(
    "with_a_nan_timeout",
    {"num_workers": 2, "start_timeout_s": float("nan")},
    "pp.ray.start: start_timeout_s must be a finite number of seconds greater than 0",
)
_ray_start_case(
    "with_worker_options_not_a_dict",
    {"num_workers": 2, "worker_options": ["num_gpus", 1]},
    "pp.ray.start: worker_options must be a dict of Ray actor options or None, got list",
)


# ------------------------------------------------------------------ checkpoint paths


def _state() -> dict:
    import jax
    import jax.numpy as jnp

    return {
        "w": jax.device_put(jnp.arange(16.0, dtype=jnp.float32).reshape(4, 4), jax.devices()[0]),
        "b": jax.device_put(jnp.ones(4, jnp.float32), jax.devices()[1]),
    }


def _saved(folder: pathlib.Path | None = None, name: str = "ckpt", state=None):
    from jaxpp_mlir import checkpoint

    state = _state() if state is None else state
    path = (folder or scratch()) / name
    checkpoint.save(path, state)
    return path, state


def _leaf_folder(path: pathlib.Path, leaf: str) -> str:
    metadata = json.loads((path / "metadata.json").read_text())
    return next(item["file"] for item in metadata["leaves"] if item["path"] == leaf)


def _chunk(path: pathlib.Path, leaf: str) -> pathlib.Path:
    return next(f for f in (path / _leaf_folder(path, leaf)).iterdir() if f.name != ".zarray")


def _sign(path: pathlib.Path) -> None:
    """Rewrites ``manifest.json`` to match the files as they are now (what someone editing
    a checkpoint on purpose does: the checksums guard against damage, not against edits)."""
    from jaxpp_mlir.checkpoint import manifest as checkpoint_manifest

    manifest = json.loads((path / "manifest.json").read_text())
    metadata = json.loads((path / "metadata.json").read_text())
    folders = [item["file"] for item in metadata["leaves"] if item.get("file")]
    manifest["files"] = checkpoint_manifest.checksums(str(path), folders)
    manifest["metadata"] = hashlib.sha256((path / "metadata.json").read_bytes()).hexdigest()
    (path / "manifest.json").write_text(json.dumps(manifest))


def _link_to_a_copy(entry: pathlib.Path, copy: pathlib.Path) -> None:
    """Moves the file or folder ``entry`` to ``copy`` and leaves a link to it in its place."""
    shutil.move(entry, copy)
    entry.symlink_to(copy, target_is_directory=copy.is_dir())


@contextlib.contextmanager
def _never_opened(target: str):
    """Fails the block if this process opens ``target`` (Python's ``open`` audit event)."""
    opened: list[str] = []
    watching = [True]

    def hook(event: str, args: tuple) -> None:
        if watching[0] and event == "open" and isinstance(args[0], str | os.PathLike):
            opened.append(os.path.realpath(os.fspath(args[0])))

    sys.addaudithook(hook)
    try:
        yield
    finally:
        watching[0] = False
        assert os.path.realpath(target) not in opened, f"{target} was opened"


def _restore(path: pathlib.Path, like):
    from jaxpp_mlir import checkpoint

    return checkpoint.restore(path, like)


@case(
    "checkpoint_leaf_file_in_another_directory",
    "error",
    "CheckpointError",
    (
        "leaf ['w'] of the checkpoint",
        "'../other/group_0/leaf_",
        "is not a folder inside the checkpoint; a checkpoint's files all live inside its "
        "directory, so it is refused before anything is read",
    ),
)
def _():
    folder = scratch()
    path, state = _saved(folder)
    _saved(folder, "other")
    metadata = json.loads((path / "metadata.json").read_text())
    for item in metadata["leaves"]:
        if item["path"] == "['w']":
            item["file"] = "../other/" + item["file"]
    (path / "metadata.json").write_text(json.dumps(metadata))
    _sign(path)
    _restore(path, state)


def _linked_outside_case(name: str, leaf: str, entry_of) -> None:
    """A case: the entry ``entry_of(checkpoint path)`` of ``leaf`` moved outside the
    checkpoint, a link to it left in its place."""
    pinned = (f"leaf {leaf} of the checkpoint", "is a symbolic link to", "outside the checkpoint")

    @case(name, "error", "CheckpointError", pinned)
    def _():
        folder = scratch()
        path, state = _saved(folder)
        _link_to_a_copy(entry_of(path), folder / "moved_outside")
        _restore(path, state)


_linked_outside_case(
    "checkpoint_chunk_linked_to_a_copy_outside", "['b']", lambda path: _chunk(path, "['b']")
)
_linked_outside_case(
    "checkpoint_leaf_folder_linked_to_a_copy_outside",
    "['w']",
    lambda path: path / _leaf_folder(path, "['w']"),
)


@case(
    "checkpoint_chunk_linked_to_etc_passwd",
    "error",
    "CheckpointError",
    ("leaf ['b'] of the checkpoint", "is a symbolic link to /etc/passwd, outside the checkpoint"),
)
def _():
    path, state = _saved()
    chunk = _chunk(path, "['b']")
    chunk.unlink()
    chunk.symlink_to("/etc/passwd")
    _sign(path)  # the manifest even agrees: the link is refused before the file is read
    with _never_opened("/etc/passwd"):
        _restore(path, state)


@case(
    "checkpoint_metadata_linked_outside",
    "error",
    "CheckpointError",
    ("metadata.json is a symbolic link to", "outside the checkpoint directory"),
)
def _():
    folder = scratch()
    path, state = _saved(folder)
    copy = folder / "metadata_copy.json"
    _link_to_a_copy(path / "metadata.json", copy)
    with _never_opened(str(copy)):
        _restore(path, state)


@case(
    "checkpoint_chunk_replaced_by_a_fifo",
    "error",
    "CheckpointError",
    ("leaf ['b'] of the checkpoint", "is not a regular file (a FIFO, device or folder)"),
)
def _():
    path, state = _saved()
    chunk = _chunk(path, "['b']")
    chunk.unlink()
    os.mkfifo(chunk)  # reading it would block for ever
    _restore(path, state)


@case("checkpoint_link_inside_the_checkpoint_is_followed", "correct")
def _():
    path, state = _saved()
    _link_to_a_copy(_chunk(path, "['b']"), path / "host_copy")
    restored = _restore(path, state)
    np.testing.assert_array_equal(np.asarray(restored["b"]), np.asarray(state["b"]))
    return "same as jax.jit"


@case("checkpoint_force_over_links_leaves_their_targets_alone", "correct")
def _():
    from jaxpp_mlir import checkpoint

    folder = scratch()
    path, state = _saved(folder)
    outside = folder / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep me")
    leaf = path / _leaf_folder(path, "['w']")
    shutil.rmtree(leaf)
    leaf.symlink_to(outside, target_is_directory=True)
    checkpoint.save(path, state, force=True)
    assert (outside / "keep.txt").read_text() == "keep me", "a file outside was removed"
    restored = _restore(path, state)
    np.testing.assert_array_equal(np.asarray(restored["w"]), np.asarray(state["w"]))
    return "same as jax.jit"


@case(
    "checkpoint_force_where_the_marker_is_a_link",
    "error",
    "CheckpointError",
    ("exists and is not a checkpoint", "force=True replaces only a checkpoint"),
)
def _():
    from jaxpp_mlir import checkpoint

    folder = scratch()
    mine = folder / "mine"
    mine.mkdir()
    (mine / "results.csv").write_text("1,2\n")
    elsewhere = folder / "marker_elsewhere"
    elsewhere.write_text("jaxpp_mlir.checkpoint 2\n")
    (mine / ".jaxpp_mlir_checkpoint").symlink_to(elsewhere)
    try:
        checkpoint.save(mine, _state(), force=True)
    finally:
        assert (mine / "results.csv").read_text() == "1,2\n", "the user's file was deleted"


@case("checkpoint_typed_keys_round_trip", "correct")
def _():
    import jax

    keys = jax.random.split(jax.random.key(3), 4)
    state = dict(_state(), key=keys, rbg=jax.random.key(5, impl="rbg"))
    path, _ = _saved(state=state)
    restored = _restore(path, state)
    for name in ("key", "rbg"):
        assert restored[name].dtype == state[name].dtype, restored[name]
        np.testing.assert_array_equal(
            jax.random.key_data(restored[name]), jax.random.key_data(state[name])
        )
    jax.random.split(restored["rbg"])  # a key again
    as_data = _restore(path, dict(state, key=jax.random.key_data(keys)))  # or as its data
    np.testing.assert_array_equal(as_data["key"], jax.random.key_data(keys))
    return "same as jax.jit"


@case(
    "checkpoint_keys_restored_as_keys_of_another_kind",
    "error",
    "CheckpointError",
    (
        "leaf ['key'] of the checkpoint",
        "is rbg keys saved as their data (uint32[4]), but the tree to restore into has typed "
        "PRNG keys (threefry2x32) there",
    ),
)
def _():
    import jax

    state = dict(_state(), key=jax.random.key(5, impl="rbg"))
    path, _ = _saved(state=state)
    _restore(path, dict(state, key=jax.random.key(5)))


# ------------------------------------------------------------------ the launcher

STALLS_WHILE_ITS_PEER_FINISHES = """\
import time
import jax
from jaxpp_mlir.launch import initialize_from_env
initialize_from_env()
if jax.process_index() == 1:
    while True:  # plain Python, no jaxpp call
        time.sleep(0.1)
print("process 0 finished its work", flush=True)
"""


@case(
    "launch_process_stalls_while_its_peer_exits_normally",
    "exit",
    "124",
    (
        "process 1 still running 2 s after process 0 finished (limit "
        "JAXPP_MLIR_SHUTDOWN_TIMEOUT; process 0 waited for it, then exited with code 70): "
        "stalled, maybe before its first jaxpp call",
        "jaxpp.launch: process 1 (pid",
        ") stalled: still running after its peers finished",
        "exit code 124: process 1 stalled",
    ),
)
def _():
    script = scratch() / "stalls.py"
    script.write_text(STALLS_WHILE_ITS_PEER_FINISHES)
    with environment(SHUTDOWN_TIMEOUT="2", KILL_GRACE="0.5"):
        result = run_tool("-m", "jaxpp_mlir.launch", "--nproc", "2", str(script))
    assert "failed first" not in result, result
    return result
