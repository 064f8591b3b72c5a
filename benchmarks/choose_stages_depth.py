"""Partition time of a scanned layer stack against its depth, pass by pass (issue 38).

Run: python benchmarks/choose_stages_depth.py [--layers 8,32,64] [--repeats 3] [--stages 4]
                                              [--schedule std|auto]

The model is ``benchmarks/scan_compile.py``'s: an embedding, ``L`` layers
``tanh(h @ w + b)`` applied with ``jax.lax.scan`` over stacked parameters, a head, one
``treduce`` over 8 microbatches of ``value_and_grad`` of the MSE, then optax adamw after
``clip_by_global_norm``; no stage marker, ``partition(..., schedule=Std1F1B(stages))``
splits the scan (``--schedule auto``: ``schedule="auto"``, the planner weighing every
built-in schedule on ``stages`` ranks, up to 4 stages per rank). Each layer of the scan
is a segment, so ``jaxpp-choose-stages`` weighs splits of ``L + 2`` segments (at most
``stage_split.MAX_ENUMERATED`` candidates per schedule, each simulated with it). Per
depth, one process lowers the step once and partitions it ``--repeats`` times; printed:
the median of ``partition`` and of its three slowest passes (``jaxpp_mlir.passes``
DEBUG records), in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scan_compile  # noqa: E402


def _child(layers: int, stages: int, repeats: int, schedule: str = "std") -> dict:
    import jax
    import numpy as np
    from jax.sharding import Mesh

    import jaxpp_mlir as pp

    step, params, opt_state, xs, ys = scan_compile.model("scanned", layers, 64, 8, "adamw")
    lowered = jax.jit(step).lower(params, opt_state, xs, ys)
    passes: list[tuple[str, float]] = []

    class Passes(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.msg.startswith("pass "):
                element, ms = record.args  # type: ignore[misc]
                passes.append((str(element).split("{")[0], ms))

    logger = logging.getLogger("jaxpp_mlir.passes")
    handler, level, propagate = Passes(), logger.level, logger.propagate
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    logger.propagate = False
    mesh = pp.MpmdMesh(Mesh(np.array(jax.devices()[:stages]), ("stage",)), "stage")
    totals: list[float] = []
    per_pass: dict[str, list[float]] = {}
    try:
        for _ in range(repeats):
            passes.clear()
            start = time.perf_counter()
            pp.partition(
                lowered, mesh=mesh, schedule="auto" if schedule == "auto" else pp.Std1F1B(stages)
            )
            totals.append((time.perf_counter() - start) * 1e3)
            for name, ms in passes:
                per_pass.setdefault(name, []).append(ms)
    finally:  # as it was: a test runs this child in its process
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate
    medians = {name: statistics.median(ms) for name, ms in per_pass.items()}
    return {
        "layers": layers,
        "partition_ms": statistics.median(totals),
        "passes_ms": dict(sorted(medians.items(), key=lambda kv: -kv[1])),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", default="8,32,64")
    parser.add_argument("--stages", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--schedule", choices=("std", "auto"), default="std")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        print(json.dumps(_child(args.child, args.stages, args.repeats, args.schedule)))
        return 0
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={args.stages}")
    which = "auto" if args.schedule == "auto" else f"Std1F1B({args.stages})"
    print(f"partition of a scanned stack, {which}, medians of {args.repeats} (ms)")
    for layers in (int(x) for x in args.layers.split(",")):
        command = [sys.executable, os.path.abspath(__file__), "--child", str(layers)]
        command += ["--stages", str(args.stages), "--repeats", str(args.repeats)]
        command += ["--schedule", args.schedule]
        done = subprocess.run(
            command, capture_output=True, text=True, check=True, timeout=900, env=env
        )
        record = json.loads(done.stdout.strip().splitlines()[-1])
        slowest = ", ".join(f"{n} {ms:.1f}" for n, ms in list(record["passes_ms"].items())[:3])
        print(f"L={layers:4d}  partition {record['partition_ms']:7.1f}  slowest passes: {slowest}")
        print(json.dumps(record))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
