"""W1 with data parallelism inside each stage, against plain jax.jit data-parallel.

Run: python benchmarks/spmd_w1.py [--steps 20] [--warmup 3]

The performance contract's W1 (see ``reference.py``) on a (stage=4, data=2)
mesh over 8 CPU devices: each of the 4 stages runs data-parallel on its 2
devices (the batch split over "data", parameters replicated), partitioned
with Std1F1B. The baseline is the same step under plain ``jax.jit``,
data-parallel over all 8 devices (``lax.scan`` microbatch loop, no markers).
Prints both step times (median, parameters fed back, alternating the two
programs step by step), their ratio and the max abs difference of the
results after all steps, absolute and in ulps of each leaf's largest magnitude
(``max_ulps``); then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402
from reference import (  # noqa: E402
    WORKLOADS,
    init,
    max_abs_diff,
    max_ulps,
    pipelined_step_fn,
    reference_step_fn,
    timed_steps,
)

import jaxpp_mlir as pp  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()

    spec = WORKLOADS["W1"]
    params, xs, ys = init(spec)
    devices = np.array(jax.devices()[:8])

    mesh = pp.MpmdMesh(Mesh(devices.reshape(4, 2), ("stage", "data")), "stage")
    lowering = mesh.lowering_mesh()
    replicated = NamedSharding(lowering, P())
    batch = NamedSharding(lowering, P(None, "data", None))
    param_shardings = jax.tree_util.tree_map(lambda _: replicated, params)
    step = jax.jit(
        pipelined_step_fn(spec),
        in_shardings=(param_shardings, batch, batch),
        out_shardings=(param_shardings, replicated),
    )
    program = pp.partition(step.lower(params, xs, ys), mesh=mesh)
    pipelined = program.compile()

    flat = Mesh(devices, ("data",))
    dp_replicated = NamedSharding(flat, P())
    dp_batch = NamedSharding(flat, P(None, "data", None))
    dp_params = jax.tree_util.tree_map(lambda _: dp_replicated, params)
    data_parallel = jax.jit(
        reference_step_fn(spec),
        in_shardings=(dp_params, dp_batch, dp_batch),
        out_shardings=(dp_params, dp_replicated),
    )
    dp_state = (jax.device_put(params, dp_params), *jax.device_put((xs, ys), dp_batch))
    pp_state = (jax.device_put(params, param_shardings), *jax.device_put((xs, ys), batch))
    (ours, _, _, our_result), (theirs, _, _, their_result) = timed_steps(
        [pipelined, data_parallel], [pp_state, dp_state], args.steps, args.warmup
    )
    record = {
        "workload": "W1 (stage=4, data=2)",
        "pipelined_step_ms": ours * 1e3,
        "jit_data_parallel_step_ms": theirs * 1e3,
        "ratio": ours / theirs,
        "max_abs_diff": max_abs_diff(our_result, their_result),
        "max_ulps": max_ulps(our_result, their_result),
    }
    for key, value in record.items():
        print(f"{key:>28}: {value:.4f}" if isinstance(value, float) else f"{key:>28}: {value}")
    print(json.dumps(record))


if __name__ == "__main__":
    main()
