"""Seconds and bytes of a stage-local checkpoint of the main job's model (examples/train_mlp.py),
in one process of 8 devices and in two processes of 4, side by side.

    python benchmarks/checkpoint_cost.py

Trains the 4-stage MLP (Adam) for 2 steps, then saves its parameters and
optimizer state with ``jaxpp_mlir.checkpoint`` (each leaf written by the
process holding its rank) and restores them onto the same placement; prints
the medians of a few repetitions, the bytes on disk against the bytes of the
state, and the two-process figures over the one-process ones. The
two-process run is this script launched by ``jaxpp_mlir.launch`` with
``--worker``; a collective save counts until every process is done (the
slowest process's time), a restore (not collective) the slowest process's
time too.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))

REPEATS = 5


def measure(root: str) -> dict:
    """This process's save and restore seconds (medians) and the checkpoint's bytes."""
    import jax
    import numpy as np
    import train_mlp

    import jaxpp_mlir as pp
    from jaxpp_mlir import checkpoint
    from jaxpp_mlir.launch import pipeline_devices

    params = train_mlp.init_params(jax.random.PRNGKey(0))
    opt_state = train_mlp.optimizer.init(params)
    shape = (train_mlp.MICROBATCHES, train_mlp.MICROBATCH_SIZE, train_mlp.WIDTH)
    key_x, key_y = jax.random.split(jax.random.PRNGKey(1))
    batch = (jax.random.normal(key_x, shape), jax.random.normal(key_y, shape))
    devices = pipeline_devices(train_mlp.NUM_STAGES).reshape(-1)
    mesh = pp.MpmdMesh(jax.sharding.Mesh(devices, ("stage",)), "stage")
    lowered = jax.jit(train_mlp.train_step).lower(params, opt_state, batch)
    step = pp.partition(lowered, mesh=mesh).compile()
    for _ in range(2):
        params, opt_state, _ = step(params, opt_state, batch)
    state = (params, opt_state)
    local = [x for x in jax.tree.leaves(state) if isinstance(x, jax.Array)]
    jax.block_until_ready(local)
    leaves = jax.tree.leaves(state)
    saves, restores = [], []
    for i in range(REPEATS):
        path = os.path.join(root, f"ckpt{i}")
        start = time.perf_counter()
        checkpoint.save(path, state)
        saves.append(time.perf_counter() - start)
        start = time.perf_counter()
        restored = checkpoint.restore(path, state)
        jax.block_until_ready([x for x in jax.tree.leaves(restored) if isinstance(x, jax.Array)])
        restores.append(time.perf_counter() - start)
    files = [f for f in pathlib.Path(root, "ckpt0").rglob("*") if f.is_file()]
    return {
        "arrays": len(leaves),
        "state_bytes": int(sum(np.prod(x.shape) * np.dtype(x.dtype).itemsize for x in leaves)),
        "local_bytes": int(sum(x.nbytes for x in local)),
        "disk_bytes": sum(f.stat().st_size for f in files),
        "save_s": statistics.median(saves),
        "restore_s": statistics.median(restores),
    }


def worker(root: str) -> None:
    from jaxpp_mlir.launch import initialize_from_env

    initialize_from_env()
    print("RESULT " + json.dumps(measure(root)), flush=True)


def two_processes(root: str) -> list[dict]:
    command = [
        sys.executable, "-m", "jaxpp_mlir.launch", "--nproc", "2", "--devices-per-proc", "4",
        "--timeout", "300", __file__, "--worker", root,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=330)
    if done.returncode != 0:
        raise SystemExit(f"the two-process run failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    found = re.findall(r"^\[p(\d)\] RESULT (.*)$", done.stdout, re.M)
    return [json.loads(text) for _, text in sorted(found)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--worker", metavar="DIR", help="(internal) one process of the 2")
    args = parser.parse_args()
    if args.worker:
        worker(args.worker)
        return
    with tempfile.TemporaryDirectory() as one_root, tempfile.TemporaryDirectory() as two_root:
        one = measure(one_root)
        parts = two_processes(two_root)
    two = {
        "save_s": max(p["save_s"] for p in parts),
        "restore_s": max(p["restore_s"] for p in parts),
        "disk_bytes": parts[0]["disk_bytes"],
    }
    print(f"state: {one['arrays']} leaves, {one['state_bytes']} bytes")
    print(f"{'':24}{'save s':>9}{'restore s':>11}{'on disk':>10}  (medians of {REPEATS})")
    for name, row in (("1 process x 8 devices", one), ("2 processes x 4 devices", two)):
        print(
            f"{name:24}{row['save_s']:9.3f}{row['restore_s']:11.3f}{row['disk_bytes']:10d}"
            f"  ({row['disk_bytes'] / one['state_bytes']:.2f}x the state)"
        )
    print(
        "per process (2 processes): "
        + ", ".join(
            f"p{i} holds {p['local_bytes']} bytes, save {p['save_s']:.3f} s, "
            f"restore {p['restore_s']:.3f} s"
            for i, p in enumerate(parts)
        )
    )
    print(
        f"2 processes / 1 process: save {two['save_s'] / one['save_s']:.2f}x, "
        f"restore {two['restore_s'] / one['restore_s']:.2f}x"
    )
    for name, row in (("1x8", one), ("2x4", two)):
        print(json.dumps({"benchmark": "checkpoint_cost", "processes": name, **row}))


if __name__ == "__main__":
    main()
