"""Measured against simulated: traced W1/W2 steps fed back into the schedule simulator.

Run: python benchmarks/measured_vs_simulated.py [--workloads W1,W2] [--schedules ...]
                                               [--steps 10] [--warmup 3] [--out-dir DIR]
                                               [--fuse-tasks]

For each workload of benchmarks/reference.py and each schedule, the pipelined step
is partitioned and compiled, then run alternately (one step each, in turn, so that
all see the same machine load) untraced, traced with device timing
(``program_trace``), and traced with dispatch timing only (``device_time=False``).

From the traced steps it takes each (stage, task kind)'s median device time and the
median receive time, simulates the schedule with those costs, and prints, per
schedule: the measured step time (call to results ready), the measured span of the
microbatch loop in the trace (first loop task start to last loop task end), the
simulated makespan with measured costs, their ratio, the simulated bubble and the
host time spent dispatching the step (the simulator models devices, not the one
dispatching thread: where dispatch time nears the loop span, the host is the
bottleneck and the simulation is optimistic); then the tracing overhead:
the traced step times over the untraced ones, measured side by side in this run.
``--fuse-tasks`` partitions with automatic task fusion (``AutoFused``), simulated as
fused; every row also gives ``simulated_makespan_with_launch_ms``, the simulation with
the measured host time per operation charged to each launch. With ``--out-dir`` it
also writes each schedule's last trace and a planned-vs-measured picture there.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402

import jaxpp_mlir as pp  # noqa: E402
from jaxpp_mlir.schedules import Task  # noqa: E402

SCHEDULES = {
    "GPipe": pp.GPipe,
    "Std1F1B": pp.Std1F1B,
    "Eager1F1B": pp.Eager1F1B,
    "ZeroBubble": pp.ZeroBubble,
}


def loop_tasks(events: list[dict]) -> list[dict]:
    """Device spans of the microbatch loop's tasks (those that name stage/kind/microbatch)."""
    return [
        e for e in events
        if e.get("ph") == "X" and e.get("cat") == "task"
        and ("kind" in e.get("args", {}) or "tasks" in e.get("args", {}))
    ]  # fmt: skip


def measured_costs(events: list[dict]) -> tuple[dict[tuple[int, str], float], float]:
    """Median device milliseconds per (stage, kind) (fused spans split evenly), and the
    median receive span."""
    samples: dict[tuple[int, str], list[float]] = defaultdict(list)
    for e in loop_tasks(events):
        args = e["args"]
        parts = args.get("tasks") or [args]
        for part in parts:
            samples[(part["stage"], part["kind"])].append(e["dur"] / 1000.0 / len(parts))
    recvs = [e["dur"] / 1000.0 for e in events if e.get("ph") == "X" and e.get("cat") == "transfer"]
    costs = {key: statistics.median(values) for key, values in samples.items()}
    return costs, statistics.median(recvs) if recvs else 0.0


def loop_span_ms(events: list[dict]) -> float:
    tasks = loop_tasks(events)
    return (max(e["ts"] + e["dur"] for e in tasks) - min(e["ts"] for e in tasks)) / 1000.0


def dispatch_ms(events: list[dict]) -> float:
    """Host time spent issuing the step's operations (the dispatcher is one thread)."""
    return sum(e["dur"] for e in events if e.get("cat") == "dispatch") / 1000.0


