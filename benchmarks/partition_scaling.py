"""Partition time of one treduce training step at growing microbatch counts (issue 4).

Run: python benchmarks/partition_scaling.py [--microbatches 4,16,64,256] [--repeats 5]
                                            [--stages 4] [--layers-per-stage 2] [--width 256]
                                            [--stub-dialect-module]

The model is a 4-stage MLP (``x @ w + b``, ``tanh`` between layers, a marker
after every ``--layers-per-stage`` layers) whose step is ``treduce`` over
microbatches of ``value_and_grad`` of the MSE, then SGD; it is partitioned with
``Std1F1B`` on one CPU device per stage. Only the number of microbatches
changes. The loop is not unrolled, so the passes should take the same time at
every count; ``partition`` also validates the schedule (a simulation) and
builds the runtime's ``ExecutionPlan``, one instruction per task per
microbatch, which grow linearly.

For each count it prints the median over ``--repeats`` of: lowering
(``jax.jit(step).lower``, a fresh step function each time so nothing is
cached), ``partition`` as a whole and its parts, timed by wrapping the library
functions ``partition`` calls (no library change):

- parse: copying the lowered module into jaxpp_mlir's context (``_import``);
- passes: the two ``run_pipeline`` calls (stage discovery, then placement);
- schedule: ``_check_schedule`` (the simulator validating the schedule);
- stage modules: ``emit_modules`` (every module text, once; inside ``build_plan``);
- plan: ``build_plan`` (the runtime's ``ExecutionPlan``);

with each one's ratio to the smallest count, the plan's instruction count and
the partitioned IR's size; then one JSON line per count.

``--stub-dialect-module`` registers an empty Python module as
``jaxlib.mlir.dialects.jaxpp`` before partitioning. The MLIR Python bindings
look up a Python module for an op's dialect each time they wrap an op in an
``OpView`` and do not remember a failed lookup; ``jaxpp`` ops have no such
module, so every wrap of a ``jaxpp.*`` op costs three failing imports. With the
stub the lookup succeeds once and is cached: the difference shows what that
costs inside ``partition``.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import statistics
import sys
import time
import types

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxpp_mlir as pp  # noqa: E402

# The modules whose functions are wrapped (``jaxpp_mlir.partition`` the attribute is the
# function, so import the modules by name).
_PARTITION_MODULE = importlib.import_module("jaxpp_mlir.partition")
_PROGRAM_MODULE = importlib.import_module("jaxpp_mlir.program")

# part name -> (module, attribute) timed when partition calls it.
PARTS = {
    "parse": (_PARTITION_MODULE, "_import"),
    "passes": (_PARTITION_MODULE, "run_pipeline"),
    "schedule": (_PARTITION_MODULE, "_check_schedule"),
    "stage_modules": (sys.modules["jaxpp_mlir.plan.emission"], "emit_modules"),
    "plan": (_PROGRAM_MODULE, "build_plan"),
}


class PartTimer:
    """Wraps the functions of ``PARTS`` to add up the seconds spent in each."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(PARTS, 0.0)
        self.missing = [name for name, (mod, attr) in PARTS.items() if not hasattr(mod, attr)]
        for name, (mod, attr) in PARTS.items():
            if name not in self.missing:
                setattr(mod, attr, self._wrap(name, getattr(mod, attr)))

    def _wrap(self, name: str, fn):
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - start

        return timed

    def reset(self) -> None:
        self.seconds = dict.fromkeys(PARTS, 0.0)


def make_step(num_stages: int, layers_per_stage: int, num_microbatches: int):
    num_layers = num_stages * layers_per_stage

    def loss(params, microbatch):
        x, y = microbatch
        for i, (w, b) in enumerate(params):
            x = x @ w + b
            if i < num_layers - 1:
                x = jnp.tanh(x)
            if i % layers_per_stage == layers_per_stage - 1:
                x = pp.pipeline_enter_stage(x)
        return jnp.mean((x - y) ** 2) / num_microbatches

    def step(params, xs, ys):
        total, grads = pp.treduce(
            lambda mb: jax.value_and_grad(loss)(params, mb), (xs, ys), operation=pp.Add
        )
        return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads), total

    return step


def abstract_inputs(num_layers: int, width: int, num_microbatches: int, microbatch_size: int):
    f32 = jnp.float32
    params = [
        (jax.ShapeDtypeStruct((width, width), f32), jax.ShapeDtypeStruct((width,), f32))
        for _ in range(num_layers)
    ]
    data = jax.ShapeDtypeStruct((num_microbatches, microbatch_size, width), f32)
    return params, data, data


