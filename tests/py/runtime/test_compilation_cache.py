"""Stage executables in JAX's persistent compilation cache
(``runtime/compilation/executable_cache.py``).

Each scenario runs ``compilation_cache_worker.py`` in fresh processes on a private
cache directory (the session's shared cache is not used), reads the hits and misses
the worker counted, and compares its outputs bit for bit with plain ``jax.jit`` of the
same step in this process.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
from collections.abc import Iterator

import compilation_cache_worker as worker
import jax
import numpy as np
import pytest
import toolkit
from jax.extend import backend as jax_backend
from jaxpp_mlir.runtime.compilation import executable_cache

WORKER = str(pathlib.Path(worker.__file__))
TIMEOUT = 300


def _env(cache_dir: pathlib.Path) -> dict[str, str]:
    env = {
        **os.environ,
        "JAX_COMPILATION_CACHE_DIR": str(cache_dir),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
    }
    env.pop("JAXPP_MLIR_COMPILATION_CACHE", None)
    return env


def _run_single(
    python, cache_dir: pathlib.Path, out_dir: pathlib.Path, phases: list[dict]
) -> tuple[list[dict], subprocess.CompletedProcess]:
    """Runs the worker's phases in one process, started through ``python`` (a
    conftest.PythonServer)."""
    out_dir.mkdir()
    result = subprocess.run(
        [*python.command, WORKER, "single", str(out_dir), json.dumps(phases)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={**_env(cache_dir), **python.env},
    )
    assert result.returncode == 0, result.stderr[-5000:]
    counts = [json.loads((out_dir / f"phase{i}.json").read_text()) for i in range(len(phases))]
    return counts, result


def _entries(cache_dir: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in cache_dir.iterdir() if p.name.startswith(worker.CACHE_ENTRY_PREFIX))


@pytest.fixture(scope="module")
def reference():
    """Plain ``jax.jit`` of the step, per width."""
    results = {}

    def get(width: int) -> list[np.ndarray]:
        if width not in results:
            params, batch = worker.make_inputs(width)
            outputs = jax.jit(worker.step)(params, batch)
            results[width] = [np.asarray(x) for x in jax.tree_util.tree_leaves(outputs)]
        return results[width]

    return get


def _outputs(path: pathlib.Path) -> list[np.ndarray]:
    with np.load(path) as got:
        return [got[f"arr_{i}"] for i in range(len(got.files))]


def _assert_outputs(path: pathlib.Path, want: list[np.ndarray]) -> None:
    """The outputs saved at ``path`` against plain ``jax.jit``'s (another program)."""
    toolkit.assert_matches_reference(_outputs(path), want, toolkit.SEPARATE_PROGRAMS)


FIRST_PROCESS_CACHE = "cache_after_first"


@pytest.fixture(scope="module")
def populated(tmp_path_factory, python_server):
    """A cache filled by one process: the cache off, then under a compile-time
    threshold no stage beats, then on (twice the same program in one process)."""
    root = tmp_path_factory.mktemp("compilation_cache")
    cache_dir = root / "cache"
    phases = [
        {"width": 8, "cache": 0},
        {"width": 8, "min_compile_secs": 1e6},
        {"width": 8},
    ]
    counts, _ = _run_single(python_server, cache_dir, root / "first", phases)
    shutil.copytree(cache_dir, root / FIRST_PROCESS_CACHE)  # as the first process left it
    return root, cache_dir, counts


def test_cache_off_or_under_thresholds_writes_nothing(populated, reference):
    root, _, (off, too_fast, _) = populated
    assert off["made"] > 0
    assert (off["hits"], off["misses"], off["entries"]) == (0, 0, 0)
    assert (too_fast["hits"], too_fast["misses"], too_fast["entries"]) == (0, off["made"], 0)
    for phase in (0, 1):
        _assert_outputs(root / "first" / f"phase{phase}.npz", reference(8))


def test_first_process_compiles_and_stores(populated, reference):
    root, cache_dir, (off, _, on) = populated
    assert on["made"] == off["made"]
    assert (on["hits"], on["misses"], on["entries"]) == (0, on["made"], on["made"])
    assert len(_entries(cache_dir)) == on["made"]
    _assert_outputs(root / "first" / "phase2.npz", reference(8))


def test_second_process_loads_and_other_devices_or_modules_miss(
    populated, reference, tmp_path, python_server
):
    root, cache_dir, (_, _, stored) = populated
    phases = [{"width": 8}, {"width": 8, "first": 2}, {"width": 16}]
    same, other_devices, other_module = _run_single(
        python_server, cache_dir, tmp_path / "second", phases
    )[0]
    assert (same["made"], same["hits"], same["misses"]) == (stored["made"], stored["made"], 0)
    assert same["entries"] == stored["entries"]
    assert (other_devices["hits"], other_devices["misses"]) == (0, stored["made"])
    assert other_devices["entries"] == 2 * stored["made"]
    assert other_module["hits"] == 0 and other_module["misses"] == other_module["made"] > 0
    assert other_module["entries"] == other_devices["entries"] + other_module["made"]
    _assert_outputs(tmp_path / "second" / "phase0.npz", reference(8))
    # The cache's programs are the first process's: its numbers bit for bit.
    toolkit.assert_same_program(
        _outputs(tmp_path / "second" / "phase0.npz"), _outputs(root / "first" / "phase2.npz")
    )
    _assert_outputs(tmp_path / "second" / "phase1.npz", reference(8))
    _assert_outputs(tmp_path / "second" / "phase2.npz", reference(16))


