"""Scanned layer stacks (jax.lax.scan, flax nn.scan, nnx.scan) pipelined along the scan.

Each model is an embedding, ``LAYERS`` tanh layers applied by a scan over stacked
parameters, and a head; trained with AdamW after ``clip_by_global_norm`` over ``treduce``'s
summed gradients. With a stage marker ending the scanned function and with no marker at
all, under Std1F1B(4) and Interleaved1F1B(8, 4) on 4 ranks, three steps feeding the
outputs back give jax.jit's numbers within the ulp rule; every stage program keeps a loop
over its own layers (never unrolled).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import toolkit
from jax.extend.mlir import ir
from jaxpp_mlir.ir_context import make_context

import jaxpp_mlir as pp

flax = pytest.importorskip("flax")
from flax import linen as nn  # noqa: E402
from flax import nnx  # noqa: E402

pytestmark = pytest.mark.numerics

LAYERS = 8
WIDTH = 8
MICROBATCHES = 8
STEPS = 3
OPTIMIZER = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-2, weight_decay=1e-2))
SCHEDULES = {"Std1F1B(4)": pp.Std1F1B(4), "Interleaved1F1B(8, 4)": pp.Interleaved1F1B(8, 4)}

shared_stage_compiles = toolkit.stage_compiles_shared_by_file()


def _mark(x, marked: bool):
    return pp.pipeline_enter_stage(x) if marked else x


# -- the three ways to write the model ----------------------------------------------------


def _lax_apply(params, x, *, marked: bool):
    def layer(h, p):
        return _mark(jnp.tanh(h @ p["w"] + p["b"]), marked), None

    h = x @ params["embed"]
    h, _ = jax.lax.scan(layer, h, params["layers"])
    return h @ params["head"]


def _lax_params():
    rng = np.random.default_rng(0)
    scale = np.float32(1 / np.sqrt(WIDTH))

    def draw(*shape):
        return rng.standard_normal(shape, dtype=np.float32) * scale

    return {
        "embed": draw(WIDTH, WIDTH),
        "layers": {"w": draw(LAYERS, WIDTH, WIDTH), "b": draw(LAYERS, WIDTH) / 10},
        "head": draw(WIDTH, WIDTH),
    }


class _LinenBlock(nn.Module):
    marked: bool

    @nn.compact
    def __call__(self, h, _):
        return _mark(jnp.tanh(nn.Dense(WIDTH)(h)), self.marked), None


class _LinenModel(nn.Module):
    marked: bool

    @nn.compact
    def __call__(self, x):
        h = nn.Dense(WIDTH, name="embed")(x)
        layers = nn.scan(
            _LinenBlock,
            variable_axes={"params": 0},
            split_rngs={"params": True},
            length=LAYERS,
        )(self.marked, name="layers")
        h, _ = layers(h, None)
        return nn.Dense(WIDTH, name="head")(h)


class _NnxBlock(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.linear = nnx.Linear(WIDTH, WIDTH, rngs=rngs)

    def __call__(self, h, marked: bool):
        return _mark(jnp.tanh(self.linear(h)), marked)


class _NnxModel(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.embed = nnx.Linear(WIDTH, WIDTH, rngs=rngs)

        @nnx.split_rngs(splits=LAYERS)
        @nnx.vmap(in_axes=(0,), out_axes=0)
        def make_layers(rngs):
            return _NnxBlock(rngs)

        self.layers = make_layers(rngs)
        self.head = nnx.Linear(WIDTH, WIDTH, rngs=rngs)

    def __call__(self, x, marked: bool):
        h = self.embed(x)

        @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
        def run(h, layer):
            return layer(h, marked)

        return self.head(run(h, self.layers))


@functools.cache
def _model(kind: str, marked: bool):
    """(apply(params, x), the initial parameters as numpy arrays)."""
    if kind == "lax":
        return functools.partial(_lax_apply, marked=marked), _lax_params()
    x = np.zeros((2, WIDTH), np.float32)
    if kind == "linen":
        model = _LinenModel(marked)
        params = jax.tree_util.tree_map(np.asarray, model.init(jax.random.key(0), x))
        return model.apply, params
    graphdef, state = nnx.split(_NnxModel(nnx.Rngs(0)))
    params = jax.tree_util.tree_map(np.asarray, state)

    def apply(p, x):
        return nnx.merge(graphdef, p)(x, marked)

    return apply, params


def _train_step(apply):
    def loss(params, microbatch):
        x, y = microbatch
        return jnp.mean((apply(params, x) - y) ** 2)

    def step(params, opt_state, xs, ys):
        total, grads = pp.treduce(
            lambda mb: jax.value_and_grad(loss)(params, mb), (xs, ys), operation=pp.Add
        )
        updates, opt_state = OPTIMIZER.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, total

    return step


def _batch():
    shape = (MICROBATCHES, 2, WIDTH)
    return toolkit.normal(shape, seed=1), toolkit.normal(shape, seed=2)


@functools.cache
def _lowered(kind: str, marked: bool):
    apply, params = _model(kind, marked)
    step = _train_step(apply)
    params = jax.tree_util.tree_map(toolkit.on_device, params)
    opt_state = jax.jit(OPTIMIZER.init)(params)
    xs, ys = _batch()
    return step, jax.jit(step).lower(params, opt_state, xs, ys), (params, opt_state, xs, ys)


def _reference(kind: str, marked: bool):
    step, _, (params, opt_state, xs, ys) = _lowered(kind, marked)
    jitted = jax.jit(step)
    history = []
    for _ in range(STEPS):
        params, opt_state, total = jitted(params, opt_state, xs, ys)
        history.append((params, opt_state, total))
    return history


CASES = [
    (kind, marked, schedule)
    for kind in ("lax", "linen", "nnx")
    for marked in (True, False)
    for schedule in SCHEDULES
]


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "marked", "schedule"), CASES)
def test_scanned_model_trains_like_jax_jit(kind, marked, schedule):
    _, lowered, (params, opt_state, xs, ys) = _lowered(kind, marked)
    program = pp.partition(lowered, mesh=toolkit.make_mesh(4), schedule=SCHEDULES[schedule])
    _assert_every_stage_loops_over_its_layers(program)
    compiled = program.compile()
    reference = _reference(kind, marked)
    for step in range(STEPS):
        params, opt_state, total = compiled(params, opt_state, xs, ys)
        tolerance = toolkit.SEPARATE_PROGRAMS if step == 0 else toolkit.SEVERAL_STEPS
        toolkit.assert_matches_reference((params, opt_state, total), reference[step], tolerance)


def _assert_every_stage_loops_over_its_layers(program: pp.PartitionedProgram) -> None:
    """Each stage's forward and backward program holds one loop over as many iterations as
    the stage has layers (the split is done on the loop, not by unrolling it)."""
    layers = program.stage_split
    assert sum(layers) == LAYERS
    for stage in range(program.num_stages):
        texts = program.stage_module_texts(stage)
        assert len(texts) == 2, f"stage {stage}: a forward and a backward program"
        for text in texts:
            trip_counts = _loop_trip_counts(text)
            assert trip_counts == [layers[stage]], (stage, trip_counts)


def _loop_trip_counts(text: str) -> list[int]:
    """The constant each top-level ``stablehlo.while`` of the module's main function
    compares its counter with."""
    counts = []
    with make_context():
        module = ir.Module.parse(text)
        for function in module.body.operations:
            for op in function.operation.regions[0].blocks[0].operations:
                if op.operation.name != "stablehlo.while":
                    continue
                condition = op.operation.regions[0].blocks[0]
                limits = [
                    int(ir.DenseIntElementsAttr(o.attributes["value"]).get_splat_value().value)
                    for o in condition.operations
                    if o.operation.name == "stablehlo.constant"
                ]
                counts.extend(limits)
    return counts
