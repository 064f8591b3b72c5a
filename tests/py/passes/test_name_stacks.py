"""Module paths read from name stacks as JAX writes them for each library's models.

The name stacks below are copied from real lowerings (``lowered.as_text(debug_info=True)``
of a treduce step over each model; jax 0.12, flax 0.12, transformers 4.57, dm-haiku 0.0.17,
penzai 0.2.5, mamba2-jax 1.1.2); the expected paths are what a user writes as split points.
"""

from __future__ import annotations

import pytest
from jax.extend.mlir import ir

from jaxpp_mlir import ir_context
from jaxpp_mlir.passes.name_stacks import ScopePath, scope_path

LOOP = "jit(step)/while/body/eval_jaxpr"

CASES = [
    # flax linen: the module names, forward and transposed.
    (f"{LOOP}/jvp(Model)/layers_0/Dense_0/dot_general", ("Model", "layers_0", "Dense_0"), False),
    (f"{LOOP}/transpose(jvp(Model))/layers_3/mul", ("Model", "layers_3"), True),
    # nn.remat: the recomputed forward names its path again under the transposed scope.
    (
        f"{LOOP}/transpose(jvp(Model))/jvp(Model)/checkpoint/rematted_computation/layers_3/"
        "LayerNorm_0/square",
        ("Model", "layers_3", "LayerNorm_0"),
        True,
    ),
    (
        f"{LOOP}/transpose(jvp(Model))/encoder/jvp(Model)/encoder/checkpoint/layers_1/Dense_0/"
        "reshape",
        ("Model", "encoder", "layers_1", "Dense_0"),
        True,
    ),
    # Hugging Face's FlaxGPT2LMHeadModel: blocks h/0..h/N, setup scopes kept as named.
    (
        f"{LOOP}/jvp(FlaxGPT2LMHeadModule)/transformer/h/1/attn.setup/broadcast_in_dim",
        ("FlaxGPT2LMHeadModule", "transformer", "h", "1", "attn.setup"),
        False,
    ),
    # haiku: module names without the "~" of parameter paths.
    (
        f"{LOOP}/jvp(res_net)/block_group_2/block_0/batchnorm_0/mean_ema/mul",
        ("res_net", "block_group_2", "block_0", "batchnorm_0", "mean_ema"),
        False,
    ),
    # penzai: Sequential's layer indices, vmap scopes of named axes dropped.
    (f"{LOOP}/jvp(2)/0/1/1/vmap(vmap(vmap()))/dot_general", ("2", "0", "1", "1"), False),
    # jax.named_scope (mamba2-jax), a call of a jitted helper, an einsum's scope.
    (
        f"{LOOP}/jvp(mamba2_causal_lm)/mamba2_backbone/mamba2_mixer/jit(silu)",
        ("mamba2_causal_lm", "mamba2_backbone", "mamba2_mixer"),
        False,
    ),
    (
        f"{LOOP}/jvp(mamba2_causal_lm)/mamba2_backbone/mamba2_mixer/bhzc,bchpn->bzhpn/dot_general",
        ("mamba2_causal_lm", "mamba2_backbone", "mamba2_mixer", "bhzc,bchpn->bzhpn"),
        False,
    ),
    # No module: the loss and its gradient seed, the step itself, an inlined function's op.
    (f"{LOOP}/jvp()/integer_pow", (), False),
    (f"{LOOP}/transpose(jvp())/div", (), True),
    ("jit(step)/mul", (), False),
    ("iota", (), False),
    # A jvp inside a module's backward that is no recomputation keeps the path.
    (f"{LOOP}/transpose(jvp(Model))/layers_2/jvp(gelu)/mul", ("Model", "layers_2", "gelu"), True),
]


@pytest.mark.parametrize(("stack", "path", "transposed"), CASES)
def test_module_path_of_each_library(stack, path, transposed):
    with ir_context.make_context():
        location = ir.Location.name(stack, childLoc=ir.Location.file("model.py", 3, 5))
        assert scope_path(location) == ScopePath(path, transposed)


def test_the_name_stack_is_found_through_call_sites_and_fused_locations():
    stack = f"{LOOP}/jvp(Model)/layers_4/tanh"
    with ir_context.make_context():
        named = ir.Location.name(stack)
        caller = ir.Location.file("step.py", 10, 1)
        assert scope_path(ir.Location.callsite(named, [caller])).path == ("Model", "layers_4")
        fused = ir.Location.fused([ir.Location.unknown(), named])
        assert scope_path(fused).path == ("Model", "layers_4")
        assert scope_path(ir.Location.unknown()) == ScopePath((), False)
