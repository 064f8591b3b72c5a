"""The corpus, part 2: checkpoints, schedule files, traces, options, caches and packing
under hostile input (issue 27). Same table as ``corpus_cases.py`` (``Case``: what each
case must give), run by ``test_hostile_inputs.py`` through the same harness.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import tempfile

import numpy as np
from corpus_cases import case_table, compiled_step, gradient_step, make_inputs, mesh, run_tool

CASES, case = case_table()


@contextlib.contextmanager
def environment(**values: str):
    """``JAXPP_MLIR_<NAME>`` set to each value for the block."""
    saved = {name: os.environ.get(f"JAXPP_MLIR_{name}") for name in values}
    os.environ.update({f"JAXPP_MLIR_{name}": value for name, value in values.items()})
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(f"JAXPP_MLIR_{name}", None)
            else:
                os.environ[f"JAXPP_MLIR_{name}"] = value


def scratch() -> pathlib.Path:
    """A fresh directory (removed when the runner's process ends)."""
    return pathlib.Path(tempfile.mkdtemp(prefix="jaxpp_hostile_"))


# ------------------------------------------------------------------ checkpoints


def _sharding(rank: int):
    import jax

    return jax.sharding.SingleDeviceSharding(jax.devices()[rank])


def _state() -> dict:
    import jax
    import jax.numpy as jnp

    return {
        "w": jax.device_put(jnp.arange(16.0, dtype=jnp.float32).reshape(4, 4), _sharding(0)),
        "b": jax.device_put(jnp.ones(4, jnp.float32), _sharding(1)),
        "step": 3,
        "lr": 0.5,
        "name": "adam",
    }


def _saved() -> tuple[pathlib.Path, dict]:
    from jaxpp_mlir import checkpoint

    state = _state()
    path = scratch() / "ckpt"
    checkpoint.save(path, state)
    return path, state


def _leaf_folder(path: pathlib.Path, leaf: str) -> pathlib.Path:
    metadata = json.loads((path / "metadata.json").read_text())
    item = next(item for item in metadata["leaves"] if item["path"] == leaf)
    return path / item["file"]


def _restore(path: pathlib.Path, like: dict):
    from jaxpp_mlir import checkpoint

    return checkpoint.restore(path, like)


@case(
    "checkpoint_chunk_deleted",
    "error",
    "CheckpointError",
    ("leaf ['w'] of the checkpoint", "ckpt: its file", "is missing"),
)
def _():
    path, state = _saved()
    chunk = next(f for f in _leaf_folder(path, "['w']").iterdir() if f.name != ".zarray")
    chunk.unlink()
    _restore(path, state)


@case(
    "checkpoint_dtype_edited_in_zarray",
    "error",
    "CheckpointError",
    ("leaf ['w'] of the checkpoint", "/.zarray does not match its checksum"),
)
def _():
    path, state = _saved()
    zarray = _leaf_folder(path, "['w']") / ".zarray"
    zarray.write_text(zarray.read_text().replace("<f4", "<i4"))
    _restore(path, state)


@case(
    "checkpoint_dtype_edited_everywhere_but_the_manifest",
    "error",
    "CheckpointError",
    (
        "leaf ['w'] of the checkpoint",
        "holds shape (4, 4) and dtype int32, but the checkpoint's metadata says shape (4, 4) "
        "and dtype float32",
    ),
)
def _():
    from jaxpp_mlir.checkpoint import manifest as checkpoint_manifest

    path, state = _saved()
    zarray = _leaf_folder(path, "['w']") / ".zarray"
    zarray.write_text(zarray.read_text().replace("<f4", "<i4"))
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["files"] = checkpoint_manifest.checksums(str(path), ["group_0", "group_1"])
    (path / "manifest.json").write_text(json.dumps(manifest))
    _restore(path, state)


@case(
    "checkpoint_chunk_corrupted",
    "error",
    "CheckpointError",
    ("leaf ['b'] of the checkpoint", "does not match its checksum in manifest.json"),
)
def _():
    path, state = _saved()
    chunk = next(f for f in _leaf_folder(path, "['b']").iterdir() if f.name != ".zarray")
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 0xFF
    chunk.write_bytes(bytes(data))
    _restore(path, state)


@case(
    "checkpoint_force_on_a_directory_of_user_files",
    "error",
    "CheckpointError",
    ("exists and is not a checkpoint", "force=True replaces only a checkpoint"),
)
def _():
    from jaxpp_mlir import checkpoint

    path = scratch() / "mine"
    (path / "data").mkdir(parents=True)
    (path / "notes.txt").write_text("keep me")
    (path / "data" / "results.csv").write_text("1,2\n")
    try:
        checkpoint.save(path, _state(), force=True)
    finally:
        assert (path / "notes.txt").read_text() == "keep me", "the user's file was deleted"
        assert (path / "data" / "results.csv").exists(), "the user's file was deleted"


@case("checkpoint_force_replaces_a_checkpoint", "correct")
def _():
    from jaxpp_mlir import checkpoint

    path, state = _saved()
    checkpoint.save(path, dict(state, step=4), force=True)
    assert _restore(path, state)["step"] == 4
    return "same as jax.jit"


@case(
    "checkpoint_int_restored_into_a_float",
    "error",
    "CheckpointError",
    "leaf ['step'] of the checkpoint",
)
def _():
    path, state = _saved()
    _restore(path, dict(state, step=3.0))


@case(
    "checkpoint_float_restored_into_a_str",
    "error",
    "CheckpointError",
    (
        "leaf ['lr'] of the checkpoint",
        "is the Python float 0.5, but the tree to restore into has a str there",
    ),
)
def _():
    path, state = _saved()
    _restore(path, dict(state, lr="0.5"))


@case(
    "checkpoint_metadata_truncated",
    "error",
    "CheckpointError",
    ("metadata.json does not match its checksum in manifest.json", "ckpt was changed or damaged"),
)
def _():
    path, state = _saved()
    metadata = path / "metadata.json"
    metadata.write_bytes(metadata.read_bytes()[:60])
    _restore(path, state)


@case(
    "checkpoint_interrupted_before_the_manifest",
    "error",
    "CheckpointError",
    ("is an incomplete checkpoint: it has no manifest.json", "interrupted part-way"),
)
def _():
    path, state = _saved()
    (path / "manifest.json").unlink()
    _restore(path, state)


@case(
    "checkpoint_manifest_not_json",
    "error",
    "CheckpointError",
    ("manifest.json of the checkpoint", "is unreadable"),
)
def _():
    path, state = _saved()
    (path / "manifest.json").write_bytes(b"\x80\x81 not json")
    _restore(path, state)


@case(
    "checkpoint_save_of_donated_arrays",
    "error",
    "CheckpointError",
    "leaf ['w'] is an array that was deleted (donated to an earlier call",
)
def _():
    import jax

    from jaxpp_mlir import checkpoint

    state = _state()
    jax.jit(lambda w: w + 1, donate_argnums=0)(state["w"])
    checkpoint.save(scratch() / "ckpt", state)


@case("checkpoint_round_trip_is_exact", "correct")
def _():
    path, state = _saved()
    restored = _restore(path, state)
    for key in ("w", "b"):
        np.testing.assert_array_equal(np.asarray(restored[key]), np.asarray(state[key]))
    assert restored["step"] == 3 and restored["lr"] == 0.5 and restored["name"] == "adam"
    return "same as jax.jit"


# ------------------------------------------------------------------ options


def _option_case(name: str, text: str, allowed: str) -> None:
    message = (f"JAXPP_MLIR_{name}='{text}' is not allowed: {allowed}",)

    @case(f"option_{name.lower()}_{text}", "error", "ValueError", message)
    def _():
        from jaxpp_mlir.runtime import options

        from jaxpp_mlir import partition_options

        declared = getattr(options, name, None) or getattr(partition_options, name)
        with environment(**{name: text}):
            declared.value()


_option_case("PACK_PARAMETERS", "3", "one of 0, 1, 2")
_option_case("PACK_PARAMETERS", "-1", "one of 0, 1, 2")
_option_case("REPLICATE_MAX_BYTES", "-1", "an integer of at least 0")
_option_case("PROGRESS", "banana", "one of 0, 1, tqdm")
_option_case("HEARTBEAT_INTERVAL", "nan", "a finite number greater than 0")
_option_case("TRANSFER_TIMEOUT", "-1", "a finite number greater than 0")


@case(
    "option_bad_pack_parameters_at_partition",
    "error",
    "ValueError",
    "JAXPP_MLIR_PACK_PARAMETERS='3' is not allowed",
)
def _():
    import jax

    import jaxpp_mlir as pp

    with environment(PACK_PARAMETERS="3"):
        pp.partition(
            jax.jit(gradient_step).lower(*make_inputs()), mesh=mesh(2), schedule=pp.Std1F1B(2)
        )


# ------------------------------------------------------------------ schedule files


def _schedule_file(content: bytes, **kwargs):
    from jaxpp_mlir.schedules.csv_format import schedule_from_csv

    path = scratch() / "order.csv"
    path.write_bytes(content)
    return schedule_from_csv(path, **kwargs)


@case(
    "schedule_file_huge_stage_index",
    "error",
    "ScheduleError",
    ("row 1 (rank 0), column 2: stage 99999999 is out of range: stages are numbered 0 to 1",),
)
def _():
    _schedule_file(b"0F0,99999999F0\n")


@case(
    "schedule_file_huge_declared_stage_count",
    "error",
    "ScheduleError",
    "num_stages=100000000, but its actions use only 2 stages",
)
def _():
    _schedule_file(b"0F0,1F0\n", num_stages=100_000_000)


@case(
    "schedule_file_not_utf8",
    "error",
    "ScheduleError",
    ("order.csv', line 2: byte 0xff is not UTF-8 text",),
)
def _():
    _schedule_file(b"0F0,1F0\n\xff\xfe0B0\n")


# ------------------------------------------------------------------ traces


def _trace_file(folder: pathlib.Path, name: str, pid: int) -> str:
    path = folder / name
    event = {"name": "stage0_fwd", "ph": "X", "pid": pid, "tid": 0, "ts": 0, "dur": 1}
    path.write_text(json.dumps({"traceEvents": [event]}))
    return str(path)


def _merge(*args: str) -> str:
    import io

    from jaxpp_mlir import trace as trace_cli

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = trace_cli.main(["merge", *args])
    return f"exit {code}: {err.getvalue()}"


@case(
    "trace_merge_of_two_runs_of_process_0",
    "exit",
    "1",
    ("second.json' holds the events of process 0, and so does trace", "not traces of separate"),
)
def _():
    folder = scratch()
    first, second = _trace_file(folder, "first.json", 0), _trace_file(folder, "second.json", 0)
    return _merge(str(folder / "out.json"), first, second)


@case("trace_merge_of_a_binary_file", "exit", "1", ("cannot read trace", "binary.bin': byte 0"))
def _():
    folder = scratch()
    (folder / "binary.bin").write_bytes(b"\x80\x00\xff")
    return _merge(
        str(folder / "out.json"), _trace_file(folder, "a.json", 0), str(folder / "binary.bin")
    )


@case("trace_merge_to_an_unwritable_output", "exit", "1", "cannot write the trace '/proc/out.json'")
def _():
    folder = scratch()
    return _merge("/proc/out.json", _trace_file(folder, "a.json", 0))


@case(
    "trace_unwritable_while_the_step_raises",
    "error",
    "CallError",
    "dtype int32, but the program expects",
)
def _():
    from jaxpp_mlir.runtime.observation.trace import program_trace

    step = compiled_step()
    params, batch = make_inputs()
    folder = scratch()
    (folder / "file").write_text("")
    with program_trace(folder / "file" / "trace.json"):
        step([p.astype(np.int32) for p in params], batch)


# ------------------------------------------------------------------ packing


def _scalar_model_step(params, batch):
    import jax
    import jax.numpy as jnp

    import jaxpp_mlir as pp

    def loss(params, microbatch):
        x, y = microbatch
        for stage in params:
            waves = sum(p * jnp.sin(x * (i + 1)) for i, p in enumerate(stage[1:]))
            x = pp.pipeline_enter_stage(jnp.tanh(x * stage[0] + waves))
        return jnp.mean((x - y) ** 2)

    losses, grads = pp.treduce(
        lambda mb: jax.value_and_grad(loss)(params, mb), batch, operation=(pp.Concat(), pp.Add)
    )
    return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), losses