def _corrupt(entries: list[pathlib.Path]) -> None:
    """Each entry broken one of three ways: a flipped byte, truncated, replaced."""
    for index, path in enumerate(entries):
        data = bytearray(path.read_bytes())
        if index % 3 == 0:
            data[len(data) // 2] ^= 0xFF
        elif index % 3 == 1:
            data = data[: len(data) // 2]
        else:
            data = bytearray(b"not a cache entry")
        path.write_bytes(bytes(data))


@contextlib.contextmanager
def _swapped_in(cache_dir: pathlib.Path, replacement: pathlib.Path) -> Iterator[None]:
    """A copy of ``replacement`` at ``cache_dir``'s path for the block, the original back
    afterwards: JAX's cache keys hold the directory's path, so a copy elsewhere would miss."""
    kept = cache_dir.with_name(cache_dir.name + "_kept")
    cache_dir.rename(kept)
    shutil.copytree(replacement, cache_dir)
    try:
        yield
    finally:
        shutil.rmtree(cache_dir)
        kept.rename(cache_dir)


def test_corrupted_entries_compile_again(populated, tmp_path, reference, python_server):
    # The cache as the first process left it (width 8), every entry broken.
    root, cache_dir, (_, _, stored) = populated
    with _swapped_in(cache_dir, root / FIRST_PROCESS_CACHE):
        entries = _entries(cache_dir)
        assert len(entries) == stored["made"] >= 3
        _corrupt(entries)
        (again,), result = _run_single(python_server, cache_dir, tmp_path / "again", [{"width": 8}])
    assert (again["hits"], again["misses"]) == (0, again["made"])
    assert result.stderr.count("is unusable") == again["made"]
    _assert_outputs(tmp_path / "again" / "phase0.npz", reference(8))


@pytest.mark.parametrize("damage", ["flip", "truncate", "magic", "empty"])
def test_unpack_refuses_a_damaged_entry(damage):
    entry = bytearray(executable_cache.pack(b"serialized executable bytes", 0.25, "key"))
    assert executable_cache.unpack(bytes(entry), "key") == b"serialized executable bytes"
    if damage == "flip":
        entry[-3] ^= 0x01
    elif damage == "truncate":
        del entry[-5:]
    elif damage == "magic":
        entry[0] ^= 0x01
    else:
        entry = bytearray()
    with pytest.raises(executable_cache.CorruptEntry):
        executable_cache.unpack(bytes(entry), "key")


def test_key_covers_devices_and_module():
    devices = jax.devices()
    client = devices[0].client
    text = (
        "func.func public @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
        "  return %x : tensor<2xf32>\n}"
    )
    other = text.replace("2xf32", "3xf32")

    def key(module: str, chosen) -> str:
        chosen = tuple(chosen)
        options = jax_backend.get_compile_options(
            num_replicas=1,
            num_partitions=len(chosen),
            device_assignment=np.array([[d.id for d in chosen]]),
            backend=client,
        )
        return executable_cache.cache_key(module, chosen, options)

    base = key(text, devices[:1])
    assert base == key(text, devices[:1])
    assert base != key(text, devices[1:2])
    assert base != key(other, devices[:1])
    assert key(text, devices[:2]) != key(text, devices[2:4])


@pytest.mark.slow  # two 2-process launches
def test_two_processes_share_one_cache_dir(tmp_path, reference, python_server):
    cache_dir = tmp_path / "cache"
    runs = []
    for name in ("first", "second"):
        out_dir = tmp_path / name
        out_dir.mkdir()
        command = [
            sys.executable,
            "-m",
            "jaxpp_mlir.launch",
            "--nproc",
            "2",
            "--devices-per-proc",
            "1",
            "--grace",
            "20",
            "--timeout",
            str(TIMEOUT),
            WORKER,
            "multi",
            str(out_dir),
        ]
        result = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=TIMEOUT + 30,
            env={**_env(cache_dir), **python_server.env},
        )
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        runs.append([json.loads((out_dir / f"process{p}.json").read_text()) for p in (0, 1)])
        _assert_outputs(out_dir / "outputs.npz", reference(8))
    first, second = runs
    for process in (0, 1):
        made = first[process]["made"]
        assert made > 0
        assert (first[process]["hits"], first[process]["misses"]) == (0, made)
        assert second[process] == {"made": made, "hits": made, "misses": 0}
    assert len(_entries(cache_dir)) == first[0]["made"] + first[1]["made"]
