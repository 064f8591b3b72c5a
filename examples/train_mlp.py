"""Train a small MLP as a 4-stage pipeline on CPU devices and check it against jax.jit.

Run: python examples/train_mlp.py [--steps N]
Each step's loss is printed next to plain jax.jit's; the script exits non-zero
if parameters or losses differ beyond the stated tolerance.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxpp_mlir as pp  # noqa: E402

NUM_STAGES = 4
LAYERS_PER_STAGE = 2
WIDTH = 32
BATCH = 16
LEARNING_RATE = 0.05
# Stage programs are fused by XLA differently from the single jitted module,
# which may reorder floating-point operations: allow a few ulps.
RTOL = 1e-6


def init_params(key: jax.Array) -> list[dict[str, jax.Array]]:
    params = []
    for layer_key in jax.random.split(key, NUM_STAGES * LAYERS_PER_STAGE):
        w = jax.random.normal(layer_key, (WIDTH, WIDTH)) / np.sqrt(WIDTH)
        params.append({"w": w, "b": jnp.zeros((WIDTH,))})
    return params


def model(params: list[dict[str, jax.Array]], x: jax.Array) -> jax.Array:
    for index, layer in enumerate(params):
        x = x @ layer["w"] + layer["b"]
        if index < len(params) - 1:
            x = jnp.tanh(x)
        if index % LAYERS_PER_STAGE == LAYERS_PER_STAGE - 1:
            x = pp.pipeline_enter_stage(x)
    return x


def loss_fn(params, batch):
    x, y = batch
    return jnp.mean((model(params, x) - y) ** 2)


def train_step(params, batch):
    loss, grads = jax.value_and_grad(loss_fn)(params, batch)
    new_params = jax.tree_util.tree_map(lambda p, g: p - LEARNING_RATE * g, params, grads)
    return new_params, loss


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--dump-dir", default=None, help="write the IR of every pass here")
    args = parser.parse_args()

    key_params, key_x, key_y = jax.random.split(jax.random.PRNGKey(0), 3)
    params = init_params(key_params)
    batch = (
        jax.random.normal(key_x, (BATCH, WIDTH)),
        jax.random.normal(key_y, (BATCH, WIDTH)),
    )

    devices = np.array(jax.devices()[:NUM_STAGES])
    mesh = pp.MpmdMesh(jax.sharding.Mesh(devices, ("stage",)), "stage")
    lowered = jax.jit(train_step).lower(params, batch)
    program = pp.partition(lowered, mesh=mesh, dump_dir=args.dump_dir)
    print(program)
    step = program.compile()

    reference_step = jax.jit(train_step)
    pipelined_params, reference_params = params, params
    ok = True
    for index in range(args.steps):
        pipelined_params, loss = step(pipelined_params, batch)
        reference_params, reference_loss = reference_step(reference_params, batch)
        loss, reference_loss = float(loss), float(reference_loss)
        agrees = np.isclose(loss, reference_loss, rtol=RTOL, atol=0)
        ok &= bool(agrees)
        print(
            f"step {index}: pipelined loss {loss:.8f}   jax.jit loss {reference_loss:.8f}"
            f"   {'ok' if agrees else 'MISMATCH'}"
        )
    for ours, theirs in zip(
        jax.tree_util.tree_leaves(pipelined_params),
        jax.tree_util.tree_leaves(reference_params),
        strict=True,
    ):
        if not np.allclose(np.asarray(ours), np.asarray(theirs), rtol=RTOL, atol=1e-7):
            ok = False
            print("parameters differ from jax.jit's", file=sys.stderr)
            break
    print("pipelined training matches jax.jit" if ok else "MISMATCH against jax.jit")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