@case("pack_accumulators_of_scalar_parameters_change_no_bit", "correct")
def _():
    import jax

    import jaxpp_mlir as pp

    rng = np.random.default_rng(3)
    params = [[np.float32(rng.standard_normal()) for _ in range(3)] for _ in range(2)]
    batch = tuple(rng.standard_normal((4, 32, 300)).astype(np.float32) for _ in range(2))
    results = {}
    for packed in ("0", "1"):
        with environment(PACK_ACCUMULATORS=packed):
            lowered = jax.jit(_scalar_model_step).lower(params, batch)
            program = pp.partition(lowered, mesh=mesh(2), schedule=pp.GPipe(2)).compile()
        results[packed] = jax.tree_util.tree_leaves(program(params, batch))
    for unpacked, packed in zip(results["0"], results["1"], strict=True):
        np.testing.assert_array_equal(np.asarray(packed), np.asarray(unpacked))
    return "same as jax.jit"  # the harness's word for "the right result": here, bit for bit


# ------------------------------------------------------------------ the launcher

STALLS_BEFORE_ITS_FIRST_CALL = """\
import os, sys, time
import jax
from jaxpp_mlir.launch import initialize_from_env
initialize_from_env()
if jax.process_index() == 0:
    while True:  # plain Python, no jaxpp call yet
        time.sleep(0.1)
sys.stdout.flush()
os._exit(0)  # process 1 leaves without waiting for its peer
"""