def run_schedule(spec: reference.Workload, name: str, args) -> dict:
    schedule = SCHEDULES[name](spec.num_stages)
    fused = getattr(args, "fuse_tasks", False)
    if fused:  # simulated and run as fused (partition would wrap it the same way)
        schedule = pp.AutoFused(schedule)
    params, xs, ys = reference.init(spec)
    mesh = pp.MpmdMesh(
        jax.sharding.Mesh(np.array(jax.devices()[: spec.num_stages]), ("stage",)), "stage"
    )
    lowered = jax.jit(reference.pipelined_step_fn(spec)).lower(params, xs, ys)
    program = pp.partition(lowered, mesh=mesh, schedule=schedule)
    step = program.compile()
    scratch = tempfile.mkdtemp(prefix="jaxpp-trace-")

    def plain(p):
        t0 = time.perf_counter()
        out = jax.block_until_ready(step(p, xs, ys))
        return out, time.perf_counter() - t0

    def traced(device_time: bool):
        def run(p):  # timed inside the block: writing the file is not part of the step
            path = os.path.join(scratch, f"step_{device_time}.json")
            with pp.program_trace(path, device_time=device_time):
                t0 = time.perf_counter()
                out = jax.block_until_ready(step(p, xs, ys))
                elapsed = time.perf_counter() - t0
            return out, elapsed

        return run

    fns = {"untraced": plain, "traced": traced(True), "dispatch-only": traced(False)}
    state = {key: params for key in fns}
    times: dict[str, list[float]] = {key: [] for key in fns}
    device_traces: list[list[dict]] = []
    for index in range(args.warmup + args.steps):
        for key, fn in fns.items():
            (state[key], _), elapsed = fn(state[key])
            if index >= args.warmup:
                times[key].append(elapsed)
                if key == "traced":
                    with open(os.path.join(scratch, "step_True.json")) as handle:
                        device_traces.append(json.load(handle)["traceEvents"])
    all_events = [e for events in device_traces for e in events]
    costs, transfer = measured_costs(all_events)
    num_microbatches = spec.num_microbatches

    def cost(task: Task) -> float:
        return costs.get((task.stage, task.kind), 0.0)

    simulated = schedule.simulate(num_microbatches, costs=cost, transfer_cost=transfer)
    measured_step = statistics.median(times["traced"]) * 1000.0
    loop_span = statistics.median(loop_span_ms(events) for events in device_traces)
    dispatch = statistics.median(dispatch_ms(events) for events in device_traces)
    if args.out_dir:
        from jaxpp_mlir.schedules.plot import plot_planned_vs_measured

        os.makedirs(args.out_dir, exist_ok=True)
        trace_path = os.path.join(args.out_dir, f"{spec.name}_{name}.json")
        with open(trace_path, "w") as handle:
            json.dump({"traceEvents": device_traces[-1]}, handle)
        plot_planned_vs_measured(
            schedule, num_microbatches, trace_path,
            path=os.path.join(args.out_dir, f"{spec.name}_{name}.png"), costs=cost,
        )  # fmt: skip
    untraced = statistics.median(times["untraced"]) * 1000.0
    # The host's cost per operation (launch or transfer), charged to each launch.
    host_ms_per_op = dispatch / len(program.plan.instructions)
    with_launch = schedule.simulate(
        num_microbatches, costs=cost, transfer_cost=transfer, launch_cost=host_ms_per_op
    )
    return {
        "workload": spec.name,
        "schedule": f"{name}+fused" if fused else name,
        "fused": fused,
        "launches_per_step": sum(inst.kind == "run" for inst in program.plan.instructions),
        "simulated_makespan_with_launch_ms": with_launch.makespan,
        "untraced_step_ms": untraced,
        "traced_step_ms": measured_step,
        "dispatch_only_step_ms": statistics.median(times["dispatch-only"]) * 1000.0,
        "measured_loop_span_ms": loop_span,
        "host_dispatch_ms": dispatch,
        "simulated_makespan_ms": simulated.makespan,
        "simulated_bubble": simulated.bubble_fraction,
        "transfer_ms": transfer,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workloads", default="W1,W2")
    parser.add_argument("--schedules", default=",".join(SCHEDULES))
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--out-dir", default=None)
    parser.add_argument(
        "--fuse-tasks", action="store_true", help="partition with automatic task fusion"
    )
    args = parser.parse_args()
    rows = []
    for workload in args.workloads.split(","):
        spec = reference.WORKLOADS[workload]
        for name in args.schedules.split(","):
            rows.append(run_schedule(spec, name, args))
            print(json.dumps(rows[-1]), flush=True)
    print()
    print(
        f"{'workload':8} {'schedule':11} {'step ms':>8} {'loop ms':>8} {'sim ms':>8} "
        f"{'sim/loop':>8} {'sim bubble':>10} {'dispatch ms':>11}"
    )
    for r in rows:
        print(
            f"{r['workload']:8} {r['schedule']:11} {r['traced_step_ms']:8.2f} "
            f"{r['measured_loop_span_ms']:8.2f} {r['simulated_makespan_ms']:8.2f} "
            f"{r['simulated_makespan_ms'] / r['measured_loop_span_ms']:8.2f} "
            f"{r['simulated_bubble']:10.1%} {r['host_dispatch_ms']:11.2f}"
        )
    print()
    print("tracing overhead (step time traced / untraced, measured side by side):")
    print(
        f"{'workload':8} {'schedule':11} {'untraced ms':>11} "
        f"{'device-timed':>12} {'dispatch-only':>13}"
    )
    for r in rows:
        base = r["untraced_step_ms"]
        print(
            f"{r['workload']:8} {r['schedule']:11} {base:11.2f} "
            f"{r['traced_step_ms'] / base:11.2f}x {r['dispatch_only_step_ms'] / base:12.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
