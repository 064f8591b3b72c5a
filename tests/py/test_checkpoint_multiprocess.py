"""Stage-local checkpoints across processes: 2 processes x 4 devices and 1 process x 8.

One launch of the two worker processes (``multiprocess/checkpoint_worker.py``)
serves every check: a train / save / train / restore / train round trip,
restores of a checkpoint saved by one process, restores into a program with
another schedule, and where the outputs of a distributed program say they
live. This process saves the checkpoint the workers restore and restores the
one they save.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys

import jax
import numpy as np
import pytest
import toolkit
from jax.sharding import PartitionSpec as P

pytest.importorskip("tensorstore")

from jaxpp_mlir import checkpoint  # noqa: E402

HERE = pathlib.Path(__file__).parent / "multiprocess"
LIMITS = {  # bounded waits inside the workers
    "JAXPP_MLIR_SETUP_TIMEOUT": "60",
    "JAXPP_MLIR_TRANSFER_TIMEOUT": "60",
    "JAXPP_MLIR_PEER_TIMEOUT": "15",
    "JAXPP_MLIR_HEARTBEAT_TIMEOUT": "15",
}


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"jaxpp_{name}", HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


cm = _load("checkpoint_model")


def flat(state) -> dict[str, np.ndarray]:
    return {
        jax.tree_util.keystr(path): np.asarray(leaf)
        for path, leaf in jax.tree_util.tree_flatten_with_path(state)[0]
    }


@pytest.fixture(scope="module")
def run(tmp_path_factory, python_server):
    """The single-process side, then one launch of the two workers."""
    out = tmp_path_factory.mktemp("checkpoints")
    devices = np.array(jax.devices()).reshape(cm.NUM_RANKS, cm.DEVICES_PER_RANK)
    (std,) = cm.compile_programs(devices, ("std1f1b",)).values()
    params, opt_state, batch = cm.initial_state()
    step3 = cm.train(std, params, opt_state, batch, 3)
    checkpoint.save(out / "one_step3", step3)
    after5 = cm.train(std, *step3, batch, 2)
    command = [
        sys.executable, "-m", "jaxpp_mlir.launch", "--nproc", "2", "--devices-per-proc", "4",
        "--grace", "20", "--timeout", "100", str(HERE / "checkpoint_worker.py"), str(out),
    ]  # fmt: skip
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=130,
        env={**os.environ, **LIMITS, **python_server.env},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.count("checkpoint worker: done") == 2
    refusals = re.findall(r"mismatched save refused: (.*)", result.stdout)
    assert len(refusals) == 2 and all("with the same path" in r for r in refusals), refusals
    refusals = re.findall(r"bad leaf refused: (.*)", result.stdout)
    assert len(refusals) == 2 and all("leaf ['x'] is a object" in r for r in refusals), refusals
    states = np.load(out / "states.npz")
    by_run: dict[str, dict[str, np.ndarray]] = {}
    for key in states.files:
        name, path = key.split("/", 1)
        by_run.setdefault(name, {})[path] = states[key]
    return out, std, after5, by_run


def assert_same(actual: dict, expected: dict, what: str) -> None:
    assert actual.keys() == expected.keys(), what
    for path, value in expected.items():
        np.testing.assert_array_equal(actual[path], value, err_msg=f"{what}: {path}")


@pytest.mark.slow
def test_two_processes_train_save_train_restore_train(run):
    out, std, after5, by_run = run
    five = flat(after5)  # this process, 5 steps straight through
    assert_same(by_run["after5"], five, "2 processes, 5 steps straight through")
    assert_same(by_run["again5"], five, "2 processes, 3 steps, restore, 2 steps")
    # Plain jax.jit: the Adam update runs as per-rank programs, whose elementwise
    # arithmetic XLA may contract differently (a few float32 ulps, as in train_mlp.py).
    reference = flat(cm.jit_reference(5))
    toolkit.assert_matches_reference(
        {path: by_run["again5"][path] for path in reference}, reference, toolkit.SEVERAL_STEPS
    )


@pytest.mark.slow
def test_restore_across_process_counts_is_exact(run):
    out, std, after5, by_run = run
    five = flat(after5)
    # saved by this one process (8 devices), restored by two processes (4 devices each)
    assert_same(by_run["one5"], five, "saved in 1 process, restored in 2")
    # saved by two processes, restored by this one
    restored = checkpoint.restore(out / "two_step3", after5)
    for got, want in zip(jax.tree.leaves(restored), jax.tree.leaves(after5), strict=True):
        assert got.sharding == want.sharding
    _, opt_state, batch = cm.initial_state()
    assert_same(flat(cm.train(std, *restored, batch, 2)), five, "saved in 2, restored in 1")


@pytest.mark.slow
def test_restore_into_another_schedule_across_processes(run):
    out, std, after5, by_run = run
    assert_same(by_run["gpipe5"], flat(after5), "Std1F1B checkpoint, GPipe program")


@pytest.mark.slow
def test_outputs_of_two_processes_say_where_they_live_as_in_one(run):
    out, std, after5, by_run = run
    one = {path: place for path, place in _placement(std, after5).items()}
    views = [json.loads((out / f"placement_p{p}.json").read_text()) for p in (0, 1)]
    for p, view in enumerate(views):
        assert view.keys() == one.keys()
        for path, place in view.items():
            ranks = one[path]["ranks"]
            # A small value every rank reads (Adam's count) is one array replicated over
            # those ranks in one process; with several processes it stays on the first.
            assert place["ranks"] == ranks[:1], (p, path)
            assert place["spec"] == one[path]["spec"], (p, path)
            assert place["mesh"] == {"stage": 1, "model": cm.DEVICES_PER_RANK}, (p, path)
            # ranks 0, 1 live in process 0, ranks 2, 3 in process 1
            assert place["remote"] == (place["ranks"][0] // 2 != p), (p, path)
    assert one["[0][1]['w']"] == {"ranks": [1], "spec": str(P(None, "model"))}
    assert one["[1][0].count"]["ranks"] == [0, 1, 2, 3]


def _placement(step, state) -> dict[str, dict]:
    placed = step.placement(state)
    return {
        jax.tree_util.keystr(path): {"ranks": list(where.mpmd_idxs), "spec": str(where.spec)}
        for (path, _), where in zip(
            jax.tree_util.tree_flatten_with_path(state)[0], jax.tree.leaves(placed), strict=True
        )
    }
