"""A GPT-2-style transformer in flax linen, pipelined with stage markers, against jax.jit.

Token and position embeddings, pre-LayerNorm blocks (causal self-attention and an
MLP) each under ``nn.remat``, a final LayerNorm and the output projection tied to
the token embedding. ``--stages`` pipeline stages (a marker ends each), trained with
optax adamw through a flax ``TrainState`` on synthetic tokens, parameters in
``--dtype`` (bfloat16 by default). Prints each step's loss next to plain
``jax.jit``'s and exits 1 if they differ by more than the tolerance.

With ``--scan-layers`` the blocks are one ``nn.scan`` over stacked parameters (each
``[layers, ...]``), as large linen codebases write them, and the model has no stage
marker: ``partition(..., schedule=Std1F1B(stages))`` splits the scan, each stage program
keeps its own loop over its blocks, and each rank holds its rows of the stacked
parameters and of their adamw moments.

    python examples/gpt2_flax_linen.py --layers 4 --stages 2 --steps 3
    python examples/gpt2_flax_linen.py --scan-layers --layers 8 --stages 4   # no markers
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import flax.linen as nn  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from flax.training import train_state  # noqa: E402

import jaxpp_mlir as pp  # noqa: E402

# Relative loss tolerance. The stage marker is a fusion barrier and rounds bf16
# values at stage boundaries (as sending them does), so layer norm and softmax
# reductions may round differently than in the single jitted program; in bf16
# that is a few bf16 ulps (2**-8 relative) per step, compounding over steps.
TOLERANCE = {"bfloat16": 5e-2, "float32": 1e-4}


class Block(nn.Module):
    heads: int
    dtype: jnp.dtype

    @nn.compact
    def __call__(self, x):
        seq = x.shape[-2]
        h = nn.LayerNorm(dtype=self.dtype, param_dtype=self.dtype)(x)
        mask = nn.make_causal_mask(jnp.ones((x.shape[0], seq)))
        attention = nn.MultiHeadDotProductAttention(
            num_heads=self.heads, dtype=self.dtype, param_dtype=self.dtype
        )
        h = attention(h, mask=mask)  # self-attention: keys and values default to the queries
        x = x + h
        h = nn.LayerNorm(dtype=self.dtype, param_dtype=self.dtype)(x)
        h = nn.Dense(4 * x.shape[-1], dtype=self.dtype, param_dtype=self.dtype)(h)
        h = nn.Dense(x.shape[-1], dtype=self.dtype, param_dtype=self.dtype)(nn.gelu(h))
        return x + h


class ScannedBlock(nn.Module):
    """``Block`` in ``nn.scan``'s form: (carry, per-layer input) -> (carry, output)."""

    heads: int
    dtype: jnp.dtype

    @nn.compact
    def __call__(self, x, _):
        return Block(self.heads, self.dtype, name="block")(x), None


class GPT2(nn.Module):
    vocab: int
    seq: int
    d_model: int
    heads: int
    layers: int
    stages: int
    dtype: jnp.dtype
    scan_layers: bool = False

    @nn.compact
    def __call__(self, tokens):
        wte = nn.Embed(self.vocab, self.d_model, dtype=self.dtype, param_dtype=self.dtype)
        wpe = nn.Embed(self.seq, self.d_model, dtype=self.dtype, param_dtype=self.dtype)
        x = wte(tokens) + wpe(jnp.arange(tokens.shape[-1]))
        if self.scan_layers:  # no marker: partition splits the scan into stages
            blocks = nn.scan(
                nn.remat(ScannedBlock),
                variable_axes={"params": 0},
                split_rngs={"params": True},
                length=self.layers,
            )
            x, _ = blocks(self.heads, self.dtype, name="layers")(x, None)
            x = nn.LayerNorm(dtype=self.dtype, param_dtype=self.dtype)(x)
            return wte.attend(x)
        per_stage = self.layers // self.stages
        for i in range(self.layers):
            x = nn.remat(Block)(self.heads, self.dtype, name=f"block_{i}")(x)
            if (i + 1) % per_stage == 0 and i + 1 < self.layers:
                x = pp.pipeline_enter_stage(x)  # ends stage (i + 1) // per_stage - 1
        x = nn.LayerNorm(dtype=self.dtype, param_dtype=self.dtype)(x)
        logits = wte.attend(x)  # the output projection is the token embedding
        return pp.pipeline_enter_stage(logits)  # ends the last stage


def loss_fn(params, apply_fn, microbatch):
    tokens, targets = microbatch
    logits = apply_fn({"params": params}, tokens).astype(jnp.float32)
    return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()


def train_step(state, batch):
    losses, grads = pp.treduce(
        lambda mb: jax.value_and_grad(loss_fn)(state.params, state.apply_fn, mb),
        batch,
        operation=(pp.Concat(), pp.Add),
    )
    return state.apply_gradients(grads=grads), losses


