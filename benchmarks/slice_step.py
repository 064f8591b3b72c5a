"""Pipelined training step (no microbatch loop) against plain jax.jit, side by side.

Run: python benchmarks/slice_step.py [--stages 4] [--width 256] [--steps 20]

Prints lower / partition / compile / first-call seconds, the median step time
of the pipelined program and of plain jax.jit (both measured in this process,
parameters fed back every step), their ratio, and the max abs difference of
parameters and loss after all steps, absolute and in ulps of each leaf's largest
magnitude (``max_ulps``); then the same as one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from reference import max_abs_diff, max_ulps  # noqa: E402

import jaxpp_mlir as pp  # noqa: E402


def build(num_stages: int, layers_per_stage: int, width: int, batch: int):
    keys = jax.random.split(jax.random.PRNGKey(0), num_stages * layers_per_stage + 2)
    params = [
        (jax.random.normal(k, (width, width)) / np.sqrt(width), jnp.zeros((width,)))
        for k in keys[:-2]
    ]
    x = jax.random.normal(keys[-2], (batch, width))
    y = jax.random.normal(keys[-1], (batch, width))

    def model(params, x):
        for index, (w, b) in enumerate(params):
            x = x @ w + b
            if index < len(params) - 1:
                x = jnp.tanh(x)
            if index % layers_per_stage == layers_per_stage - 1:
                x = pp.pipeline_enter_stage(x)
        return x

    def step(params, x, y):
        loss, grads = jax.value_and_grad(lambda p: jnp.mean((model(p, x) - y) ** 2))(params)
        return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads), loss

    return step, params, x, y


def median_step_seconds(fn, params, x, y, steps: int, warmup: int = 3) -> tuple[float, object]:
    for _ in range(warmup):
        params, loss = fn(params, x, y)
    jax.block_until_ready((params, loss))
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        params, loss = fn(params, x, y)
        jax.block_until_ready((params, loss))
        times.append(time.perf_counter() - start)
    return statistics.median(times), (params, loss)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--stages", type=int, default=4)
    parser.add_argument("--layers-per-stage", type=int, default=2)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()

    step, params, x, y = build(args.stages, args.layers_per_stage, args.width, args.batch)
    devices = np.array(jax.devices()[: args.stages])
    mesh = pp.MpmdMesh(jax.sharding.Mesh(devices, ("stage",)), "stage")

    t0 = time.perf_counter()
    lowered = jax.jit(step).lower(params, x, y)
    t1 = time.perf_counter()
    program = pp.partition(lowered, mesh=mesh)
    t2 = time.perf_counter()
    compiled = program.compile()
    t3 = time.perf_counter()
    jax.block_until_ready(compiled(params, x, y))
    t4 = time.perf_counter()

    jitted = jax.jit(step)
    j0 = time.perf_counter()
    jax.block_until_ready(jitted(params, x, y))
    j1 = time.perf_counter()

    ours, (our_params, our_loss) = median_step_seconds(compiled, params, x, y, args.steps)
    theirs, (ref_params, ref_loss) = median_step_seconds(jitted, params, x, y, args.steps)
    record = {
        "workload": f"mlp_s{args.stages}_l{args.layers_per_stage}_w{args.width}_b{args.batch}",
        "lower_s": t1 - t0,
        "partition_s": t2 - t1,
        "compile_s": t3 - t2,
        "first_call_s": t4 - t3,
        "jit_compile_and_first_call_s": j1 - j0,
        "step_s": ours,
        "jit_step_s": theirs,
        "step_ratio": ours / theirs,
        "max_abs_diff": max_abs_diff((our_params, our_loss), (ref_params, ref_loss)),
        "max_ulps": max_ulps((our_params, our_loss), (ref_params, ref_loss)),
    }
    for key, value in record.items():
        print(f"{key:>30}: {value:.6f}" if isinstance(value, float) else f"{key:>30}: {value}")
    print(json.dumps(record))


if __name__ == "__main__":
    main()
