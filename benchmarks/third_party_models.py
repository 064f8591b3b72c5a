"""The third-party models (examples/third_party_models.py) pipelined against plain jax.jit.

Run: python benchmarks/third_party_models.py [--model NAME ...] [--steps 10] [--warmup 2]
                                            [--library CHECKOUT]

For each model, side by side in one process: the time to the first step (pipelined:
lower, ``partition``, compile every stage program, run the step; ``jax.jit``: lower,
compile, run the step) and the median time of a step (state fed back, the pipelined step
and ``jax.jit``'s alternating), their ratios, and how far the losses and the state after
all steps are from ``jax.jit``'s, in ulps of each leaf's largest magnitude. One JSON line
per model. JAX's persistent compilation cache is off, so both sides compile from scratch.
These are tiny models on CPU devices: the numbers say what the pipeline costs in
compile time and host overhead, not what it gains on accelerators. The state's ulps after
all steps include what training amplifies (GPT-2's attention key bias, whose gradient is
rounding noise in both programs; the ResNet's BatchNorm over 4 rows): the tests check one
step from jax.jit's state as well (tests/py/third_party/). Recorded: RESULTS.md.

``--library CHECKOUT`` pipelines with the library of another checkout of the project
(``git worktree add /tmp/before <rev>``): the before of an A/B, run as its own process.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
LIBRARY_FLAG = "--library"
if LIBRARY_FLAG in sys.argv[:-1]:  # before the models import the library
    sys.path.insert(0, HERE)
    import first_step

    sys.path.remove(HERE)  # ``third_party_models`` is the examples' module, not this one
    first_step._use_library(sys.argv[sys.argv.index(LIBRARY_FLAG) + 1])

import jax  # noqa: E402
import third_party_models as models  # noqa: E402

jax.config.update("jax_enable_compilation_cache", False)


def _timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    jax.block_until_ready(out)
    return out, time.perf_counter() - start


def measure(name: str, steps: int, warmup: int) -> dict:
    workload = models.MODELS[name]()
    with workload.mesh_context():  # jax.set_mesh for a model written for explicit sharding
        return _measure(workload, name, steps, warmup)


def _measure(workload: models.Workload, name: str, steps: int, warmup: int) -> dict:
    inputs = workload.inputs

    def first_pipelined():
        program = models.partition(workload)
        return program.compile(), program

    start = time.perf_counter()
    (pipelined, program), _ = _timed(first_pipelined)
    ours, _ = _timed(pipelined, *workload.state, *inputs(0))
    first_pipelined_s = time.perf_counter() - start

    start = time.perf_counter()
    reference = jax.jit(workload.step).lower(*workload.state, *inputs(0)).compile()
    theirs = reference(*workload.state, *inputs(0))
    jax.block_until_ready(theirs)
    first_jit_s = time.perf_counter() - start

    *ours, loss = ours
    *theirs, reference_loss = theirs
    losses, reference_losses = [loss], [reference_loss]
    times: dict[str, list[float]] = {"pipelined": [], "jit": []}
    for index in range(1, 1 + warmup + steps):
        (*ours, loss), ours_s = _timed(pipelined, *ours, *inputs(index))
        (*theirs, reference_loss), theirs_s = _timed(reference, *theirs, *inputs(index))
        losses.append(loss)
        reference_losses.append(reference_loss)
        if index > warmup:
            times["pipelined"].append(ours_s)
            times["jit"].append(theirs_s)
    step_pipelined = statistics.median(times["pipelined"])
    step_jit = statistics.median(times["jit"])
    return {
        "model": name,
        "library": workload.library,
        "stages": workload.num_stages,
        "schedule": type(workload.schedule).__name__,
        "first_step_s": {"pipelined": round(first_pipelined_s, 2), "jit": round(first_jit_s, 2)},
        "first_step_ratio": round(first_pipelined_s / first_jit_s, 2),
        "step_ms": {"pipelined": round(step_pipelined * 1e3, 3), "jit": round(step_jit * 1e3, 3)},
        "step_ratio": round(step_pipelined / step_jit, 2),
        "steps": 1 + warmup + steps,
        "max_ulps_losses": round(models.ulps_apart(losses, reference_losses), 1),
        "max_ulps_state": round(models.ulps_apart(ours, theirs), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=sorted(models.MODELS), action="append")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument(
        LIBRARY_FLAG,
        metavar="CHECKOUT",
        help="pipeline with the library of this checkout (read before the models import it)",
    )
    args = parser.parse_args(argv)
    print(
        f"{'model':14} {'first step: pipelined / jit (s)':>32} {'ratio':>6} "
        f"{'step: pipelined / jit (ms)':>28} {'ratio':>6} {'ulps: losses, state':>20}"
    )
    rows = [measure(name, args.steps, args.warmup) for name in args.model or models.MODELS]
    for row in rows:
        first, step = row["first_step_s"], row["step_ms"]
        print(
            f"{row['model']:14} {first['pipelined']:>15.2f} / {first['jit']:<14.2f} "
            f"{row['first_step_ratio']:>6} {step['pipelined']:>12.3f} / {step['jit']:<13.3f} "
            f"{row['step_ratio']:>6} {row['max_ulps_losses']:>9}, {row['max_ulps_state']}"
        )
    for row in rows:
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
