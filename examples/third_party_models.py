"""Models as their authors ship them, pipelined with stage markers added from outside, or
with no markers at all.

Five model implementations that nobody on this project wrote (four from installed
packages, one flax example kept here as flax wrote it), each in its library's own style,
used unchanged. Each is cut into stages one of three ways (``--cut``; ``gemma_flax`` by
markers only): ``markers``, stage markers added around the library's blocks from
outside (an interceptor, a model edit or a wrapper), never by editing the library's
code; ``split-points``, no markers, ``partition(..., split_points=...)`` naming the
module paths where stages start (as JAX's name stack spells them); ``auto``, no markers,
``partition`` finds the repeated blocks itself and balances them into stages.

- ``gpt2_hf``: Hugging Face transformers' ``FlaxGPT2LMHeadModel`` (flax linen), with its
  dropout on (one key per microbatch, split in the batch) and AdamW with a warmup-cosine
  schedule; a marker after each ``FlaxGPT2Block`` through ``flax.linen.intercept_methods``.
- ``llama_penzai``: penzai's Llama-style transformer (``llamalike_common``: RoPE,
  grouped-query attention, SwiGLU, RMSNorm) and Adam; a marker layer after each
  ``TransformerBlock``, inserted with penzai's own model surgery (``pz.select``).
- ``mamba2_nnx``: mamba2-jax's ``Mamba2ForCausalLM`` (flax nnx; chunked state-space scan,
  tied embedding) and AdamW; each ``Mamba2Block`` wrapped by an nnx module that marks its
  output.
- ``resnet_haiku``: dm-haiku's ``hk.nets.ResNet`` (convolutions, BatchNorm with its
  moving averages as state) and SGD with momentum; a marker after block groups 1 and 3
  through ``haiku.intercept_methods``.
- ``gemma_flax``: flax's Gemma example (flax nnx; ``examples/third_party/flax_gemma``,
  flax's files kept as they are), written for JAX's explicit sharding: a
  ``jax.make_mesh`` mesh of Explicit axes, ``out_sharding`` on every parameter and
  einsum, traced under ``jax.set_mesh``; each stage on a 2 x 2 submesh (``fsdp``: data
  and parameters, ``tensor``: heads, hidden units, vocabulary) and the example's AdamW;
  each block wrapped by an nnx module that marks its output. Markers only (nnx names
  no module, so there is nothing to cut at without them); its ``Workload`` carries its
  ``MpmdMesh``.

Each trains a few steps pipelined and under plain ``jax.jit`` from the same state and
inputs, and prints the largest differences in ulps of each leaf's largest magnitude
(``tests/py/support/numerics.py``' rule: a few ulps are rounding): of the losses (it
fails past ``--max-ulps``), of the state after the last step, and of one step taken
from ``jax.jit``'s state. Training amplifies rounding in some leaves (GPT-2's attention
key bias has a gradient of zero in exact arithmetic, which AdamW normalizes into steps of
either sign; BatchNorm's backward cancels), so the state's numbers can be large where
one step's are small; ``tests/py/third_party/`` states each model's tolerance:

    python examples/third_party_models.py                 # every model, 3 steps
    python examples/third_party_models.py --model gpt2_hf --steps 5
    python examples/third_party_models.py --cut auto --stages 3 --layers 6  # all but gemma_flax

Needs ``pip install -e ".[third-party]"`` (transformers<5, penzai, mamba2-jax,
dm-haiku, jaxtyping). ``tests/py/third_party/`` runs the same workloads in CI;
``benchmarks/third_party_models.py`` times them against ``jax.jit``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
from collections.abc import Callable
from typing import Any

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from jax.sharding import Mesh  # noqa: E402

import jaxpp_mlir as pp  # noqa: E402


@dataclasses.dataclass(frozen=True)
class Workload:
    """One model's training step and what it needs.

    ``step(*state, *inputs(i))`` returns ``(*new_state, loss)``: the state (parameters,
    optimizer state, model state) is fed back, ``inputs(i)`` gives step ``i``'s batch
    (and key). ``schedule`` has ``num_stages`` stages on as many ranks.
    """

    name: str
    library: str
    step: Callable[..., tuple]
    state: tuple
    inputs: Callable[[int], tuple]
    num_stages: int
    schedule: pp.Schedule
    mpmd_mesh: pp.MpmdMesh | None = None  # default: one device per stage
    split_points: tuple[str, ...] | None = None  # partition's (None: markers or automatic)

    def mesh(self) -> pp.MpmdMesh:
        if self.mpmd_mesh is not None:
            return self.mpmd_mesh
        devices = np.array(jax.devices()[: self.num_stages])
        return pp.MpmdMesh(Mesh(devices, ("stage",)), "stage")

    def mesh_context(self) -> contextlib.AbstractContextManager:
        """Where the step is traced and run: under ``jax.set_mesh`` of its own mesh's
        lowering mesh when it has one (code written for explicit sharding names its
        shardings against the mesh in context), else as it is."""
        if self.mpmd_mesh is None:
            return contextlib.nullcontext()
        return jax.set_mesh(self.mpmd_mesh.lowering_mesh())


#: How a workload is cut into stages (see the module doc).
CUTS = ("markers", "split-points", "auto")


def _check_cut(cut: str) -> None:
    if cut not in CUTS:
        raise ValueError(f"cut must be one of {CUTS}, got {cut!r}")


def _evenly(names: list[str], num_stages: int) -> tuple[str, ...]:
    """Split points starting ``num_stages - 1`` stages at evenly spaced ``names`` (blocks)."""
    return tuple(names[len(names) * stage // num_stages] for stage in range(1, num_stages))


def _tokens(num_microbatches: int, rows: int, length: int, vocab: int, seed: int) -> jax.Array:
    values = np.random.default_rng(seed).integers(0, vocab, (num_microbatches, rows, length))
    return jax.device_put(values.astype(np.int32))


def _treduce_gradients(loss_fn, params, batch):
    """Summed loss and gradients over the microbatches of ``batch`` (``treduce``)."""
    return pp.treduce(
        lambda microbatch: jax.value_and_grad(loss_fn)(params, microbatch),
        batch,
        operation=(pp.Add, pp.Add),
    )


def _language_model(
    name: str,
    library: str,
    loss_fn: Callable,
    params: Any,
    optimizer: optax.GradientTransformation,
    tokens: jax.Array,
    schedule: pp.Schedule,
    num_stages: int,
    split_points: tuple[str, ...] | None,
    *,
    dropout: bool = False,
    mpmd_mesh: pp.MpmdMesh | None = None,
) -> Workload:
    """A language model trained on the same ``tokens`` each step: the mean loss over the
    microbatches, ``optimizer``'s update. With ``dropout``, step ``i`` takes the key
    ``jax.random.key(i)`` too and gives each microbatch its own (split in the batch):
    ``loss_fn(params, (tokens, key))``."""

    def train(params, opt_state, batch, num_microbatches):
        loss, grads = _treduce_gradients(loss_fn, params, batch)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss / num_microbatches

    if dropout:

        def step(params, opt_state, tokens, key):
            keys = jax.random.split(key, tokens.shape[0])  # one dropout key per microbatch
            return train(params, opt_state, (tokens, keys), tokens.shape[0])

    else:

        def step(params, opt_state, tokens):
            return train(params, opt_state, tokens, tokens.shape[0])

    state = (params, jax.jit(optimizer.init)(params))
    return Workload(
        name,
        library,
        step,
        state,
        (lambda i: (tokens, jax.random.key(i))) if dropout else (lambda i: (tokens,)),
        num_stages,
        schedule,
        mpmd_mesh=mpmd_mesh,
        split_points=split_points,
    )


# -- Hugging Face transformers: FlaxGPT2LMHeadModel (flax linen), dropout on ------------


def gpt2_hf(
    num_stages: int = 2, num_microbatches: int = 4, *, cut: str = "markers", num_layers: int = 0
) -> Workload:
    """``num_layers`` blocks (default: one per stage); with markers, one stage per block."""
    import flax.linen as nn
    import transformers
    from transformers.models.gpt2.modeling_flax_gpt2 import FlaxGPT2Block

    _check_cut(cut)
    num_layers = num_layers or num_stages
    transformers.logging.set_verbosity_error()  # its notice that Flax classes are deprecated
    vocab = 64
    config = transformers.GPT2Config(
        vocab_size=vocab, n_positions=16, n_embd=32, n_layer=num_layers, n_head=4
    )
    model = transformers.FlaxGPT2LMHeadModel(config, seed=0)

    def end_stage_after_each_block(next_fun, args, kwargs, context):
        outputs = next_fun(*args, **kwargs)
        if isinstance(context.module, FlaxGPT2Block) and context.method_name == "__call__":
            return (pp.pipeline_enter_stage(outputs[0]), *outputs[1:])
        return outputs

    def loss_fn(params, microbatch):
        tokens, key = microbatch
        if cut == "markers":
            with nn.intercept_methods(end_stage_after_each_block):
                logits = model(tokens[:, :-1], params=params, dropout_rng=key, train=True).logits
        else:
            logits = model(tokens[:, :-1], params=params, dropout_rng=key, train=True).logits
        return optax.softmax_cross_entropy_with_integer_labels(logits, tokens[:, 1:]).mean()

    optimizer = optax.adamw(
        optax.warmup_cosine_decay_schedule(0.0, 1e-3, warmup_steps=2, decay_steps=10),
        weight_decay=0.01,
    )
    blocks = [f"h/{i}" for i in range(num_layers)]  # the blocks' module paths: transformer/h/i
    return _language_model(
        "gpt2_hf",
        f"transformers {transformers.__version__} (flax linen)",
        loss_fn,
        model.params,
        optimizer,
        _tokens(num_microbatches, 2, 9, vocab, seed=1),
        pp.Std1F1B(num_stages),
        num_stages,
        _evenly(blocks, num_stages) if cut == "split-points" else None,
        dropout=True,
    )


# -- penzai: a Llama-style transformer --------------------------------------------------


def llama_penzai(
    num_stages: int = 2, num_microbatches: int = 4, *, cut: str = "markers", num_layers: int = 0
) -> Workload:
    """``num_layers`` blocks (default: one per stage); with markers, one stage per block."""
    import penzai
    from penzai import pz
    from penzai.models.transformer import model_parts
    from penzai.models.transformer.variants import llamalike_common

    _check_cut(cut)
    num_layers = num_layers or num_stages
    vocab = 64
    config = llamalike_common.LlamalikeTransformerConfig(
        num_kv_heads=2,
        query_head_multiplier=2,
        embedding_dim=32,
        projection_dim=8,
        mlp_hidden_dim=64,
        num_decoder_blocks=num_layers,
        vocab_size=vocab,
        mlp_variant="swiglu",
        tie_embedder_and_logits=False,
    )
    model = llamalike_common.build_llamalike_transformer(config, init_base_rng=jax.random.key(0))

    @pz.pytree_dataclass
    class EndStage(pz.nn.Layer):
        def __call__(self, x, **side_inputs):
            return pp.pipeline_enter_stage(x)

    if cut == "markers":
        model = (
            pz.select(model)
            .at_instances_of(model_parts.TransformerBlock)
            .apply(lambda block: pz.nn.Sequential([block, EndStage()]))
        )
    unbound, params = pz.unbind_params(model, freeze=True)

    def loss_fn(params, tokens):
        bound = pz.bind_variables(unbound, params)
        inputs = pz.nx.wrap(tokens[:, :-1]).tag("batch", "seq")
        positions = pz.nx.arange("seq", tokens.shape[1] - 1)
        logits = bound(inputs, token_positions=positions).unwrap("batch", "seq", "vocabulary")
        return optax.softmax_cross_entropy_with_integer_labels(logits, tokens[:, 1:]).mean()

    return _language_model(
        "llama_penzai",
        f"penzai {penzai.__version__}",
        loss_fn,
        params,
        optax.adam(1e-3),
        _tokens(num_microbatches, 2, 9, vocab, seed=2),
        pp.GPipe(num_stages),
        num_stages,
        # penzai's Sequential names its i-th layer's scope "i": the embedding is 0, the
        # blocks 1..num_layers.
        _evenly([str(i) for i in range(1, num_layers + 1)], num_stages)
        if cut == "split-points"
        else None,
    )


# -- mamba2-jax: Mamba2ForCausalLM (flax nnx) -------------------------------------------


def mamba2_nnx(
    num_stages: int = 2, num_microbatches: int = 4, *, cut: str = "markers", num_layers: int = 0
) -> Workload:
    """``num_layers`` blocks (default: one per stage); with markers, one stage per block."""
    import mamba2_jax
    from flax import nnx

    _check_cut(cut)
    num_layers = num_layers or num_stages
    vocab = 64
    config = mamba2_jax.Mamba2Config(
        vocab_size=vocab,
        hidden_size=32,
        state_size=8,
        head_dim=8,
        chunk_size=8,  # shorter than the sequence: the chunked scan
        num_hidden_layers=num_layers,
    )
    model = mamba2_jax.Mamba2ForCausalLM(config, rngs=nnx.Rngs(0))

    class EndsStage(nnx.Module):
        """A block whose hidden state output ends a stage."""

        def __init__(self, block: nnx.Module):
            self.block = block

        def __call__(self, *args, **kwargs):
            hidden, *rest = self.block(*args, **kwargs)
            return (pp.pipeline_enter_stage(hidden), *rest)

    if cut == "markers":
        layers = model.backbone.layers
        for index in range(len(layers)):
            layers[index] = EndsStage(layers[index])
    graph, params = nnx.split(model, nnx.Param)

    def loss_fn(params, tokens):
        return nnx.merge(graph, params)(tokens, labels=tokens)["loss"]

    return _language_model(
        "mamba2_nnx",
        f"mamba2-jax {mamba2_jax.__version__} (flax nnx)",
        loss_fn,
        params,
        optax.adamw(1e-3),
        _tokens(num_microbatches, 2, 12, vocab, seed=3),
        pp.Std1F1B(num_stages),
        num_stages,
        # Its blocks have no numbers, but each starts with a norm that runs under
        # jax.named_scope("rms_norm") (so does the final norm): block k starts at call k,
        # "mamba2_backbone/rms_norm#k" (before its mixer, "mamba2_mixer#k", two values
        # would cross the cut: the norm's output and the residual).
        _evenly([f"mamba2_backbone/rms_norm#{i}" for i in range(num_layers)], num_stages)
        if cut == "split-points"
        else None,
    )


# -- dm-haiku: hk.nets.ResNet with BatchNorm state --------------------------------------


def resnet_haiku(
    num_stages: int = 2, num_microbatches: int = 4, *, cut: str = "markers", num_layers: int = 0
) -> Workload:
    """Four block groups; with markers, two stages (groups 0-1 and 2-3): ``num_stages``
    and ``num_layers`` apply to the other cuts."""
    import haiku as hk

    _check_cut(cut)
    if cut == "markers":
        num_stages = 2
    stage_ends = ("block_group_1", "block_group_3")  # 4 block groups, 2 stages

    def end_stage_after_groups(next_fun, args, kwargs, context):
        outputs = next_fun(*args, **kwargs)
        if (
            isinstance(context.module, hk.nets.ResNet.BlockGroup)
            and context.method_name == "__call__"
            and context.module.module_name.endswith(stage_ends)
        ):
            return pp.pipeline_enter_stage(outputs)
        return outputs

    def forward(images, is_training):
        net = hk.nets.ResNet(
            blocks_per_group=(1, 1, 1, 1),
            num_classes=10,
            bottleneck=False,
            channels_per_group=(4, 8, 8, 8),
            use_projection=(True, True, True, True),
        )
        if cut != "markers":
            return net(images, is_training=is_training)
        with hk.intercept_methods(end_stage_after_groups):
            return net(images, is_training=is_training)

    net = hk.transform_with_state(forward)
    rng = np.random.default_rng(4)
    # 4 rows of 16x16 images: BatchNorm's statistics over fewer values (the last group
    # sees 2x2 pixels) are so noisy that training amplifies any rounding.
    images = jax.device_put(rng.standard_normal((num_microbatches, 4, 16, 16, 3), np.float32))
    labels = jax.device_put(rng.integers(0, 10, (num_microbatches, 4)).astype(np.int32))
    params, state = net.init(jax.random.key(0), images[0], is_training=True)

    def loss_fn(params, state, microbatch):
        x, y = microbatch
        logits, new_state = net.apply(params, state, None, x, is_training=True)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean(), new_state

    optimizer = optax.sgd(0.01, momentum=0.9)

    def step(params, state, opt_state, batch):
        (loss, states), grads = pp.treduce(
            lambda mb: jax.value_and_grad(loss_fn, has_aux=True)(params, state, mb),
            batch,
            operation=((pp.Add, pp.Add), pp.Add),
        )
        n = batch[0].shape[0]
        # The moving averages: the mean of each microbatch's update (counters stay whole).
        state = jax.tree.map(
            lambda s: s // n if jnp.issubdtype(s.dtype, jnp.integer) else s / n, states
        )
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), state, opt_state, loss / n

    return Workload(
        "resnet_haiku",
        f"dm-haiku {hk.__version__}",
        step,
        (params, state, jax.jit(optimizer.init)(params)),
        lambda i: ((images, labels),),
        num_stages,
        pp.Std1F1B(num_stages),
        split_points=_evenly([f"block_group_{i}" for i in range(4)], num_stages)
        if cut == "split-points"
        else None,
    )


# -- flax's Gemma example (flax nnx), written for JAX's explicit sharding -----------------


def _import_flax_gemma():
    """``examples/third_party/flax_gemma``, flax's Gemma example kept as its authors wrote
    it (see its ``__init__``), imported as the package ``flax_gemma``."""
    import importlib.util
    import pathlib

    if "flax_gemma" not in sys.modules:
        folder = pathlib.Path(__file__).resolve().parent / "third_party" / "flax_gemma"
        spec = importlib.util.spec_from_file_location(
            "flax_gemma", folder / "__init__.py", submodule_search_locations=[str(folder)]
        )
        package = importlib.util.module_from_spec(spec)
        sys.modules["flax_gemma"] = package
        spec.loader.exec_module(package)
    return sys.modules["flax_gemma"]


def gemma_flax(
    num_stages: int = 2, num_microbatches: int = 4, *, cut: str = "markers", num_layers: int = 0
) -> Workload:
    """``num_layers`` blocks (default: one per stage), one stage per block, each stage on
    a 2 x 2 submesh: ``fsdp`` (the batch and the parameters' other dimension) by
    ``tensor`` (heads, hidden units, vocabulary), every axis Explicit. Markers only: nnx
    names no module and the example runs no ``jax.named_scope``, so there are no module
    paths to cut at."""
    from flax import nnx
    from jax.sharding import AxisType

    if cut != "markers":
        raise ValueError(
            f"gemma_flax is cut by markers only (got cut={cut!r}): flax nnx puts no module "
            "names in JAX's name stack and flax's Gemma example runs no jax.named_scope"
        )
    _import_flax_gemma()
    from flax_gemma import transformer as transformer_lib
    from flax_gemma import transformer_cfg

    num_layers = num_layers or num_stages
    axes = ("stage", "fsdp", "tensor")
    mpmd_mesh = pp.MpmdMesh(
        jax.make_mesh((num_stages, 2, 2), axes, axis_types=(AxisType.Explicit,) * len(axes)),
        "stage",
    )
    vocab = 64
    config = transformer_cfg.TransformerConfig(
        num_layers=num_layers,
        num_embed=vocab,
        embed_dim=32,
        hidden_dim=64,
        num_heads=4,
        head_dim=8,
        num_kv_heads=2,
        final_logit_softcap=None,
        use_post_attn_norm=True,
        use_post_ffw_norm=True,
        attention_types=(transformer_cfg.AttentionType.GLOBAL,) * num_layers,
        dropout_rate=0.1,  # attention probabilities, feed-forward, block and final outputs
        shd_config=transformer_cfg.ShardingConfig.fsdp_tp_sharding(
            fsdp_axis_name="fsdp", tensor_parallel_axis_name="tensor"
        ),
    )

    class EndsStage(nnx.Module):
        """A block whose activations output ends a stage."""

        def __init__(self, block: nnx.Module):
            self.block = block

        def __call__(self, *args, **kwargs):
            cache, activations = self.block(*args, **kwargs)
            return cache, pp.pipeline_enter_stage(activations)

    def loss_fn(params, microbatch):
        # As the example's train.py: a causal mask over the non-padding tokens, positions
        # from it, a dropout key, and the cross entropy of one-hot targets (the logits'
        # vocabulary is split over "tensor", which take_along_axis cannot gather from
        # unannotated).
        tokens, key = microbatch
        inputs, targets = tokens[:, :-1], tokens[:, 1:]
        input_mask = inputs > 0
        logits, _ = nnx.merge(graph, params)(
            inputs,
            positions=transformer_lib.build_positions_from_mask(input_mask),
            cache=None,
            attention_mask=transformer_lib.make_causal_attn_mask(input_mask),
            rngs=nnx.Rngs(dropout=key),
        )
        one_hot = jax.nn.one_hot(targets, logits.shape[-1])
        return -jnp.sum(one_hot * nnx.log_softmax(logits), axis=-1).mean()

    with jax.set_mesh(mpmd_mesh.lowering_mesh()):
        model = transformer_lib.Transformer(config, rngs=nnx.Rngs(params=0))
        for index in range(len(model.layers)):
            model.layers[index] = EndsStage(model.layers[index])
        graph, params = nnx.split(model, nnx.Param)
        values = np.random.default_rng(5).integers(1, vocab, (num_microbatches, 2, 9))
        tokens = jax.device_put(values.astype(np.int32), jax.P(None, "fsdp"))

        return _language_model(
            "gemma_flax",
            f"flax {_flax_version()} examples/gemma (flax nnx)",
            loss_fn,
            params,
            optax.adamw(1e-3, b1=0.9, b2=0.98, eps=1e-9, weight_decay=0.1),  # train.py's
            tokens,
            pp.Std1F1B(num_stages),
            num_stages,
            None,
            dropout=True,
            mpmd_mesh=mpmd_mesh,
        )


def _flax_version() -> str:
    import flax

    return flax.__version__


MODELS: dict[str, Callable[[], Workload]] = {
    "gpt2_hf": gpt2_hf,
    "llama_penzai": llama_penzai,
    "mamba2_nnx": mamba2_nnx,
    "resnet_haiku": resnet_haiku,
    "gemma_flax": gemma_flax,
}
#: The models cut by markers only (no module paths to cut at).
MARKERS_ONLY = frozenset({"gemma_flax"})


# -- training side by side --------------------------------------------------------------


@dataclasses.dataclass
class SideBySide:
    """A workload trained pipelined and under ``jax.jit`` from the same state.

    ``steps[i]`` and ``reference_steps[i]`` are step ``i``'s outputs (``(*state, loss)``)
    of the pipelined step and of ``jax.jit``'s, both from ``jax.jit``'s state before step
    ``i``: what one step adds, apart from how training amplifies earlier differences.
    """

    program: pp.PartitionedProgram
    compiled: pp.CompiledProgram
    losses: list[jax.Array]
    reference_losses: list[jax.Array]
    state: tuple
    reference_state: tuple
    steps: list[tuple] = dataclasses.field(default_factory=list)
    reference_steps: list[tuple] = dataclasses.field(default_factory=list)


def partition(workload: Workload) -> pp.PartitionedProgram:
    with workload.mesh_context():
        lowered = jax.jit(workload.step).lower(*workload.state, *workload.inputs(0))
    return pp.partition(
        lowered,
        mesh=workload.mesh(),
        schedule=workload.schedule,
        split_points=workload.split_points,
    )


def train_side_by_side(workload: Workload, steps: int) -> SideBySide:
    with workload.mesh_context():
        return _train_side_by_side(workload, steps)


def _train_side_by_side(workload: Workload, steps: int) -> SideBySide:
    program = partition(workload)
    pipelined, reference = program.compile(), jax.jit(workload.step)
    state, reference_state = workload.state, workload.state
    result = SideBySide(program, pipelined, [], [], (), ())
    for i in range(steps):
        inputs = workload.inputs(i)
        *state, loss = pipelined(*state, *inputs)
        result.steps.append(tuple(pipelined(*reference_state, *inputs)))
        result.reference_steps.append(tuple(reference(*reference_state, *inputs)))
        *reference_state, reference_loss = result.reference_steps[-1]
        result.losses.append(loss)
        result.reference_losses.append(reference_loss)
    result.state, result.reference_state = tuple(state), tuple(reference_state)
    return result


def ulps_apart(actual: Any, expected: Any) -> float:
    """The largest difference of two trees' float leaves, in ulps of each leaf's largest
    magnitude (as ``tests/py/support/numerics.py`` measures it)."""
    worst = 0.0
    for a, e in zip(jax.tree.leaves(actual), jax.tree.leaves(expected), strict=True):
        a, e = np.asarray(a), np.asarray(e)
        if not np.issubdtype(e.dtype, np.floating):
            worst = max(worst, 0.0 if np.array_equal(a, e) else float("inf"))
            continue
        scale = float(np.max(np.abs(e.astype(np.float64)), initial=0.0))
        ulp = float(np.finfo(e.dtype).eps) * 2.0 ** np.floor(
            np.log2(max(scale, float(np.finfo(e.dtype).tiny)))
        )
        difference = float(np.max(np.abs(a.astype(np.float64) - e), initial=0.0))
        worst = max(worst, difference / ulp)
    return worst


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=sorted(MODELS), action="append")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--max-ulps", type=float, default=64, help="the tolerance (SEVERAL_STEPS)")
    parser.add_argument("--cut", choices=CUTS, default="markers", help="how stages are cut")
    parser.add_argument(
        "--stages", type=int, default=2, help="stages (with --cut other than markers)"
    )
    parser.add_argument("--layers", type=int, default=0, help="blocks (default: one per stage)")
    args = parser.parse_args(argv)
    failed = False
    for name in args.model or [m for m in MODELS if args.cut == "markers" or m not in MARKERS_ONLY]:
        if args.cut == "markers":
            workload = MODELS[name]()
        else:
            workload = MODELS[name](args.stages, cut=args.cut, num_layers=args.layers)
        result = train_side_by_side(workload, args.steps)
        loss_ulps = ulps_apart(result.losses, result.reference_losses)
        state_ulps = ulps_apart(result.state, result.reference_state)
        step_ulps = ulps_apart(result.steps, result.reference_steps)
        ok = loss_ulps <= args.max_ulps
        failed |= not ok
        losses = ", ".join(f"{float(x):.6f}" for x in result.losses)
        starts = ", ".join(result.program.segment_starts) or "-"
        print(
            f"{name} [{workload.library}], cut by {args.cut}, {workload.num_stages} stages "
            f"(segments start at {starts}; split {result.program.stage_split}): losses {losses}; "
            f"against jax.jit: losses {loss_ulps:.1f} ulps, state after {args.steps} steps "
            f"{state_ulps:.1f} ulps, one step from jax.jit's state {step_ulps:.1f} ulps "
            f"{'ok' if ok else 'TOO FAR'}"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
