"""Compile time of a scanned layer stack against its depth (issue 36): ours scanned, ours
unrolled, and plain ``jax.jit`` of the scanned step.

Run: python benchmarks/scan_compile.py [--layers 8,16,32,64] [--width 64] [--stages 4]
                                       [--microbatches 8] [--rounds 3] [--steps 5]

The model is an embedding, ``L`` layers ``tanh(h @ w + b)`` and a head, trained by one
``treduce`` over microbatches of ``value_and_grad`` of the MSE, then SGD. Three sides, each
in a fresh process per round and depth (alternating their order from round to round, so
they see the same machine load):

- ``scanned``: the layers are a ``jax.lax.scan`` over stacked parameters ``[L, ...]``, no
  stage marker; ``partition(..., schedule=Std1F1B(stages))`` splits the scan (each stage
  program loops over its layers);
- ``unrolled``: the same layers in a Python loop over per-layer parameters, a stage marker
  after each layer; ``partition`` merges them into the same stages (each stage program
  holds its layers one after the other);
- ``jit``: plain ``jax.jit`` of the scanned step (``treduce`` is a ``fori_loop`` there) on
  one device.

Per process: ``lower`` (``jax.jit(step).lower``), ``partition`` (ours), ``compile``
(``program.compile()``, every stage program; ``lowered.compile()`` for jit), the first step
until its results are ready, and the median step of ``--steps`` more. JAX's persistent
compilation cache is off in every child. The table shows medians over the rounds, each
side's total (lower + partition + compile) against its own at the smallest depth, and
scanned against unrolled and against jit at each depth; then the 1-minute load average
before and after. Each pipelined process also checks its first step against plain
``jax.jit`` of the same step (``max_ulps``: float spacings at each leaf's largest
magnitude; printed as the worst over the rounds). The issue asks that ours scanned at 32
layers take at most 1.5x its time at 8.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

SIDES = ("scanned", "unrolled", "jit")
PHASES = ("lower", "partition", "compile", "first_step", "step")


# ------------------------------------------------------------------ in the child


def _child(side: str, layers: int, width: int, stages: int, microbatches: int, steps: int):
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh

    import jaxpp_mlir as pp

    rng = np.random.default_rng(0)
    scale = np.float32(1 / np.sqrt(width))

    def draw(*shape):
        return rng.standard_normal(shape, dtype=np.float32) * scale

    stacked = {"w": draw(layers, width, width), "b": draw(layers, width) / 10}
    if side == "unrolled":
        body = [{"w": stacked["w"][i], "b": stacked["b"][i]} for i in range(layers)]
    else:
        body = stacked
    params = {"embed": draw(width, width), "layers": body, "head": draw(width, width)}
    params = jax.device_put(params)
    batch = rng.standard_normal((microbatches, 4, width), dtype=np.float32)
    xs, ys = jax.device_put(batch), jax.device_put(np.tanh(batch))

    def apply(params, x):
        h = x @ params["embed"]
        if side == "unrolled":
            for layer in params["layers"]:
                h = pp.pipeline_enter_stage(jnp.tanh(h @ layer["w"] + layer["b"]))
        else:
            h, _ = jax.lax.scan(
                lambda h, p: (jnp.tanh(h @ p["w"] + p["b"]), None), h, params["layers"]
            )
        return h @ params["head"]

    def loss(params, microbatch):
        x, y = microbatch
        return jnp.mean((apply(params, x) - y) ** 2)

    def step(params, xs, ys):
        total, grads = pp.treduce(
            lambda mb: jax.value_and_grad(loss)(params, mb), (xs, ys), operation=pp.Add
        )
        return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads), total

    times = {}
    start = time.perf_counter()
    lowered = jax.jit(step).lower(params, xs, ys)
    times["lower"] = time.perf_counter() - start
    if side == "jit":
        times["partition"] = 0.0
        start = time.perf_counter()
        run = lowered.compile()
        times["compile"] = time.perf_counter() - start
    else:
        mesh = pp.MpmdMesh(Mesh(np.array(jax.devices()[:stages]), ("stage",)), "stage")
        start = time.perf_counter()
        program = pp.partition(lowered, mesh=mesh, schedule=pp.Std1F1B(stages))
        times["partition"] = time.perf_counter() - start
        start = time.perf_counter()
        run = program.compile()
        times["compile"] = time.perf_counter() - start
    start = time.perf_counter()
    first = jax.block_until_ready(run(params, xs, ys))
    times["first_step"] = time.perf_counter() - start
    step_times = []
    for _ in range(steps):
        start = time.perf_counter()
        jax.block_until_ready(run(params, xs, ys))
        step_times.append(time.perf_counter() - start)
    times["step"] = statistics.median(step_times)
    if side != "jit":  # the same step under plain jax.jit, untimed
        expected = jax.jit(step)(params, xs, ys)
        times["max_ulps"] = max(
            _ulps_apart(a, e)
            for a, e in zip(jax.tree.leaves(first), jax.tree.leaves(expected), strict=True)
        )
    print(json.dumps(times), flush=True)


def _ulps_apart(actual, expected) -> float:
    """The largest difference, in float spacings at the expected leaf's largest magnitude."""
    import numpy as np

    a, e = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    spacing = float(np.spacing(np.float32(np.max(np.abs(e)))))
    return float(np.max(np.abs(a - e))) / spacing


