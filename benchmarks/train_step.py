"""The main job's training step (examples/train_mlp.py) against plain jax.jit, per schedule.

Run: python benchmarks/train_step.py [--steps 30] [--warmup 3] [--microbatches 8,32]

The step is the README's main job: a 4-stage MLP (2 layers of width 64 per
stage), ``treduce`` over microbatches of 8 of ``value_and_grad`` of the MSE, then
optax Adam, on 4 CPU devices. For each schedule and microbatch count it prints
the median step time (parameters and optimizer state fed back, the pipelined
step and plain ``jax.jit`` of the same step on one device alternating), their
ratio, ``peak_bytes_per_rank()`` (each rank's peak live bytes during a
step), and how far the last step's loss and the state after all steps are from plain
jit's: the loss's relative difference and ``max_ulps_*`` in ulps of each leaf's largest
magnitude (reference.py's ``max_ulps``); then one JSON line per row.
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
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import jax  # noqa: E402
import numpy as np  # noqa: E402
import train_mlp as job  # noqa: E402
from reference import max_ulps  # noqa: E402

import jaxpp_mlir as pp  # noqa: E402


def measure(schedule_name: str, num_microbatches: int, steps: int, warmup: int) -> dict:
    job.MICROBATCHES = num_microbatches  # the loss divides by it
    key_params, key_x, key_y = jax.random.split(jax.random.PRNGKey(0), 3)
    params = job.init_params(key_params)
    opt_state = job.optimizer.init(params)
    shape = (num_microbatches, job.MICROBATCH_SIZE, job.WIDTH)
    batch = (jax.random.normal(key_x, shape), jax.random.normal(key_y, shape))
    mesh = pp.MpmdMesh(
        jax.sharding.Mesh(np.array(jax.devices()[: job.NUM_STAGES]), ("stage",)), "stage"
    )
    lowered = jax.jit(job.train_step).lower(params, opt_state, batch)
    program = pp.partition(lowered, mesh=mesh, schedule=job.SCHEDULES[schedule_name]())
    pipelined = program.compile()
    reference = jax.jit(job.train_step)
    ours = theirs = (params, opt_state)
    times: dict[str, list[float]] = {"pipelined": [], "jit": []}
    for index in range(warmup + steps):
        t0 = time.perf_counter()
        *ours, loss = pipelined(*ours, batch)
        jax.block_until_ready((ours, loss))
        t1 = time.perf_counter()
        *theirs, reference_loss = reference(*theirs, batch)
        jax.block_until_ready((theirs, reference_loss))
        t2 = time.perf_counter()
        if index >= warmup:
            times["pipelined"].append(t1 - t0)
            times["jit"].append(t2 - t1)
    ours_s, jit_s = statistics.median(times["pipelined"]), statistics.median(times["jit"])
    return {
        "schedule": schedule_name,
        "microbatches": num_microbatches,
        "step_s": ours_s,
        "jit_step_s": jit_s,
        "step_ratio": ours_s / jit_s,
        "peak_bytes_per_rank": program.peak_bytes_per_rank(),
        "loss_rel_diff": abs(float(loss) - float(reference_loss)) / abs(float(reference_loss)),
        "max_ulps_state": max_ulps(ours, theirs),
        "max_ulps_loss": max_ulps(loss, reference_loss),
        "steps": steps,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--microbatches", default="8,32")
    parser.add_argument("--schedules", default=",".join(job.SCHEDULES))
    args = parser.parse_args()
    records = [
        measure(name, int(m), args.steps, args.warmup)
        for m in args.microbatches.split(",")
        for name in args.schedules.split(",")
    ]
    print(
        f"main job: {job.NUM_STAGES} stages x {job.LAYERS_PER_STAGE} layers of width "
        f"{job.WIDTH}, microbatches of {job.MICROBATCH_SIZE}, optax Adam; median of "
        f"{args.steps} steps (load avg {os.getloadavg()[0]:.2f})"
    )
    print(
        f"{'schedule':<11} {'mb':>3} {'step ms':>8} {'jit ms':>7} {'ratio':>6} "
        f"{'loss rel diff':>13} {'ulps':>5}  peak bytes per rank"
    )
    for r in records:
        print(
            f"{r['schedule']:<11} {r['microbatches']:>3} {r['step_s'] * 1e3:>8.2f} "
            f"{r['jit_step_s'] * 1e3:>7.2f} {r['step_ratio']:>6.2f} {r['loss_rel_diff']:>13.1e}"
            f" {max(r['max_ulps_state'], r['max_ulps_loss']):>5.3g}"
            f"  {r['peak_bytes_per_rank']}"
        )
    for r in records:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
