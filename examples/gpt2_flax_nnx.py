"""The GPT-2-style transformer of gpt2_flax_linen.py in flax nnx, pipelined, against jax.jit.

The model is split with ``nnx.split`` into its graph and its parameters; the
step merges them back inside ``treduce``, so the parameters are an ordinary
pytree that partitioning places stage by stage. Blocks run under
``nnx.remat``; the output projection is the token embedding (``attend``);
optax adamw updates the parameters. Exits 1 if a loss differs from
``jax.jit``'s by more than the tolerance.

    python examples/gpt2_flax_nnx.py --layers 4 --stages 2 --steps 3
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from flax import nnx  # noqa: E402

import jaxpp_mlir as pp  # noqa: E402

# As in gpt2_flax_linen.py: stage boundaries are fusion barriers (bf16 rounding there).
TOLERANCE = {"bfloat16": 5e-2, "float32": 1e-4}


class Block(nnx.Module):
    def __init__(self, d_model: int, heads: int, dtype, rngs: nnx.Rngs):
        kw = {"dtype": dtype, "param_dtype": dtype, "rngs": rngs}
        self.ln1 = nnx.LayerNorm(d_model, **kw)
        self.attn = nnx.MultiHeadAttention(heads, d_model, decode=False, **kw)
        self.ln2 = nnx.LayerNorm(d_model, **kw)
        self.up = nnx.Linear(d_model, 4 * d_model, **kw)
        self.down = nnx.Linear(4 * d_model, d_model, **kw)

    def __call__(self, x):
        mask = nnx.make_causal_mask(jnp.ones(x.shape[:-1]))
        x = x + self.attn(self.ln1(x), mask=mask)
        return x + self.down(nnx.gelu(self.up(self.ln2(x))))


class GPT2(nnx.Module):
    def __init__(self, vocab, seq, d_model, heads, layers, stages, dtype, rngs: nnx.Rngs):
        kw = {"dtype": dtype, "param_dtype": dtype, "rngs": rngs}
        self.wte = nnx.Embed(vocab, d_model, **kw)
        self.wpe = nnx.Embed(seq, d_model, **kw)
        self.blocks = nnx.List([Block(d_model, heads, dtype, rngs) for _ in range(layers)])
        self.ln_f = nnx.LayerNorm(d_model, **kw)
        self.per_stage = layers // stages

    def __call__(self, tokens):
        x = self.wte(tokens) + self.wpe(jnp.arange(tokens.shape[-1]))
        for i, block in enumerate(self.blocks):
            x = nnx.remat(lambda b, h: b(h))(block, x)
            if (i + 1) % self.per_stage == 0 and i + 1 < len(self.blocks):
                x = pp.pipeline_enter_stage(x)  # ends a stage
        logits = self.wte.attend(self.ln_f(x))  # tied output projection
        return pp.pipeline_enter_stage(logits)  # ends the last stage


def numpy_params(shapes, seed: int = 0):
    """Parameters of the shapes and dtypes of ``shapes`` drawn by numpy: kernels and
    embeddings normal over the square root of their input size, layer-norm scales 1, biases
    0 (what flax's initializers give, without compiling them)."""
    rng = np.random.default_rng(seed)

    def draw(path, leaf):
        name = jax.tree_util.keystr(path[-2:-1])  # the last key is the variable's ``.value``
        if name in ("['kernel']", "['embedding']"):
            fan_in = int(np.prod(leaf.shape[:-1]))
            value = rng.standard_normal(leaf.shape, dtype=np.float32) / np.sqrt(fan_in)
        else:
            value = np.full(leaf.shape, 1.0 if name == "['scale']" else 0.0, np.float32)
        return jnp.asarray(value.astype(leaf.dtype))

    return jax.tree_util.tree_map_with_path(draw, shapes)


def make_step(graphdef, optimizer):
    def loss_fn(params, microbatch):
        tokens, targets = microbatch
        logits = nnx.merge(graphdef, params)(tokens).astype(jnp.float32)
        return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()

    def train_step(params, opt_state, batch):
        losses, grads = pp.treduce(
            lambda mb: jax.value_and_grad(loss_fn)(params, mb),
            batch,
            operation=(pp.Concat(), pp.Add),
        )
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, losses

    return train_step


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
    args = parser.parse_args(argv)
    if args.layers % args.stages:
        parser.error("--layers must be a multiple of --stages")
    return args


def initial_params(args):
    """The model split into its graph and its parameters: flax's initializers (``--init
    flax``) or numpy's draw of the same shapes and dtypes (``--init numpy``)."""

    def build():
        return GPT2(
            args.vocab, args.seq, args.d_model, args.heads, args.layers, args.stages,
            jnp.dtype(args.dtype), nnx.Rngs(0),
        )  # fmt: skip

    if args.init == "numpy":
        graphdef, shapes = nnx.split(nnx.eval_shape(build))
        params = numpy_params(shapes)
    else:
        # Built and initialized under jit: eagerly, each of the many small ops is compiled
        # on its own.
        graphdef, params = nnx.split(nnx.jit(build)())
    return graphdef, params


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    graphdef, params = initial_params(args)
    optimizer = optax.adamw(args.lr)
    opt_state = jax.jit(optimizer.init)(params)
    shape = (args.microbatches, args.microbatch_size, args.seq + 1)
    # Drawn by numpy: jax.random would compile a sampler for this shape first.
    tokens = jnp.asarray(np.random.default_rng(1).integers(0, args.vocab, shape, dtype=np.int32))
    batch = (tokens[..., :-1], tokens[..., 1:])
    train_step = make_step(graphdef, optimizer)

    mesh = pp.MpmdMesh(
        jax.sharding.Mesh(np.array(jax.devices()[: args.stages]), ("stage",)), "stage"
    )
    lowered = jax.jit(train_step).lower(params, opt_state, batch)
    step = pp.partition(lowered, mesh=mesh).compile()
    reference = jax.jit(train_step)

    ours = theirs = (params, opt_state)
    worst = 0.0
    for n in range(args.steps):
        *ours, loss = step(*ours, batch)
        *theirs, expected = reference(*theirs, batch)
        loss, expected = float(np.mean(loss)), float(np.mean(expected))
        error = abs(loss - expected) / abs(expected)
        worst = max(worst, error)
        print(f"step {n}: loss {loss:.6f}  jax.jit {expected:.6f}  rel. diff {error:.2e}")
    tolerance = TOLERANCE[args.dtype]
    ok = worst <= tolerance
    print(
        f"{'OK' if ok else 'MISMATCH'}: worst relative difference {worst:.2e} "
        f"(tolerance {tolerance:.0e}, {args.dtype} parameters)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