# ------------------------------------------------------------------ the parent


def _run_child(side: str, layers: int, args: argparse.Namespace) -> dict[str, float]:
    env = dict(os.environ)
    env["XLA_FLAGS"] = env.get("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    env["JAXPP_MLIR_COMPILATION_CACHE"] = "0"
    command = [
        sys.executable, __file__, "--child", side, "--layers", str(layers),
        "--width", str(args.width), "--stages", str(args.stages),
        "--microbatches", str(args.microbatches), "--steps", str(args.steps),
    ]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"{side} at {layers} layers failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _total(times: dict[str, float]) -> float:
    return times["lower"] + times["partition"] + times["compile"]


def measure(args: argparse.Namespace) -> dict[tuple[str, int], dict[str, float]]:
    """Medians over the rounds of every phase, per (side, depth)."""
    runs: dict[tuple[str, int], list[dict[str, float]]] = {}
    for round_index in range(args.rounds):
        for layers in args.layers:
            order = SIDES if round_index % 2 == 0 else tuple(reversed(SIDES))
            for side in order:
                runs.setdefault((side, layers), []).append(_run_child(side, layers, args))
    medians = {
        key: {phase: statistics.median(r[phase] for r in rounds) for phase in PHASES}
        for key, rounds in runs.items()
    }
    for key, rounds in runs.items():
        if key[0] != "jit":
            medians[key]["max_ulps"] = max(r["max_ulps"] for r in rounds)
    return medians


def table(medians: dict[tuple[str, int], dict[str, float]], layers: list[int]) -> str:
    rows = [
        "| layers | side | lower s | partition s | compile s | lower+partition+compile s "
        f"| vs own at L={layers[0]} | first step s | step ms |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for depth in layers:
        for side in SIDES:
            times = medians[(side, depth)]
            base = _total(medians[(side, layers[0])])
            rows.append(
                f"| {depth} | {side} | {times['lower']:.2f} | {times['partition']:.2f} | "
                f"{times['compile']:.2f} | {_total(times):.2f} | {_total(times) / base:.2f}x | "
                f"{times['first_step']:.3f} | {1000 * times['step']:.2f} |"
            )
    rows.append("")
    rows.append("| layers | scanned / unrolled (total) | scanned / jit (total) | "
                "scanned / jit (step) | unrolled / jit (step) |")  # fmt: skip
    rows.append("| ---: | ---: | ---: | ---: | ---: |")
    for depth in layers:
        scanned, unrolled, jit = (medians[(side, depth)] for side in SIDES)
        rows.append(
            f"| {depth} | {_total(scanned) / _total(unrolled):.2f} | "
            f"{_total(scanned) / _total(jit):.2f} | {scanned['step'] / jit['step']:.2f} | "
            f"{unrolled['step'] / jit['step']:.2f} |"
        )
    return "\n".join(rows)


def _layers(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=_layers, default=[8, 16, 32, 64])
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--stages", type=int, default=4)
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--child", choices=SIDES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None and len(args.layers) != 1:
        parser.error("--child runs one depth")
    if any(n % args.stages or n < args.stages for n in args.layers):
        parser.error(f"every depth must be a multiple of --stages ({args.stages})")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child is not None:
        _child(args.child, args.layers[0], args.width, args.stages, args.microbatches, args.steps)
        return 0
    load_before = os.getloadavg()[0]
    medians = measure(args)
    load_after = os.getloadavg()[0]
    print(
        f"width {args.width}, {args.stages} stages (Std1F1B), {args.microbatches} microbatches "
        f"of 4; medians of {args.rounds} rounds, each side in a fresh process"
    )
    print(table(medians, args.layers))
    print(f"machine load (1-minute average): {load_before:.2f} before, {load_after:.2f} after")
    worst = max(times["max_ulps"] for times in medians.values() if "max_ulps" in times)
    print(f"first steps against jax.jit: at most {worst:.1f} ulps of a leaf's largest magnitude")
    scanned = [_total(medians[("scanned", depth)]) for depth in args.layers]
    if 8 in args.layers and 32 in args.layers:
        ratio = scanned[args.layers.index(32)] / scanned[args.layers.index(8)]
        print(f"ours scanned, L=32 against L=8: {ratio:.2f}x (the issue asks for at most 1.5x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
