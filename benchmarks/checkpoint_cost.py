"""Seconds and bytes of a stage-local checkpoint of the main job's model (examples/train_mlp.py).

Trains the 4-stage MLP (Adam) for 2 steps, then saves its parameters and optimizer
state with ``jaxpp_mlir.checkpoint`` (orbax, each leaf from its rank) and restores
them onto the same placement; prints the medians of a few repetitions and the
bytes on disk against the bytes of the state.
"""

from __future__ import annotations

import os
import pathlib
import statistics
import sys
import tempfile
import time

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))

import jax  # noqa: E402
import numpy as np  # noqa: E402
import train_mlp  # noqa: E402

import jaxpp_mlir as pp  # noqa: E402
from jaxpp_mlir import checkpoint  # noqa: E402

REPEATS = 5


def main() -> None:
    params = train_mlp.init_params(jax.random.PRNGKey(0))
    opt_state = train_mlp.optimizer.init(params)
    shape = (train_mlp.MICROBATCHES, train_mlp.MICROBATCH_SIZE, train_mlp.WIDTH)
    key_x, key_y = jax.random.split(jax.random.PRNGKey(1))
    batch = (jax.random.normal(key_x, shape), jax.random.normal(key_y, shape))
    devices = np.array(jax.devices()[: train_mlp.NUM_STAGES])
    mesh = pp.MpmdMesh(jax.sharding.Mesh(devices, ("stage",)), "stage")
    lowered = jax.jit(train_mlp.train_step).lower(params, opt_state, batch)
    step = pp.partition(lowered, mesh=mesh).compile()
    for _ in range(2):
        params, opt_state, _ = step(params, opt_state, batch)
    state = jax.block_until_ready((params, opt_state))
    state_bytes = sum(x.nbytes for x in jax.tree.leaves(state))
    saves, restores, on_disk = [], [], 0
    with tempfile.TemporaryDirectory() as root:
        for i in range(REPEATS):
            path = pathlib.Path(root) / f"ckpt{i}"
            start = time.perf_counter()
            checkpoint.save(path, state)
            saves.append(time.perf_counter() - start)
            on_disk = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
            start = time.perf_counter()
            jax.block_until_ready(checkpoint.restore(path, state))
            restores.append(time.perf_counter() - start)
    print(f"state: {len(jax.tree.leaves(state))} arrays, {state_bytes} bytes")
    print(f"on disk: {on_disk} bytes ({on_disk / state_bytes:.2f}x the state)")
    print(
        f"save: {statistics.median(saves):.3f} s, restore: {statistics.median(restores):.3f} s "
        f"(medians of {REPEATS})"
    )


if __name__ == "__main__":
    main()
