"""A Llama-style decoder in flax nnx, pipelined with tensor parallelism inside stages.

RoPE, grouped-query attention, RMSNorm, SwiGLU feed-forward and an untied
output head. Each stage ends with ``mark_stage_end`` (one marker per stage,
named ``stage<i>``); the final norm, the head and the loss follow the last
marker and run in the last stage. With ``--scan-layers`` the layers are one stacked
module (built by ``nnx.vmap``, applied by ``nnx.scan``) and the model has no marker at
all: ``partition`` splits the scan into the schedule's stages, each stage program keeps
its own loop over its layers, and each rank holds only its rows of the stacked
parameters and of their optimizer state (no tensor parallelism inside stages in that
mode: ``--model 1``). The pipeline mesh is ``("stage", "model")``:
each stage runs on its own submesh, tensor-parallel over ``model`` (attention
heads and the feed-forward's hidden units split Megatron-style, the head over
the vocabulary). The step is lowered on ``mesh.lowering_mesh()`` with those
shardings, partitioned with ``Std1F1B`` and trained with optax adamw next to
``jax.jit`` of the same step; exits 1 if a loss differs by more than the
tolerance (float32: stage programs are separate XLA programs, so they differ
from jax.jit's single program by rounding only).

    python examples/llama_nnx.py                       # small: 2 stages x 2-way TP
    python examples/llama_nnx.py --layers 8 --stages 4 --model 2 --width 512 \\
        --heads 8 --kv-heads 4 --ffn 1408 --vocab 32000 --seq 256   # closer to real sizes
    python examples/llama_nnx.py --scan-layers --model 1 --layers 8 --stages 4   # no markers
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from flax import nnx  # noqa: E402
from gpt2_flax_linen import stacked_rows  # noqa: E402
from gpt2_flax_nnx import make_step  # noqa: E402  (the same adamw step over nnx parameters)
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import jaxpp_mlir as pp  # noqa: E402

# Relative difference of each step's mean loss from jax.jit's: float32 rounding of
# separate programs (stage boundaries stop XLA's fusion) grows over adamw steps.
TOLERANCE = {"float32": 1e-4, "bfloat16": 5e-2}

# Megatron-style tensor parallelism: column-parallel projections into the heads and the
# hidden units, row-parallel ones out of them, the head split over the vocabulary. The
# key is the module's attribute name holding the kernel.
TENSOR_PARALLEL = {
    "q": P(None, "model"),
    "k": P(None, "model"),
    "v": P(None, "model"),
    "o": P("model", None),
    "gate": P(None, "model"),
    "up": P(None, "model"),
    "down": P("model", None),
    "head": P(None, "model"),
}


def rope(x: jax.Array, theta: float = 10000.0) -> jax.Array:
    """Rotary position embedding of ``x`` [batch, seq, heads, head_dim] (halves rotated)."""
    seq, dim = x.shape[1], x.shape[-1]
    frequencies = 1.0 / theta ** (jnp.arange(0, dim, 2, dtype=jnp.float32) / dim)
    angles = jnp.arange(seq, dtype=jnp.float32)[:, None] * frequencies  # [seq, dim / 2]
    cos, sin = jnp.cos(angles)[:, None, :], jnp.sin(angles)[:, None, :]
    x1, x2 = jnp.split(x.astype(jnp.float32), 2, axis=-1)
    rotated = jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)
    return rotated.astype(x.dtype)


class Attention(nnx.Module):
    """Causal grouped-query attention: ``kv_heads`` key/value heads shared by groups."""

    def __init__(self, width: int, heads: int, kv_heads: int, dtype, rngs: nnx.Rngs):
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, width // heads
        kw = {"use_bias": False, "dtype": dtype, "param_dtype": dtype, "rngs": rngs}
        self.q = nnx.Linear(width, heads * self.head_dim, **kw)
        self.k = nnx.Linear(width, kv_heads * self.head_dim, **kw)
        self.v = nnx.Linear(width, kv_heads * self.head_dim, **kw)
        self.o = nnx.Linear(heads * self.head_dim, width, **kw)

    def __call__(self, x: jax.Array) -> jax.Array:
        batch, seq, _ = x.shape
        q = rope(self.q(x).reshape(batch, seq, self.heads, self.head_dim))
        k = rope(self.k(x).reshape(batch, seq, self.kv_heads, self.head_dim))
        v = self.v(x).reshape(batch, seq, self.kv_heads, self.head_dim)
        group = self.heads // self.kv_heads
        k, v = jnp.repeat(k, group, axis=2), jnp.repeat(v, group, axis=2)
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32)
        scores = scores / np.sqrt(self.head_dim)
        causal = jnp.tril(jnp.ones((seq, seq), dtype=bool))
        weights = jax.nn.softmax(jnp.where(causal, scores, -1e30), axis=-1).astype(x.dtype)
        out = jnp.einsum("bhqk,bkhd->bqhd", weights, v).reshape(batch, seq, -1)
        return self.o(out)


class SwiGLU(nnx.Module):
    def __init__(self, width: int, hidden: int, dtype, rngs: nnx.Rngs):
        kw = {"use_bias": False, "dtype": dtype, "param_dtype": dtype, "rngs": rngs}
        self.gate = nnx.Linear(width, hidden, **kw)
        self.up = nnx.Linear(width, hidden, **kw)
        self.down = nnx.Linear(hidden, width, **kw)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.down(nnx.silu(self.gate(x)) * self.up(x))


class DecoderLayer(nnx.Module):
    def __init__(self, args, feed_forward: nnx.Module, rngs: nnx.Rngs):
        dtype = jnp.dtype(args.dtype)
        kw = {"dtype": dtype, "param_dtype": dtype, "rngs": rngs}
        self.attention_norm = nnx.RMSNorm(args.width, epsilon=1e-5, **kw)
        self.attention = Attention(args.width, args.heads, args.kv_heads, dtype, rngs)
        self.ffn_norm = nnx.RMSNorm(args.width, epsilon=1e-5, **kw)
        self.ffn = feed_forward

    def __call__(self, x: jax.Array) -> jax.Array:
        x = x + self.attention(self.attention_norm(x))
        return x + self.ffn(self.ffn_norm(x))


def swiglu(args, rngs: nnx.Rngs) -> nnx.Module:
    return SwiGLU(args.width, args.ffn, jnp.dtype(args.dtype), rngs)


class Decoder(nnx.Module):
    """Token embedding, ``args.layers`` decoder layers, final RMSNorm, untied head.

    ``feed_forward(args, rngs)`` builds each layer's feed-forward block.
    """

    def __init__(self, args, feed_forward: Callable[..., nnx.Module], rngs: nnx.Rngs):
        dtype = jnp.dtype(args.dtype)
        kw = {"dtype": dtype, "param_dtype": dtype, "rngs": rngs}
        self.embed = nnx.Embed(args.vocab, args.width, **kw)
        self.layers = nnx.List(
            [DecoderLayer(args, feed_forward(args, rngs), rngs) for _ in range(args.layers)]
        )
        self.norm = nnx.RMSNorm(args.width, epsilon=1e-5, **kw)
        self.head = nnx.Linear(args.width, args.vocab, use_bias=False, **kw)
        self.per_stage = args.layers // args.stages

    def __call__(self, tokens: jax.Array) -> jax.Array:
        x = self.embed(tokens)
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if (i + 1) % self.per_stage == 0:  # one marker per stage, the last one included
                x = pp.mark_stage_end(x, name=f"stage{i // self.per_stage}")
        return self.head(self.norm(x))  # after the last marker: in the last stage


class ScannedDecoder(nnx.Module):
    """``Decoder`` with its layers stacked: one ``DecoderLayer`` whose parameters have a
    leading ``[args.layers]`` axis (``nnx.vmap``), applied by ``nnx.scan``; no marker."""

    def __init__(self, args, feed_forward: Callable[..., nnx.Module], rngs: nnx.Rngs):
        dtype = jnp.dtype(args.dtype)
        kw = {"dtype": dtype, "param_dtype": dtype, "rngs": rngs}
        self.embed = nnx.Embed(args.vocab, args.width, **kw)

        @nnx.split_rngs(splits=args.layers)
        @nnx.vmap(in_axes=(0,), out_axes=0)
        def stacked_layers(rngs: nnx.Rngs) -> DecoderLayer:
            return DecoderLayer(args, feed_forward(args, rngs), rngs)

        self.layers = stacked_layers(rngs)
        self.norm = nnx.RMSNorm(args.width, epsilon=1e-5, **kw)
        self.head = nnx.Linear(args.width, args.vocab, use_bias=False, **kw)

    def __call__(self, tokens: jax.Array) -> jax.Array:
        @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
        def apply_layers(x: jax.Array, layer: DecoderLayer) -> jax.Array:
            return layer(x)

        x = apply_layers(self.embed(tokens), self.layers)
        return self.head(self.norm(x))


def numpy_params(shapes, seed: int = 0):
    """Parameters of the shapes and dtypes of ``shapes`` drawn by numpy: kernels and
    embeddings normal over the square root of their input size, norm scales 1."""
    rng = np.random.default_rng(seed)

    def draw(path, leaf):
        name = jax.tree_util.keystr(path[-2:-1])  # the last key is the variable's ``.value``
        if name == "['scale']":
            value = np.ones(leaf.shape, np.float32)
        else:
            fan_in = leaf.shape[-1] if name == "['embedding']" else leaf.shape[-2]
            value = rng.standard_normal(leaf.shape, dtype=np.float32) / np.sqrt(fan_in)
        return jnp.asarray(value.astype(leaf.dtype))

    return jax.tree_util.tree_map_with_path(draw, shapes)


def param_specs(params, rules: dict[str, P], stacked_layers: bool = False):
    """Each parameter's ``PartitionSpec`` inside a stage: ``rules`` by the name of the
    module attribute that holds it (``['ffn']['gate']['kernel']`` -> ``rules['gate']``),
    or by the variable's own name; replicated where no rule names it. With
    ``stacked_layers`` (``ScannedDecoder``), a parameter under ``['layers']`` has a leading
    layer axis, kept whole."""

    def spec(path, leaf):
        variable = jax.tree_util.keystr(path[-2:-1])[2:-2]
        owner = jax.tree_util.keystr(path[-3:-2])[2:-2]  # the module holding the variable
        rule = rules.get(variable, rules.get(owner, P()))
        stacked = stacked_layers and jax.tree_util.keystr(path[:1]) == "['layers']"
        return P(None, *rule) if stacked and rule != P() else rule

    return jax.tree_util.tree_map_with_path(spec, params)


def parser(description: str, ways_flag: str, ways_help: str) -> argparse.ArgumentParser:
    """The flags of both examples; ``ways_flag`` sets the size of the axis inside a stage."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--stages", type=int, default=2)
    p.add_argument(ways_flag, dest="ways", type=int, default=2, help=ways_help)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--ffn", type=int, default=128, help="SwiGLU hidden units")
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--microbatches", type=int, default=4)
    p.add_argument("--microbatch-size", type=int, default=2)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--dtype", choices=sorted(TOLERANCE), default="float32")
    p.add_argument(
        "--init",
        choices=("flax", "numpy"),
        default="flax",
        help="numpy: draw the parameters with numpy (no initializer compile; the tests use it)",
    )
    return p


