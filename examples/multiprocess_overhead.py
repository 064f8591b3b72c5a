"""Per-step time of a pipelined training step: one process against several processes.

    python examples/multiprocess_overhead.py                     # one process, 8 CPU devices
    python -m jaxpp_mlir.launch --nproc 2 --devices-per-proc 4 examples/multiprocess_overhead.py
    python -m jaxpp_mlir.launch --nproc 4 --devices-per-proc 2 examples/multiprocess_overhead.py

The same step (an MLP of ``--ranks`` stages, a treduce over ``--microbatches``
microbatches, plain SGD) is partitioned with Std1F1B on ``--ranks`` ranks of
one device, spread evenly over the processes. After warm-up steps, each of
``--steps`` steps is timed from dispatch to its outputs being ready in every
process (``--repeats`` rounds; the median round is kept). Process 0 prints a
JSON line with the step time and the number of cross-process transfers per
step.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

from jaxpp_mlir.launch import initialize_from_env, pipeline_devices  # noqa: E402

initialize_from_env()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxpp_mlir as pp  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--microbatch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    def loss_fn(params, microbatch):
        x, y = microbatch
        for w in params:
            x = pp.pipeline_enter_stage(jnp.tanh(x @ w))
        return jnp.mean((x - y) ** 2)

    def train_step(params, batch):
        losses, grads = pp.treduce(
            lambda mb: jax.value_and_grad(loss_fn)(params, mb),
            batch,
            operation=(pp.Concat(), pp.Add),
        )
        return [p - 0.01 * g for p, g in zip(params, grads, strict=True)], losses

    keys = jax.random.split(jax.random.PRNGKey(0), args.ranks + 2)
    params = [
        np.asarray(jax.random.normal(k, (args.width, args.width)) / np.sqrt(args.width))
        for k in keys[: args.ranks]
    ]
    shape = (args.microbatches, args.microbatch_size, args.width)
    batch = tuple(np.asarray(jax.random.normal(k, shape)) for k in keys[args.ranks :])

    devices = pipeline_devices(args.ranks).reshape(-1)
    mesh = pp.MpmdMesh(jax.sharding.Mesh(devices, ("stage",)), "stage")
    program = pp.partition(
        jax.jit(train_step).lower(params, batch), mesh=mesh, schedule=pp.Std1F1B(args.ranks)
    )
    step = program.compile()
    executable = step.executable
    cross = sum(len(g.transfers) for g in getattr(executable, "groups", ()))

    def sync():  # every process's work of the step is done
        if jax.process_count() > 1:
            from jax.experimental import multihost_utils

            multihost_utils.sync_global_devices("step")

    state = params
    for _ in range(3):
        state, losses = step(state, batch)
        jax.block_until_ready((state, losses))
    sync()
    rounds = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        for _ in range(args.steps):
            state, losses = step(state, batch)
            jax.block_until_ready((state, losses))
        sync()
        rounds.append((time.perf_counter() - start) / args.steps)
    step_ms = statistics.median(rounds) * 1e3
    if jax.process_index() == 0:
        print(
            json.dumps(
                {
                    "processes": jax.process_count(),
                    "ranks": args.ranks,
                    "width": args.width,
                    "microbatches": args.microbatches,
                    "cross_process_transfers_per_step": cross,
                    "step_ms": round(step_ms, 3),
                    "rounds_ms": [round(r * 1e3, 3) for r in rounds],
                }
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
