"""The first call of a scanned program: cutting the caller's stacked ``[L, ...]`` arrays
into each rank's rows.

A ``jax.Array`` argument whose rows are not already laid out on the ranks that read them
(the first step's parameters, made on one device) is cut into one piece per stage. The
runtime did it with ``jax.device_put(x[start:stop], sharding)``, which compiles one
slice program per shape; on CPU devices it now slices the array's host copy instead
(``runtime/execution/pieces.py``, ``sliced_on_host``), which compiles nothing.

Side by side in one process, on arrays of fresh shapes for each way (so neither reuses
the other's compilations): seconds to place every piece of ``--leaves`` stacked arrays
``[L, width_i, width_i]`` on two ranks, the device slice against the host slice; then the
first call of a partitioned scanned step whose stacked parameters are such arrays.

    python benchmarks/stacked_inputs.py [--leaves 8] [--layers 8]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, SingleDeviceSharding  # noqa: E402

import jaxpp_mlir as pp  # noqa: E402


def _stacks(leaves: int, layers: int, first_width: int) -> list[jax.Array]:
    """``leaves`` arrays ``[layers, d_i, d_i+1]`` (``d`` from ``first_width`` up, the last
    back to the first: a chain of matmuls), on one device."""
    rng = np.random.default_rng(0)
    widths = [first_width + i for i in range(leaves)]
    device = jax.devices()[0]
    return [
        jax.device_put(
            rng.standard_normal((layers, w, widths[(i + 1) % leaves]), dtype=np.float32)
            / np.sqrt(w),
            device,
        )
        for i, w in enumerate(widths)
    ]


def _device_slices(stacks: list[jax.Array], layers: int) -> float:
    """The former way: a device slice per piece, then a copy to its rank."""
    ranks = [SingleDeviceSharding(d) for d in jax.devices()[:2]]
    half = layers // 2
    started = time.perf_counter()
    out = [jax.device_put(x[r * half : (r + 1) * half], ranks[r]) for x in stacks for r in range(2)]
    jax.block_until_ready(out)
    return time.perf_counter() - started


def _host_slices(stacks: list[jax.Array], layers: int) -> float:
    """The host copy's rows, then a copy to its rank (what the runtime does on CPU)."""
    ranks = jax.devices()[:2]
    half = layers // 2
    started = time.perf_counter()
    out = []
    for x in stacks:
        host = np.asarray(x)
        out += [jax.device_put(host[r * half : (r + 1) * half], ranks[r]) for r in range(2)]
    jax.block_until_ready(out)
    return time.perf_counter() - started


def _first_call(leaves: int, layers: int) -> tuple[float, float]:
    """(partition + compile, first call) seconds of a scanned step reading ``leaves``
    stacked arrays made on one device."""
    stacks = _stacks(leaves, layers, first_width=200)  # widths no other part uses

    def step(params, xs):
        def loss(params, x):
            def layer(h, ws):
                for w in ws:
                    h = jnp.tanh(h @ w)
                return h, None

            h, _ = jax.lax.scan(layer, x, params)
            return jnp.mean(h**2)

        total, grads = pp.treduce(
            lambda x: jax.value_and_grad(loss)(params, x), xs, operation=pp.Add
        )
        return [p - 0.1 * g for p, g in zip(params, grads, strict=True)], total

    xs = jax.device_put(np.ones((4, 2, 200), np.float32), jax.devices()[0])
    mesh = pp.MpmdMesh(Mesh(np.array(jax.devices()[:2]), ("stage",)), "stage")
    started = time.perf_counter()
    compiled = pp.partition(
        jax.jit(step).lower(stacks, xs), mesh=mesh, schedule=pp.Std1F1B(2)
    ).compile()
    ready = time.perf_counter()
    jax.block_until_ready(compiled(stacks, xs))
    return ready - started, time.perf_counter() - ready


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--leaves", type=int, default=8)
    p.add_argument("--layers", type=int, default=8)
    args = p.parse_args()
    device = _device_slices(_stacks(args.leaves, args.layers, 16), args.layers)
    host = _host_slices(_stacks(args.leaves, args.layers, 16 + args.leaves), args.layers)
    print(
        f"{args.leaves} stacked arrays [{args.layers}, w, w] cut for 2 ranks: device slices "
        f"{device:.3f} s, host slices {host:.3f} s ({device / host:.0f}x)"
    )
    compile_seconds, call_seconds = _first_call(args.leaves, args.layers)
    print(
        f"scanned step over {args.leaves} stacked arrays: partition + compile "
        f"{compile_seconds:.2f} s, first call {call_seconds:.3f} s"
    )


if __name__ == "__main__":
    main()