def check_args(p: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.Namespace:
    if args.layers % args.stages:
        p.error("--layers must be a multiple of --stages")
    if args.heads % args.kv_heads or args.width % args.heads:
        p.error("--heads must divide --width and be a multiple of --kv-heads")
    if (args.width // args.heads) % 2:
        p.error("the head size (--width / --heads) must be even for RoPE")
    if args.stages * args.ways > len(jax.devices()):
        p.error(f"{args.stages} stages of {args.ways} devices need {args.stages * args.ways}")
    return args


def initial_params(args, build: Callable[[], nnx.Module]):
    """The model split into its graph and its parameters: flax's initializers (``--init
    flax``, built under jit) or numpy's draw of the same shapes (``--init numpy``)."""
    if args.init == "numpy":
        graphdef, shapes = nnx.split(nnx.eval_shape(build))
        return graphdef, numpy_params(shapes)
    return nnx.split(nnx.jit(build)())


def pipeline_mesh(args, axis: str) -> pp.MpmdMesh:
    """``args.stages`` submeshes of ``args.ways`` devices along ``axis``."""
    devices = np.array(jax.devices()[: args.stages * args.ways]).reshape(args.stages, -1)
    return pp.MpmdMesh(jax.sharding.Mesh(devices, ("stage", axis)), "stage")


def train_and_compare(
    args, mesh: pp.MpmdMesh, graphdef, params, rules: dict[str, P], batch_spec: P
) -> int:
    """Trains ``args.steps`` steps pipelined and with jax.jit; 0 if every loss agrees.

    ``rules`` split the parameters inside a stage (``param_specs``), ``batch_spec`` the
    token arrays [microbatch, batch, seq]."""
    lowering = mesh.lowering_mesh()

    def on(spec: P) -> NamedSharding:
        return NamedSharding(lowering, spec)

    scan_layers = getattr(args, "scan_layers", False)  # moe_nnx.py's flags have none
    param_shardings = jax.tree_util.tree_map(on, param_specs(params, rules, scan_layers))
    params = jax.device_put(params, param_shardings)
    optimizer = optax.adamw(args.lr)
    opt_shardings = optax.tree_utils.tree_map_params(
        optimizer,
        lambda _, sharding: sharding,
        jax.eval_shape(optimizer.init, params),
        param_shardings,
        transform_non_params=lambda _: on(P()),
    )
    opt_state = jax.jit(optimizer.init, out_shardings=opt_shardings)(params)
    shape = (args.microbatches, args.microbatch_size, args.seq + 1)
    # Drawn by numpy: jax.random would compile a sampler for this shape first.
    tokens = np.random.default_rng(1).integers(0, args.vocab, shape, dtype=np.int32)
    batch = jax.device_put((tokens[..., :-1], tokens[..., 1:]), on(batch_spec))

    train_step = make_step(graphdef, optimizer)
    step_shardings = (param_shardings, opt_shardings, (on(batch_spec), on(batch_spec)))
    reference = jax.jit(train_step, in_shardings=step_shardings)
    lowered = reference.lower(params, opt_state, batch)
    step = pp.partition(lowered, mesh=mesh, schedule=pp.Std1F1B(args.stages)).compile()

    ours = theirs = (params, opt_state)
    worst = 0.0
    for n in range(args.steps):
        *ours, loss = step(*ours, batch)
        *theirs, expected = reference(*theirs, batch)
        loss, expected = float(np.mean(loss)), float(np.mean(expected))
        error = abs(loss - expected) / abs(expected)
        worst = max(worst, error)
        print(f"step {n}: loss {loss:.6f}  jax.jit {expected:.6f}  rel. diff {error:.2e}")
    (axis,) = (a for a in mesh.jax_mesh.axis_names if a != "stage")
    if scan_layers:
        print(stacked_rows(ours, mesh))
    split = [x for x in jax.tree_util.tree_leaves(ours[0]) if axis in x.sharding.spec]
    stages = [set(row.flat) for row in np.asarray(mesh.jax_mesh.devices)]
    # A stacked array spans every stage; each stage's rows are split over its devices.
    ways = {max(len(x.sharding.device_set & stage) for stage in stages) for x in split}
    print(
        f"{len(split)} parameter arrays split over '{axis}', each on {sorted(ways)} devices "
        "of its stage"
    )
    tolerance = TOLERANCE[args.dtype]
    ok = worst <= tolerance
    print(
        f"{'OK' if ok else 'MISMATCH'}: worst relative difference {worst:.2e} "
        f"(tolerance {tolerance:.0e}, {args.dtype} parameters, {args.stages} stages x "
        f"{args.ways}-way '{axis}' parallelism)"
    )
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0], "--model", "tensor-parallel ways inside a stage")
    p.add_argument(
        "--scan-layers",
        action="store_true",
        help="stack the layers and apply them with nnx.scan, with no stage marker",
    )
    args = check_args(p, p.parse_args(argv))
    for name in ("kv_heads", "ffn", "vocab"):
        if getattr(args, name) % args.ways:
            p.error(f"--{name.replace('_', '-')} must be a multiple of --model")
    model = ScannedDecoder if args.scan_layers else Decoder
    graphdef, params = initial_params(args, lambda: model(args, swiglu, nnx.Rngs(0)))
    mesh = pipeline_mesh(args, "model")
    return train_and_compare(args, mesh, graphdef, params, TENSOR_PARALLEL, P())


if __name__ == "__main__":
    sys.exit(main())
