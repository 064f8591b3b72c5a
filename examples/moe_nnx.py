"""The Llama-style decoder of llama_nnx.py with mixture-of-experts layers, pipelined with
expert parallelism inside each stage.

Every feed-forward block is a mixture of SwiGLU experts: a router picks each
token's top-k experts, tokens beyond an expert's capacity are dropped, and the
chosen experts' outputs are summed with the router's renormalized weights. The
pipeline mesh is ``("stage", "expert")``: inside a stage, the tokens are split
over ``expert`` (data parallel for attention) and so are the experts; a
``shard_map`` over the stage's submesh sends each token to the device of its
expert and back with two ``all_to_all``s. The rest (RoPE, grouped-query
attention, RMSNorm, untied head after the last marker, adamw, the comparison
with ``jax.jit`` and its tolerance) is llama_nnx.py's.

    python examples/moe_nnx.py                          # small: 2 stages x 2 expert ways
    python examples/moe_nnx.py --layers 8 --stages 2 --expert-ways 4 --experts 16 \\
        --top-k 2 --width 512 --heads 8 --kv-heads 4 --ffn 1024 --seq 256   # larger
"""

from __future__ import annotations

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import llama_nnx  # noqa: E402  (sets the host device count before jax starts)
from flax import nnx  # noqa: E402
from jax.sharding import Mesh  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

AXIS = "expert"
# Each expert's three weights on the device of its expert; everything else replicated.
EXPERT_PARALLEL = {name: P(AXIS, None, None) for name in ("w_gate", "w_up", "w_down")}


def route(logits: jax.Array, top_k: int, capacity: int) -> tuple[jax.Array, jax.Array]:
    """Dispatch [tokens, experts, capacity] (0/1) and combine weights (same shape) of
    ``logits`` [tokens, experts]: each token's ``top_k`` experts, in slot order, the
    tokens past an expert's ``capacity`` dropped."""
    tokens, experts = logits.shape
    weights, chosen = jax.lax.top_k(jax.nn.softmax(logits, axis=-1), top_k)
    weights = weights / weights.sum(axis=-1, keepdims=True)
    one_hot = jax.nn.one_hot(chosen, experts, dtype=jnp.int32)  # [tokens, k, experts]
    # Slot-major order: every token's first choice is served before any second choice.
    order = one_hot.transpose(1, 0, 2).reshape(top_k * tokens, experts)
    position = (jnp.cumsum(order, axis=0) - 1).reshape(top_k, tokens, experts)
    position = position.transpose(1, 0, 2)  # [tokens, k, experts]
    kept = one_hot * (position < capacity)
    slots = jax.nn.one_hot(jnp.sum(position * kept, axis=-1), capacity, dtype=jnp.float32)
    per_slot = kept.astype(jnp.float32)[..., None] * slots[:, :, None, :]  # [t, k, e, c]
    dispatch = per_slot.sum(axis=1)
    combine = (per_slot * weights[:, :, None, None]).sum(axis=1)
    return dispatch, combine


class MixtureOfExperts(nnx.Module):
    """Top-k routed SwiGLU experts, the experts split over ``AXIS`` of ``mesh``."""

    def __init__(self, args, mesh: Mesh, rngs: nnx.Rngs):
        dtype = jnp.dtype(args.dtype)
        self.mesh, self.top_k, self.capacity_factor = mesh, args.top_k, args.capacity_factor
        self.router = nnx.Linear(
            args.width, args.experts, use_bias=False, dtype=dtype, param_dtype=dtype, rngs=rngs
        )
        init = nnx.initializers.lecun_normal(in_axis=-2, out_axis=-1, batch_axis=0)
        shape_in = (args.experts, args.width, args.ffn)
        shape_out = (args.experts, args.ffn, args.width)
        self.w_gate = nnx.Param(init(rngs.params(), shape_in, dtype))
        self.w_up = nnx.Param(init(rngs.params(), shape_in, dtype))
        self.w_down = nnx.Param(init(rngs.params(), shape_out, dtype))

    def __call__(self, x: jax.Array) -> jax.Array:
        batch, seq, width = x.shape
        tokens = x.reshape(batch * seq, width)
        logits = self.router(tokens).astype(jnp.float32)
        experts = logits.shape[-1]
        ways = self.mesh.shape[AXIS]
        local_tokens = tokens.shape[0] // ways
        capacity = max(1, math.ceil(local_tokens * self.top_k * self.capacity_factor / experts))

        def local(tokens, logits, w_gate, w_up, w_down):
            """One device: its tokens, its experts' weights [experts / ways, ...]."""
            dispatch, combine = route(logits, self.top_k, capacity)
            sent = jnp.einsum("tec,td->ecd", dispatch.astype(tokens.dtype), tokens)
            # To the device of each expert: [experts / ways, ways * capacity, width].
            received = jax.lax.all_to_all(sent, AXIS, 0, 1, tiled=True)
            hidden = nnx.silu(jnp.einsum("ecd,edf->ecf", received, w_gate))
            hidden = hidden * jnp.einsum("ecd,edf->ecf", received, w_up)
            done = jnp.einsum("ecf,efd->ecd", hidden, w_down)
            back = jax.lax.all_to_all(done, AXIS, 1, 0, tiled=True)  # [experts, capacity, width]
            return jnp.einsum("tec,ecd->td", combine.astype(back.dtype), back)

        expert_spec = P(AXIS, None, None)
        out = jax.shard_map(
            local,
            mesh=self.mesh,
            in_specs=(P(AXIS), P(AXIS), expert_spec, expert_spec, expert_spec),
            out_specs=P(AXIS),
        )(tokens, logits, self.w_gate[...], self.w_up[...], self.w_down[...])
        return out.reshape(batch, seq, width)


def main(argv: list[str] | None = None) -> int:
    p = llama_nnx.parser(
        __doc__.splitlines()[0], "--expert-ways", "expert-parallel ways inside a stage"
    )
    p.add_argument("--experts", type=int, default=4)
    p.add_argument("--top-k", type=int, default=2)
    p.add_argument("--capacity-factor", type=float, default=1.25)
    p.set_defaults(ffn=64)
    args = llama_nnx.check_args(p, p.parse_args(argv))
    if args.experts % args.ways or args.microbatch_size % args.ways:
        p.error("--experts and --microbatch-size must be multiples of --expert-ways")
    if not 1 <= args.top_k <= args.experts:
        p.error("--top-k must be between 1 and --experts")
    mesh = llama_nnx.pipeline_mesh(args, AXIS)
    lowering = mesh.lowering_mesh()

    def build():
        def moe(args, rngs):
            return MixtureOfExperts(args, lowering, rngs)

        return llama_nnx.Decoder(args, moe, nnx.Rngs(0))

    graphdef, params = llama_nnx.initial_params(args, build)
    batch_spec = P(None, AXIS)  # [microbatch, batch, seq]: each device its sequences
    return llama_nnx.train_and_compare(args, mesh, graphdef, params, EXPERT_PARALLEL, batch_spec)


if __name__ == "__main__":
    sys.exit(main())
