"""Step values on every rank that reads them (issue 15): placement with and without.

Run: python benchmarks/replicated_step_values.py [--quick] [--reps 200] [--width 64]

The Adam step of a 4-stage MLP (4 ranks of one CPU device, Std1F1B, 8
microbatches) is partitioned twice in one process: with Adam's count returned
as one array over the 4 ranks (the default) and with
``JAXPP_MLIR_REPLICATE_MAX_BYTES=0`` (the count on rank 0, copied to ranks
1-3 at each call). After two warm-up steps each, it prints one JSON line:

- ``count_copies``: copies of the count that placing the steady-state
  arguments makes (targets whose buffer is not one of the argument's own);
- ``place_us``: median host time of placing all arguments (``place_arguments``),
  and ``step_ms``: median time of a whole step until its outputs are ready,
  the two programs timed alternately, with their ratios;
- ``max_ulps_replicated_from_baseline``: how far the two programs' states are
  apart after the measured steps, in ulps of each leaf's largest magnitude
  (reference.py's ``max_ulps``: the two are different stage programs, whose reductions
  XLA:CPU may round apart by the CPU's vector width), and ``count_matches_jit``:
  whether the count is plain ``jax.jit``'s.

``--quick`` (few repetitions, width 16) runs the same code paths in seconds.
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
import optax  # noqa: E402
from jax.sharding import Mesh  # noqa: E402
from jaxpp_mlir.runtime.execution.arguments import place_arguments  # noqa: E402
from reference import max_ulps  # noqa: E402

import jaxpp_mlir as pp  # noqa: E402
from jaxpp_mlir import partition_options  # noqa: E402

NUM_STAGES = 4
MICROBATCHES = 8
OPTIMIZER = optax.adam(1e-3)


def loss_fn(params, microbatch):
    x, y = microbatch
    for w in params:
        x = pp.pipeline_enter_stage(jnp.tanh(x @ w))
    return jnp.mean((x - y) ** 2)


def train_step(state, batch):
    params, opt_state = state
    losses, grads = pp.treduce(
        lambda mb: jax.value_and_grad(loss_fn)(params, mb), batch, operation=(pp.Concat(), pp.Add)
    )
    updates, opt_state = OPTIMIZER.update(grads, opt_state, params)
    return (optax.apply_updates(params, updates), opt_state), losses


def inputs(width: int):
    keys = jax.random.split(jax.random.PRNGKey(0), NUM_STAGES)
    params = [jax.random.normal(k, (width, width)) / np.sqrt(width) for k in keys]
    kx, ky = jax.random.split(jax.random.PRNGKey(1))
    shape = (MICROBATCHES, 4, width)
    return (params, OPTIMIZER.init(params)), (
        jax.random.normal(kx, shape),
        jax.random.normal(ky, shape),
    )


def compile_step(lowered, max_bytes: str | None) -> pp.CompiledProgram:
    mesh = pp.MpmdMesh(Mesh(np.array(jax.devices()[:NUM_STAGES]), ("stage",)), "stage")
    saved = os.environ.get(partition_options.REPLICATE_MAX_BYTES.env)
    if max_bytes is not None:
        os.environ[partition_options.REPLICATE_MAX_BYTES.env] = max_bytes
    try:
        program = pp.partition(lowered, mesh=mesh, schedule=pp.Std1F1B(NUM_STAGES))
    finally:
        if saved is None:
            os.environ.pop(partition_options.REPLICATE_MAX_BYTES.env, None)
        else:
            os.environ[partition_options.REPLICATE_MAX_BYTES.env] = saved
    return program.compile()


def flat_arguments(step: pp.CompiledProgram, state, batch) -> list:
    return [*step._flatten_inputs((state, batch), {}), *step._index_arrays]


def count_copies(step: pp.CompiledProgram, state, batch) -> int:
    plan = step.executable
    flat = flat_arguments(step, state, batch)
    (index,) = [i for i, b in enumerate(step.program.plan.inputs) if b.name.endswith(".count")]
    env = [None] * plan._num_slots
    place_arguments(flat, plan._inputs, env)
    own = {shard.data.unsafe_buffer_pointer() for shard in flat[index].addressable_shards}
    return sum(env[t.slot].unsafe_buffer_pointer() not in own for t in plan._inputs[index].targets)


def place_us(step: pp.CompiledProgram, flat: list) -> float:
    plan = step.executable
    env = [None] * plan._num_slots
    start = time.perf_counter()
    place_arguments(flat, plan._inputs, env)
    elapsed = time.perf_counter() - start
    jax.block_until_ready([x for x in env if x is not None])
    return elapsed * 1e6


def step_ms(step: pp.CompiledProgram, state, batch):
    start = time.perf_counter()
    state, losses = step(state, batch)
    jax.block_until_ready((state, losses))
    return (time.perf_counter() - start) * 1e3, state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--width", type=int, default=64)
    args = parser.parse_args()
    reps, width = (10, 16) if args.quick else (args.reps, args.width)
    state, batch = inputs(width)
    lowered = jax.jit(train_step).lower(state, batch)
    steps = {"replicated": compile_step(lowered, None), "baseline": compile_step(lowered, "0")}
    states = dict.fromkeys(steps, state)
    for name, step in steps.items():
        for _ in range(2):
            states[name], _ = step(states[name], batch)
    copies = {name: count_copies(step, states[name], batch) for name, step in steps.items()}
    place = {name: [] for name in steps}
    whole = {name: [] for name in steps}
    for _ in range(reps):
        for name, step in steps.items():
            place[name].append(place_us(step, flat_arguments(step, states[name], batch)))
            elapsed, states[name] = step_ms(step, states[name], batch)
            whole[name].append(elapsed)
    want = state
    for _ in range(2 + reps):
        want, _ = jax.jit(train_step)(want, batch)
    place_median = {name: statistics.median(v) for name, v in place.items()}
    step_median = {name: statistics.median(v) for name, v in whole.items()}
    record = {
        "width": width,
        "reps": reps,
        "count_copies": copies,
        "place_us": place_median,
        "place_ratio_replicated_over_baseline": place_median["replicated"]
        / place_median["baseline"],
        "step_ms": step_median,
        "step_ratio_replicated_over_baseline": step_median["replicated"] / step_median["baseline"],
        "max_ulps_replicated_from_baseline": max_ulps(states["replicated"], states["baseline"]),
        "count_matches_jit": bool(
            np.array_equal(states["replicated"][1][0].count, want[1][0].count)
        ),
    }
    print(json.dumps(record))


if __name__ == "__main__":
    main()
