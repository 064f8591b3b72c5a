"""The planner's predictions against measured step times (issue 29).

Run: python benchmarks/planner.py [--workloads W1,W2,U] [--top 4] [--steps 10] [--warmup 2]
                                  [--calibrate]

For each workload, with a marker after every layer (so the planner chooses the stage
split as well as the schedule): ``pp.plan_pipeline`` ranks the layouts that fit the
mesh; the ``--top`` best are partitioned (``stage_split=`` as planned), compiled and run
round-robin (one step each in turn, parameters fed back, so that all see the same
load), and the median measured step is printed beside the predicted one, with the
Spearman rank correlation of predicted and measured over the candidates. The
predictions use the planner's default machine constants (no calibration): the absolute
times are not expected to match, their order is what the planner relies on.
``--calibrate`` plans on segment times measured on the devices (``calibrate=True``).

W1 and W2 are benchmarks/reference.py's workloads (8 layers of 512 on 4 ranks, 8
microbatches of 8; 32 layers of 256 on 8 ranks, 16 microbatches of 4); U has unequal
segments: 1, 1, 4, 4, 1, 1, 1, 1 layers of 256 between markers, 4 ranks, 16
microbatches of 8.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Callable
from typing import Any

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxpp_mlir as pp  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import (  # noqa: E402
    LEARNING_RATE,
    compile_uncached,
    place_pipelined_inputs,
    timed_steps,
)


@dataclasses.dataclass(frozen=True)
class Model:
    name: str
    segments: tuple[int, ...]  # layers between markers
    width: int
    num_microbatches: int
    microbatch_size: int
    ranks: int


MODELS = {
    "W1": Model("W1", (1,) * 8, 512, 8, 8, 4),
    "W2": Model("W2", (1,) * 32, 256, 16, 4, 8),
    "U": Model("U", (1, 1, 4, 4, 1, 1, 1, 1), 256, 16, 8, 4),
}


def init(model: Model) -> tuple[list[tuple[jax.Array, jax.Array]], jax.Array, jax.Array]:
    layers = sum(model.segments)
    keys = jax.random.split(jax.random.PRNGKey(0), layers + 2)
    params = [
        (
            jax.random.normal(k, (model.width, model.width)) / np.sqrt(model.width),
            jnp.zeros((model.width,)),
        )
        for k in keys[:layers]
    ]
    shape = (model.num_microbatches, model.microbatch_size, model.width)
    return params, jax.random.normal(keys[-2], shape), jax.random.normal(keys[-1], shape)


def step_fn(model: Model) -> Callable[[Any, jax.Array, jax.Array], tuple[Any, jax.Array]]:
    def loss(params, microbatch):
        x, y = microbatch
        layer = 0
        for count in model.segments:
            for _ in range(count):
                w, b = params[layer]
                x = jnp.tanh(x @ w + b)
                layer += 1
            x = pp.pipeline_enter_stage(x)
        return jnp.mean((x - y) ** 2) / model.num_microbatches

    def step(params, xs, ys):
        total, grads = pp.treduce(
            lambda mb: jax.value_and_grad(loss)(params, mb), (xs, ys), operation=pp.Add
        )
        new = jax.tree_util.tree_map(lambda p, g: p - LEARNING_RATE * g, params, grads)
        return new, total

    return step


def _average_ranks(values: list[float]) -> np.ndarray:
    """Ranks from 0, ties sharing the mean of their ranks (as Spearman's rho wants)."""
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(len(values), dtype=float)
    for value in set(values):
        tied = [i for i, v in enumerate(values) if v == value]
        ranks[tied] = ranks[tied].mean()
    return ranks


def spearman(a: list[float], b: list[float]) -> float:
    ranks_a, ranks_b = _average_ranks(a), _average_ranks(b)
    if len(a) < 2 or ranks_a.std() == 0 or ranks_b.std() == 0:
        return float("nan")
    return float(np.corrcoef(ranks_a, ranks_b)[0, 1])


def run(model: Model, top: int, steps: int, warmup: int, calibrate: bool = False) -> dict:
    params, xs, ys = init(model)
    mesh = pp.MpmdMesh(
        jax.sharding.Mesh(np.array(jax.devices()[: model.ranks]), ("stage",)), "stage"
    )
    lowered = jax.jit(step_fn(model)).lower(params, xs, ys)
    plan = pp.plan_pipeline(lowered, mesh=mesh, calibrate=calibrate)
    print(plan, flush=True)
    chosen = list(plan)[:top]
    compiled, states = [], []
    for candidate in chosen:
        program = pp.partition(
            lowered,
            mesh=mesh,
            schedule=candidate.schedule,
            stage_split=candidate.stage_split,
        )
        compiled.append(compile_uncached(program))
        states.append(place_pipelined_inputs(program, (params, xs, ys)))
    measured = timed_steps(compiled, states, steps, warmup)
    rows = []
    for candidate, (median_s, *_rest) in zip(chosen, measured, strict=True):
        rows.append(
            {
                "schedule": repr(candidate.schedule),
                "stage_split": list(candidate.stage_split),
                "predicted_ms": round(candidate.step_s * 1e3, 3),
                "measured_ms": round(median_s * 1e3, 3),
            }
        )
    predicted = [r["predicted_ms"] for r in rows]
    actual = [r["measured_ms"] for r in rows]
    return {
        "workload": model.name,
        "calibrated": calibrate,
        "rows": rows,
        "spearman": round(spearman(predicted, actual), 3),
        # Within the planner's ties (equal predictions), any of them counts as its pick.
        "best_predicted_is_fastest": predicted[int(np.argmin(actual))] == min(predicted),
        "load_avg": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="W1,W2,U")
    parser.add_argument("--top", type=int, default=4)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--calibrate", action="store_true")
    args = parser.parse_args()
    for name in args.workloads.split(","):
        result = run(MODELS[name], args.top, args.steps, args.warmup, args.calibrate)
        print(f"{'schedule':<84} {'split':<28} {'predicted ms':>12} {'measured ms':>12}")
        for row in result["rows"]:
            split = str(tuple(row["stage_split"]))
            print(
                f"{row['schedule']:<84} {split:<28} {row['predicted_ms']:>12.3f} "
                f"{row['measured_ms']:>12.3f}"
            )
        print(
            f"{name}: Spearman rank correlation {result['spearman']}, best predicted is "
            f"fastest measured: {result['best_predicted_is_fastest']}",
            flush=True,
        )
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
