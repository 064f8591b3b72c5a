"""Every pipeline stage on one accelerator, against plain jax.jit on the same device.

Run: python benchmarks/single_accelerator.py [--workloads W1,W2,L] [--steps 10] [--warmup 2]

Workloads: W1 and W2 of benchmarks/reference.py (float32), and L, a large bfloat16
MLP: 8 layers, width 8192, batch 1024 as 8 microbatches of 128, 4 stages (a
marker after every 2nd layer). The model, loss, SGD step and the plain-jit
baseline (markers off, the microbatch loop as ``lax.scan``) are reference.py's.

The device is the first accelerator JAX finds (its default backend when that is
a GPU or TPU); without one it falls back to the first CPU device and shrinks L
to width 1024, batch 128 (16 per microbatch) so that it finishes on a CPU; the
record says so (``shrunk``). Every stage runs on that one device: the mesh's
mpmd axis has size 1 and the schedule is ``Interleaved1F1B(num_stages, mpmd_dim=1)``.

Per workload, one JSON line: device, lower / partition / compile seconds, the
median step time of the pipelined program and of plain jit (measured alternately
in this process) and their ratio, plain jit's compile time, and the max abs
difference of parameters and loss after all steps, absolute and in ulps of each
leaf's largest magnitude (``max_ulps_*``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import reference as ref  # noqa: E402

import jaxpp_mlir as pp  # noqa: E402

LARGE = ref.Workload(
    "L", num_layers=8, width=8192, num_microbatches=8, microbatch_size=128, num_stages=4
)
LARGE_ON_CPU = dataclasses.replace(LARGE, width=1024, microbatch_size=16)
DTYPES = {"W1": jnp.float32, "W2": jnp.float32, "L": jnp.bfloat16}


def first_accelerator() -> jax.Device:
    """The first device of JAX's default backend: a GPU or TPU where one is present
    (JAX prefers them), else the first CPU device."""
    return jax.devices()[0]


def is_accelerator(device: jax.Device) -> bool:
    return device.platform != "cpu"


def init(spec: ref.Workload, dtype) -> tuple:
    """reference.py's parameters and data, cast to ``dtype``."""
    params, xs, ys = ref.init(spec)
    cast = lambda x: x.astype(dtype)  # noqa: E731
    return jax.tree_util.tree_map(cast, params), cast(xs), cast(ys)


def run(spec: ref.Workload, dtype, device: jax.Device, *, steps: int, warmup: int) -> dict:
    params, xs, ys = jax.device_put(init(spec, dtype), device)
    mesh = pp.MpmdMesh(jax.sharding.Mesh(np.array([device]), ("stage",)), "stage")
    schedule = pp.Interleaved1F1B(spec.num_stages, mpmd_dim=1)

    t0 = time.perf_counter()
    lowered = jax.jit(ref.pipelined_step_fn(spec)).lower(params, xs, ys)
    t1 = time.perf_counter()
    program = pp.partition(lowered, mesh=mesh, schedule=schedule)
    t2 = time.perf_counter()
    compiled = ref.compile_uncached(program)
    t3 = time.perf_counter()

    j0 = time.perf_counter()
    jit_compiled = jax.jit(ref.reference_step_fn(spec)).lower(params, xs, ys).compile()
    j1 = time.perf_counter()

    (ours, _, _, (our_params, our_loss)), (theirs, _, _, (their_params, their_loss)) = (
        ref.timed_steps(
            [compiled, jit_compiled],
            [(params, xs, ys), (jax.tree_util.tree_map(jnp.copy, params), xs, ys)],
            steps,
            warmup,
        )
    )
    return {
        "workload": spec.name,
        "device": str(device.device_kind),
        "platform": device.platform,
        "dtype": jnp.dtype(dtype).name,
        "config": dataclasses.asdict(spec),
        "shrunk": spec.name == "L" and spec != LARGE,
        "lower_s": t1 - t0,
        "partition_s": t2 - t1,
        "compile_s": t3 - t2,
        "jit_compile_s": j1 - j0,
        "step_s": ours,
        "jit_step_s": theirs,
        "step_ratio": ours / theirs,
        "max_abs_diff_params": ref.max_abs_diff(our_params, their_params),
        "max_abs_diff_loss": ref.max_abs_diff(our_loss, their_loss),
        "max_ulps_params": ref.max_ulps(our_params, their_params),
        "max_ulps_loss": ref.max_ulps(our_loss, their_loss),
        "steps": steps,
        "warmup": warmup,
        "jax": jax.__version__,
        "loadavg_1min": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default="W1,W2,L")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()
    device = first_accelerator()
    specs = {**ref.WORKLOADS, "L": LARGE if is_accelerator(device) else LARGE_ON_CPU}
    names = [n.strip() for n in args.workloads.split(",") if n.strip()]
    for name in names:
        if name not in specs:
            parser.error(f"unknown workload {name!r} (known: {', '.join(specs)})")
    if not is_accelerator(device):
        batch = LARGE_ON_CPU.num_microbatches * LARGE_ON_CPU.microbatch_size
        print(
            f"no accelerator found: every stage on {device}; L shrunk to width "
            f"{LARGE_ON_CPU.width}, batch {batch}",
            file=sys.stderr,
        )
    for name in names:
        record = run(specs[name], DTYPES[name], device, steps=args.steps, warmup=args.warmup)
        print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