def measure(args, num_microbatches: int, timer: PartTimer) -> dict:
    num_layers = args.stages * args.layers_per_stage
    inputs = abstract_inputs(num_layers, args.width, num_microbatches, args.microbatch_size)
    mesh = pp.MpmdMesh(
        jax.sharding.Mesh(np.array(jax.devices()[: args.stages]), ("stage",)), "stage"
    )
    lower_times, partition_times = [], []
    parts: dict[str, list[float]] = {name: [] for name in PARTS}
    program = None
    for _ in range(args.repeats):
        step = make_step(args.stages, args.layers_per_stage, num_microbatches)  # fresh: no cache
        t0 = time.perf_counter()
        lowered = jax.jit(step).lower(*inputs)
        t1 = time.perf_counter()
        timer.reset()
        program = pp.partition(lowered, mesh=mesh, schedule=pp.Std1F1B(args.stages))
        t2 = time.perf_counter()
        lower_times.append(t1 - t0)
        partition_times.append(t2 - t1)
        for name in PARTS:
            parts[name].append(timer.seconds[name])
    med = statistics.median
    record = {
        "microbatches": num_microbatches,
        "lower_s": med(lower_times),
        "partition_s": med(partition_times),
        **{f"{name}_s": med(values) for name, values in parts.items() if name not in timer.missing},
        "plan_instructions": len(program.plan.instructions),
        "ir_chars": len(program.ir()),
        "repeats": args.repeats,
        "stub_dialect_module": args.stub_dialect_module,
    }
    known = sum(record.get(f"{name}_s", 0.0) for name in PARTS)
    record["other_s"] = record["partition_s"] - known
    return record


COLUMNS = [
    # key, header, format; "ratio" columns are computed against the first row
    ("microbatches", "mb", "{:>5d}"),
    ("lower_s", "lower s", "{:>8.3f}"),
    ("partition_s", "partition s", "{:>11.3f}"),
    ("partition_ratio", "x first", "{:>7.2f}"),
    ("parse_s", "parse s", "{:>7.3f}"),
    ("passes_s", "passes s", "{:>8.3f}"),
    ("passes_ratio", "x first", "{:>7.2f}"),
    ("schedule_s", "schedule s", "{:>10.3f}"),
    ("stage_modules_s", "stage mods s", "{:>12.3f}"),
    ("plan_s", "plan s", "{:>7.3f}"),
    ("plan_share", "plan+sched %", "{:>12.1f}"),
    ("other_s", "other s", "{:>7.3f}"),
    ("plan_instructions", "plan instrs", "{:>11d}"),
    ("ir_chars", "IR chars", "{:>9d}"),
]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--microbatches", default="4,16,64,256")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--stages", type=int, default=4)
    parser.add_argument("--layers-per-stage", type=int, default=2)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--microbatch-size", type=int, default=8)
    parser.add_argument(
        "--stub-dialect-module",
        action="store_true",
        help="register an empty jaxlib.mlir.dialects.jaxpp module first (see the docstring)",
    )
    args = parser.parse_args()
    counts = [int(n) for n in args.microbatches.split(",") if n.strip()]
    if args.stub_dialect_module:
        sys.modules.setdefault(
            "jaxlib.mlir.dialects.jaxpp", types.ModuleType("jaxlib.mlir.dialects.jaxpp")
        )
    timer = PartTimer()
    if timer.missing:
        print(f"not timed (library functions not found): {', '.join(timer.missing)}")

    # Warm-up: first use of the marker, the passes and the MLIR context.
    warm = argparse.Namespace(**{**vars(args), "repeats": 1})
    measure(warm, counts[0], timer)

    records = []
    for n in counts:
        record = measure(args, n, timer)
        first = records[0] if records else record
        record["partition_ratio"] = record["partition_s"] / first["partition_s"]
        if "passes_s" in record:
            record["passes_ratio"] = record["passes_s"] / first["passes_s"]
        if "plan_s" in record and "schedule_s" in record:
            record["plan_share"] = (
                100.0 * (record["plan_s"] + record["schedule_s"]) / record["partition_s"]
            )
        records.append(record)

    title = (
        f"partition of a {args.stages}-stage treduce MLP ({args.stages * args.layers_per_stage} "
        f"layers, width {args.width}, microbatches of {args.microbatch_size}, Std1F1B), "
        f"median of {args.repeats}"
        + (", jaxpp dialect module stubbed" if args.stub_dialect_module else "")
    )
    print(title)
    columns = [c for c in COLUMNS if any(c[0] in r for r in records)]
    widths = [max(len(h), len(f.format(0 if "d}" in f else 0.0))) for _, h, f in columns]
    print("  ".join(f"{h:>{w}}" for (_, h, _), w in zip(columns, widths, strict=True)))
    for record in records:
        cells = []
        for (key, _, fmt), w in zip(columns, widths, strict=True):
            cells.append(f"{fmt.format(record[key]):>{w}}" if key in record else f"{'-':>{w}}")
        print("  ".join(cells))
    print()
    print(
        "x first: ratio to the first row (should stay near 1 for the passes: the loop is not "
        "unrolled). plan+sched %: share of partition spent building the ExecutionPlan and "
        "validating the schedule, the parts that grow with the microbatch count."
    )
    for record in records:
        print(json.dumps(record))


if __name__ == "__main__":
    main()