def numpy_params(shapes, seed: int = 0):
    """Parameters of the shapes and dtypes of ``shapes`` drawn by numpy: kernels and
    embeddings normal over the square root of their input size, layer-norm scales 1, biases
    0 (what flax's initializers give, without compiling them)."""
    rng = np.random.default_rng(seed)

    def draw(path, leaf):
        name = jax.tree_util.keystr(path[-1:])
        if name in ("['kernel']", "['embedding']"):
            # A stacked (scanned) leaf's first axis counts layers, not inputs.
            stacked = jax.tree_util.keystr(path[:1]) == "['layers']"
            fan_in = int(np.prod(leaf.shape[1 if stacked else 0 : -1]))
            value = rng.standard_normal(leaf.shape, dtype=np.float32) / np.sqrt(fan_in)
        else:
            value = np.full(leaf.shape, 1.0 if name == "['scale']" else 0.0, np.float32)
        return jnp.asarray(value.astype(leaf.dtype))

    return jax.tree_util.tree_map_with_path(draw, shapes)


def initial_params(args, model, tokens):
    """The model's parameters: flax's initializers (``--init flax``) or numpy's draw of the
    same shapes and dtypes (``--init numpy``)."""
    if args.init == "numpy":
        return numpy_params(jax.eval_shape(model.init, jax.random.PRNGKey(0), tokens))["params"]
    # Initialized under jit: eagerly, each of init's many small ops is compiled on its own.
    return jax.jit(model.init)(jax.random.PRNGKey(0), tokens)["params"]


def make_model(args):
    dtype = jnp.dtype(args.dtype)
    return GPT2(
        args.vocab, args.seq, args.d_model, args.heads, args.layers, args.stages, dtype,
        args.scan_layers,
    )  # fmt: skip


def make_inputs(args):
    model = make_model(args)
    shape = (args.microbatches, args.microbatch_size, args.seq + 1)
    # Drawn by numpy: jax.random would compile a sampler for this shape first.
    tokens = jnp.asarray(np.random.default_rng(1).integers(0, args.vocab, shape, dtype=np.int32))
    batch = (tokens[..., :-1], tokens[..., 1:])  # predict the next token
    params = initial_params(args, model, batch[0][0])
    create = jax.jit(
        lambda p: train_state.TrainState.create(
            apply_fn=model.apply, params=p, tx=optax.adamw(args.lr)
        )
    )
    return create(params), batch


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--stages", type=int, default=4)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--microbatch-size", type=int, default=4)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--dtype", choices=sorted(TOLERANCE), default="bfloat16")
    parser.add_argument(
        "--init",
        choices=("flax", "numpy"),
        default="flax",
        help="numpy: draw the parameters with numpy (no initializer compile; the tests use it)",
    )
    parser.add_argument(
        "--scan-layers",
        action="store_true",
        help="the blocks as one nn.scan over stacked parameters, with no stage marker",
    )
    args = parser.parse_args(argv)
    if args.layers % args.stages:
        parser.error("--layers must be a multiple of --stages")
    return args


def stacked_rows(state, mesh: pp.MpmdMesh) -> str:
    """How many rows of each stacked layer array (parameters and their adamw moments, the
    leaves under ``layers``) each stage's devices hold: an even split comes back as one
    ``jax.Array`` sharded along the layer axis over the stages."""
    paths = jax.tree_util.tree_leaves_with_path(state)
    leaves = [leaf for path, leaf in paths if "['layers']" in jax.tree_util.keystr(path)]
    devices = np.asarray(mesh.jax_mesh.devices)  # the stage axis first
    stage_devices = [set(row) for row in devices.reshape(devices.shape[0], -1)]
    held: set[tuple[int, ...]] = set()
    for leaf in leaves:
        if not isinstance(leaf, jax.Array):
            raise TypeError(f"a stacked parameter came back as {type(leaf).__name__}")
        rows = []
        for devices in stage_devices:
            indices = leaf.sharding.devices_indices_map(leaf.shape)
            spans = {indices[d][0].indices(leaf.shape[0])[:2] for d in devices}
            (span,) = spans  # the stage's devices hold the same rows
            rows.append(span[1] - span[0])
        held.add(tuple(rows))
    return f"{len(leaves)} stacked arrays (parameters, moments), rows per stage: {sorted(held)}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    state, batch = make_inputs(args)
    mesh = pp.MpmdMesh(
        jax.sharding.Mesh(np.array(jax.devices()[: args.stages]), ("stage",)), "stage"
    )
    lowered = jax.jit(train_step).lower(state, batch)
    if args.scan_layers:  # no markers: the schedule says how many stages to cut the scan into
        program = pp.partition(lowered, mesh=mesh, schedule=pp.Std1F1B(args.stages))
    else:
        program = pp.partition(lowered, mesh=mesh)
    step = program.compile()
    reference = jax.jit(train_step)

    ours, theirs = state, state
    worst = 0.0
    for n in range(args.steps):
        ours, loss = step(ours, batch)
        theirs, expected = reference(theirs, batch)
        loss, expected = float(np.mean(loss)), float(np.mean(expected))
        error = abs(loss - expected) / abs(expected)
        worst = max(worst, error)
        print(f"step {n}: loss {loss:.6f}  jax.jit {expected:.6f}  rel. diff {error:.2e}")
    if args.scan_layers:
        print(stacked_rows(ours, mesh))
    tolerance = TOLERANCE[args.dtype]
    ok = worst <= tolerance
    print(
        f"{'OK' if ok else 'MISMATCH'}: worst relative difference {worst:.2e} "
        f"(tolerance {tolerance:.0e}, {args.dtype} parameters)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
