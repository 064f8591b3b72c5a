"""Step time of every pipeline schedule on one model, against GPipe and the simulator (issue 4).

Run: python benchmarks/schedules.py [--layers 8] [--width 256] [--microbatches 16]
                                    [--microbatch-size 8] [--ranks 4] [--steps 10] [--warmup 3]

One MLP (``x @ w + b``, ``tanh`` between layers), one ``treduce`` training step
(``value_and_grad`` of the MSE per microbatch, losses stacked with ``Concat``,
gradients summed with ``Add``, then SGD), on ``--ranks`` CPU devices. Schedules
with ``ranks`` stages (GPipe, Std1F1B, Eager1F1B, ZeroBubble) put a marker
after every ``layers / ranks`` layers; schedules with ``2 * ranks`` stages
(Interleaved1F1B, DualPipeV) after every ``layers / (2 * ranks)`` layers: the
same model and the same numbers, cut finer.

All programs are compiled first; then the timed steps go round-robin over the
schedules and plain ``jax.jit`` (one step each in turn, parameters fed back,
inputs placed once), so that every schedule sees the same machine load. For
each schedule it prints the median step time, its ratio to GPipe, the
simulator's predicted makespan ratio to GPipe (``schedule.simulate(n)`` with
the default costs: forward 1, backward 2, split backward 1 + 1 per task,
whatever the stage size) and with costs scaled by the layers per stage (the
work a task really does), the simulated bubble fraction, the partition and
compile seconds, and the max abs difference of the first step's parameters and
losses against plain ``jax.jit`` of the same step, and the same in ulps of each leaf's
largest magnitude (``max_ulps_*``); then one JSON line per schedule.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxpp_mlir as pp  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import (  # noqa: E402
    compile_uncached,
    max_abs_diff,
    max_ulps,
    place_pipelined_inputs,
)


def make_schedules(ranks: int) -> list[pp.Schedule]:
    return [
        pp.GPipe(ranks),
        pp.Std1F1B(ranks),
        pp.Eager1F1B(ranks),
        pp.Interleaved1F1B(2 * ranks, ranks),
        pp.ZeroBubble(ranks),
        pp.DualPipeV(2 * ranks, ranks),
    ]


def short_name(schedule: pp.Schedule) -> str:
    """``Interleaved1F1B(8,4)`` for a schedule of 8 stages on 4 ranks, ``GPipe(4)``..."""
    if schedule.mpmd_dim == schedule.num_stages:
        return f"{type(schedule).__name__}({schedule.num_stages})"
    return f"{type(schedule).__name__}({schedule.num_stages},{schedule.mpmd_dim})"


def init(num_layers: int, width: int, num_microbatches: int, microbatch_size: int):
    keys = jax.random.split(jax.random.PRNGKey(0), num_layers + 2)
    params = [
        (jax.random.normal(k, (width, width)) / np.sqrt(width), jnp.zeros((width,)))
        for k in keys[:num_layers]
    ]
    shape = (num_microbatches, microbatch_size, width)
    return params, jax.random.normal(keys[-2], shape), jax.random.normal(keys[-1], shape)


def make_step(num_layers: int, num_stages: int):
    layers_per_stage = num_layers // num_stages

    def loss(params, microbatch):
        x, y = microbatch
        for i, (w, b) in enumerate(params):
            x = x @ w + b
            if i < num_layers - 1:
                x = jnp.tanh(x)
            if i % layers_per_stage == layers_per_stage - 1:
                x = pp.pipeline_enter_stage(x)
        return jnp.mean((x - y) ** 2)

    def step(params, xs, ys):
        losses, grads = pp.treduce(
            lambda mb: jax.value_and_grad(loss)(params, mb),
            (xs, ys),
            operation=(pp.Concat(), pp.Add),
        )
        return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads), losses

    return step


def simulated_makespan(schedule: pp.Schedule, num_microbatches: int, scale: float | None):
    """Makespan with the default costs, or with every cost multiplied by ``scale``."""
    if scale is None:
        return schedule.simulate(num_microbatches)
    costs = {kind: scale * cost for kind, cost in pp.schedules.DEFAULT_COSTS.items()}
    return schedule.simulate(num_microbatches, costs=costs)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--microbatches", type=int, default=16)
    parser.add_argument("--microbatch-size", type=int, default=8)
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    if args.layers % (2 * args.ranks):
        parser.error("--layers must be a multiple of 2 * --ranks (8-stage schedules)")

    params, xs, ys = init(args.layers, args.width, args.microbatches, args.microbatch_size)
    mesh = pp.MpmdMesh(
        jax.sharding.Mesh(np.array(jax.devices()[: args.ranks]), ("stage",)), "stage"
    )
    base_layers_per_stage = args.layers // args.ranks

    # Build every program first.
    entries = []
    jitted_by_stages = {}
    for schedule in make_schedules(args.ranks):
        step = make_step(args.layers, schedule.num_stages)
        t0 = time.perf_counter()
        lowered = jax.jit(step).lower(params, xs, ys)
        t1 = time.perf_counter()
        program = pp.partition(lowered, mesh=mesh, schedule=schedule)
        t2 = time.perf_counter()
        compiled = compile_uncached(program)
        t3 = time.perf_counter()
        first = jax.block_until_ready(compiled(params, xs, ys))
        if schedule.num_stages not in jitted_by_stages:
            jitted_by_stages[schedule.num_stages] = jax.jit(step)
        reference = jax.block_until_ready(jitted_by_stages[schedule.num_stages](params, xs, ys))
        layers_per_stage = args.layers // schedule.num_stages
        entries.append(
            {
                "schedule": schedule,
                "fn": compiled,
                "state": place_pipelined_inputs(program, (params, xs, ys)),
                "record": {
                    "schedule": repr(schedule),
                    "name": short_name(schedule),
                    "num_stages": schedule.num_stages,
                    "ranks": args.ranks,
                    "layers_per_stage": layers_per_stage,
                    "lower_s": t1 - t0,
                    "partition_s": t2 - t1,
                    "compile_s": t3 - t2,
                    "max_abs_diff_params": max_abs_diff(first[0], reference[0]),
                    "max_abs_diff_losses": max_abs_diff(first[1], reference[1]),
                    "max_ulps_params": max_ulps(first[0], reference[0]),
                    "max_ulps_losses": max_ulps(first[1], reference[1]),
                    "sim_default": simulated_makespan(schedule, args.microbatches, None),
                    "sim_scaled": simulated_makespan(
                        schedule, args.microbatches, layers_per_stage / base_layers_per_stage
                    ),
                },
            }
        )
        print(f"built {schedule!r}: partition {t2 - t1:.3f} s, compile {t3 - t2:.3f} s", flush=True)
    device = jax.devices()[0]
    entries.append(
        {
            "schedule": None,
            "fn": jitted_by_stages[args.ranks],
            "state": jax.device_put((params, xs, ys), device),
            "record": {"schedule": "plain jax.jit (1 device)", "name": "plain jax.jit"},
        }
    )

    # Timed steps, round-robin.
    for entry in entries:
        entry["params"], entry["times"] = entry["state"][0], []
    for iteration in range(args.warmup + args.steps):
        for entry in entries:
            start = time.perf_counter()
            entry["params"], losses = entry["fn"](entry["params"], *entry["state"][1:])
            jax.block_until_ready((entry["params"], losses))
            if iteration >= args.warmup:
                entry["times"].append(time.perf_counter() - start)

    gpipe = entries[0]
    gpipe_step = statistics.median(gpipe["times"])
    gpipe_default = gpipe["record"]["sim_default"].makespan
    gpipe_scaled = gpipe["record"]["sim_scaled"].makespan
    jit_step = statistics.median(entries[-1]["times"])
    records = []
    for entry in entries:
        record = entry["record"]
        record["step_s"] = statistics.median(entry["times"])
        record["step_ratio_to_gpipe"] = record["step_s"] / gpipe_step
        record["step_ratio_to_jit"] = record["step_s"] / jit_step
        if entry["schedule"] is not None:
            default, scaled = record.pop("sim_default"), record.pop("sim_scaled")
            record["sim_makespan"] = default.makespan
            record["sim_ratio_to_gpipe"] = default.makespan / gpipe_default
            record["sim_scaled_makespan"] = scaled.makespan
            record["sim_scaled_ratio_to_gpipe"] = scaled.makespan / gpipe_scaled
            record["sim_bubble_fraction"] = default.bubble_fraction
            record["sim_scaled_bubble_fraction"] = scaled.bubble_fraction
        record["microbatches"] = args.microbatches
        record["steps"] = args.steps
        records.append(record)

    print()
    print(
        f"{args.layers}-layer MLP, width {args.width}, {args.microbatches} microbatches of "
        f"{args.microbatch_size}, {args.ranks} CPU devices; median of {args.steps} steps "
        f"after {args.warmup} warm-up, round-robin (load avg {os.getloadavg()[0]:.2f})"
    )
    header = (
        f"{'schedule':<20} {'st':>3} {'step ms':>8} {'/GPipe':>7} {'sim /GPipe':>10} "
        f"{'sim(work) /GPipe':>16} {'bubble':>7} {'/jit':>6} {'part s':>7} {'comp s':>7} "
        f"{'max|diff|':>9} {'ulps':>5}"
    )
    print(header)
    for r in records:
        if "sim_ratio_to_gpipe" in r:
            print(
                f"{r['name']:<20} {r['num_stages']:>3} {r['step_s'] * 1e3:>8.2f} "
                f"{r['step_ratio_to_gpipe']:>7.3f} {r['sim_ratio_to_gpipe']:>10.3f} "
                f"{r['sim_scaled_ratio_to_gpipe']:>16.3f} {r['sim_scaled_bubble_fraction']:>7.3f} "
                f"{r['step_ratio_to_jit']:>6.2f} {r['partition_s']:>7.3f} {r['compile_s']:>7.3f} "
                f"{max(r['max_abs_diff_params'], r['max_abs_diff_losses']):>9.3g} "
                f"{max(r['max_ulps_params'], r['max_ulps_losses']):>5.3g}"
            )
        else:
            print(
                f"{r['name']:<20} {'':>3} {r['step_s'] * 1e3:>8.2f} "
                f"{r['step_ratio_to_gpipe']:>7.3f} {'':>10} {'':>16} {'':>7} "
                f"{r['step_ratio_to_jit']:>6.2f}"
            )
    print()
    print(
        "sim /GPipe: simulated makespan ratio with the default costs (fwd 1, bwd 2, bwd_i 1, "
        "bwd_w 1 per task); sim(work): the same with costs scaled by layers per stage (an "
        "8-stage task does half the work); bubble: simulated idle fraction (work-scaled). "
        "This machine has 2 cores for 4 devices: ranks cannot all run at once, so the measured "
        "ratios mostly reflect total work and per-task overhead, not the bubble."
    )
    for r in records:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