@case(
    "launch_process_stalls_before_its_first_jaxpp_call",
    "exit",
    "124",
    "process 0 still running 2 s after process 1 exited with 0 (limit "
    "JAXPP_MLIR_SHUTDOWN_TIMEOUT): stalled, maybe before its first jaxpp call",
)
def _():
    script = scratch() / "stalls.py"
    script.write_text(STALLS_BEFORE_ITS_FIRST_CALL)
    with environment(SHUTDOWN_TIMEOUT="2"):
        return run_tool("-m", "jaxpp_mlir.launch", "--nproc", "2", str(script))


# ------------------------------------------------------------------ threads and donation


@case("two_threads_call_a_step_with_the_same_donated_arrays", "correct")
def _():
    """Each call either gives the right result or a CallError naming the donated input,
    never XLA's bare 'Invalid buffer passed to Execute()' (which call wins is a race)."""
    import threading

    import jax

    import jaxpp_mlir as pp

    params, batch = make_inputs()
    step = jax.jit(gradient_step, donate_argnums=0)
    program = pp.partition(step.lower(params, batch), mesh=mesh(2), schedule=pp.Std1F1B(2))
    compiled = program.compile()

    def on_device():
        return [jax.device_put(p, jax.devices()[0]) for p in params]

    want = [np.asarray(x) for x in jax.tree_util.tree_leaves(compiled(on_device(), batch))]
    for _ in range(10):
        shared, barrier, outcomes = on_device(), threading.Barrier(2), []

        def call(shared=shared, barrier=barrier, outcomes=outcomes):
            barrier.wait()
            try:
                outcomes.append(jax.tree_util.tree_leaves(compiled(shared, batch)))
            except Exception as e:  # noqa: BLE001 - judged below
                outcomes.append(e)

        threads = [threading.Thread(target=call) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert len(outcomes) == 2, outcomes
        for outcome in outcomes:
            if isinstance(outcome, Exception):
                assert type(outcome).__name__ == "CallError", repr(outcome)
                assert "argument params[0] (input 0)" in str(outcome), str(outcome)
                assert "donated" in str(outcome), str(outcome)
            else:
                for got, expected in zip(outcome, want, strict=True):
                    np.testing.assert_array_equal(np.asarray(got), expected)
    return "same as jax.jit"  # the harness's word for "the right result"
