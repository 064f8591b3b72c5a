"""Scanned layer stacks (jax.lax.scan, flax nn.scan, nnx.scan) pipelined along the scan.

Each model is an embedding, ``LAYERS`` tanh layers applied by a scan over stacked
parameters, and a head; trained with AdamW after ``clip_by_global_norm`` over ``treduce``'s
summed gradients. With a stage marker ending the scanned function and with no marker at
all, under Std1F1B(4) and Interleaved1F1B(8, 4) on 4 ranks, three steps feeding the
outputs back give jax.jit's numbers within the ulp rule; every stage program keeps a loop
over its own layers (never unrolled). Each rank holds only its rows of the stacked
parameters and of their Adam moments, in and out; equal layers get equal stages.
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
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import jaxpp_mlir as pp
from jaxpp_mlir.ir_context import make_context
from jaxpp_mlir.passes.pipelines import segment_pipeline
from jaxpp_mlir.pipeline_run import PipelineRun
from jaxpp_mlir.planner.segment_costs import segment_costs
from jaxpp_mlir.step_input import import_step

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


def _lax_apply(params, x, *, marked: bool, remat: bool = False):
    def layer(h, p):
        return _mark(jnp.tanh(h @ p["w"] + p["b"]), marked), None

    h = x @ params["embed"]
    h, _ = jax.lax.scan(jax.checkpoint(layer) if remat else layer, h, params["layers"])
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
    remat: bool = False

    @nn.compact
    def __call__(self, x):
        h = nn.Dense(WIDTH, name="embed")(x)
        layers = nn.scan(
            nn.remat(_LinenBlock) if self.remat else _LinenBlock,
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

    def __call__(self, x, marked: bool, remat: bool = False):
        h = self.embed(x)

        def apply_layer(h, layer):
            return layer(h, marked)

        @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
        def run(h, layer):
            return (nnx.remat(apply_layer) if remat else apply_layer)(h, layer)

        return self.head(run(h, self.layers))


@functools.cache
def _model(kind: str, marked: bool, remat: bool = False):
    """(apply(params, x), the initial parameters as numpy arrays)."""
    if kind == "lax":
        return functools.partial(_lax_apply, marked=marked, remat=remat), _lax_params()
    x = np.zeros((2, WIDTH), np.float32)
    if kind == "linen":
        model = _LinenModel(marked, remat)
        params = jax.tree_util.tree_map(np.asarray, model.init(jax.random.key(0), x))
        return model.apply, params
    graphdef, state = nnx.split(_NnxModel(nnx.Rngs(0)))
    params = jax.tree_util.tree_map(np.asarray, state)

    def apply(p, x):
        return nnx.merge(graphdef, p)(x, marked, remat)

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
def _lowered(kind: str, marked: bool, remat: bool = False):
    apply, params = _model(kind, marked, remat)
    step = _train_step(apply)
    params = jax.tree_util.tree_map(toolkit.on_device, params)
    opt_state = jax.jit(OPTIMIZER.init)(params)
    xs, ys = _batch()
    return step, jax.jit(step).lower(params, opt_state, xs, ys), (params, opt_state, xs, ys)


def _reference(kind: str, marked: bool, remat: bool = False, steps: int = STEPS):
    step, _, (params, opt_state, xs, ys) = _lowered(kind, marked, remat)
    jitted = jax.jit(step)
    history = []
    for _ in range(steps):
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
        tolerance = toolkit.SEPARATE_PROGRAMS if step == 0 else toolkit.ADAPTIVE_OPTIMIZER_STEPS
        toolkit.assert_matches_reference((params, opt_state, total), reference[step], tolerance)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["lax", "linen", "nnx"])
@pytest.mark.parametrize("marked", [True, False], ids=["marked", "unmarked"])
def test_rematerialized_scanned_layers_train_like_jax_jit(kind, marked):
    """jax.checkpoint / nn.remat / nnx.remat on the scanned function: the gradient's loop
    recomputes each layer, and each stage's gradient loop does so for its own layers."""
    _, lowered, (params, opt_state, xs, ys) = _lowered(kind, marked, True)
    program = pp.partition(lowered, mesh=toolkit.make_mesh(4), schedule=pp.Std1F1B(4))
    _assert_every_stage_loops_over_its_layers(program)
    result = program.compile()(params, opt_state, xs, ys)
    reference = _reference(kind, marked, True, steps=1)[0]
    toolkit.assert_matches_reference(result, reference, toolkit.SEPARATE_PROGRAMS)


@functools.cache
def _sgd_lowered(kind: str, marked: bool):
    apply, params = _model(kind, marked)

    def loss(params, microbatch):
        x, y = microbatch
        return jnp.mean((apply(params, x) - y) ** 2)

    def step(params, xs, ys):
        total, grads = pp.treduce(
            lambda mb: jax.value_and_grad(loss)(params, mb), (xs, ys), operation=pp.Add
        )
        return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), total

    args = (jax.tree_util.tree_map(toolkit.on_device, params), *_batch())
    return step, jax.jit(step).lower(*args), args


@pytest.mark.slow
@pytest.mark.parametrize(
    ("split", "schedule"),
    [((1, 3, 3, 1), pp.Std1F1B(4)), ((3, 2, 2, 1), pp.GPipe(4))],
    ids=["1,3,3,1", "3,2,2,1"],
)
def test_stage_split_counts_the_layers_of_the_scan(split, schedule):
    step, lowered, args = _sgd_lowered("lax", False)
    program = pp.partition(lowered, mesh=toolkit.make_mesh(4), schedule=schedule, stage_split=split)
    assert program.stage_split == split
    _assert_every_stage_loops_over_its_layers(program)
    result = program.compile()(*args)
    toolkit.assert_matches_reference(result, jax.jit(step)(*args), toolkit.SEPARATE_PROGRAMS)


LAYOUTS = {
    "even": (pp.Std1F1B(4), None),
    "uneven": (pp.Std1F1B(4), (1, 3, 3, 1)),
    "interleaved": (pp.Interleaved1F1B(8, 4), None),
}


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:stage 1 costs about:jaxpp_mlir.PartitionWarning")
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("kind", ["lax", "linen", "nnx"])
def test_each_rank_holds_only_its_rows_of_the_stacked_parameters_and_adam_moments(kind, layout):
    """Every stacked leaf (the scan's ``[L, ...]`` parameters, their AdamW ``mu`` and
    ``nu``) comes in as one piece per stage, each on its stage's rank (no rank is given the
    whole array, no stage program reads or writes a whole stacked kernel), and comes out
    with each rank holding its stages' rows only: one ``jax.Array`` sharded along axis 0
    over the mpmd axis where one stage per rank splits the rows evenly, a ``StackedArray``
    of per-rank chunks otherwise."""
    _, lowered, (params, opt_state, xs, ys) = _lowered(kind, False)
    schedule, split = LAYOUTS[layout]
    mesh = toolkit.make_mesh(4)
    program = pp.partition(lowered, mesh=mesh, schedule=schedule, stage_split=split)
    starts = np.cumsum((0, *program.stage_split))
    owners = [
        (range(starts[s], starts[s + 1]), schedule.stage_rank(s)) for s in range(len(starts) - 1)
    ]

    stacked_inputs = [b for b in program.plan.inputs if "layers" in b.name]
    assert len(stacked_inputs) == 6, [b.name for b in stacked_inputs]  # kernel, bias x 3
    for binding in stacked_inputs:
        assert binding.ranks == (), f"{binding.name} is given whole to ranks {binding.ranks}"
        pieces = [(range(p.start, p.stop), p.rank) for p in binding.pieces]
        assert pieces == owners, binding.name
    whole_kernel = (LAYERS, WIDTH, WIDTH)
    for executable in program.plan.executables.values():
        specs = (*executable.input_specs, *executable.output_specs)
        assert whole_kernel not in [spec.shape for spec in specs], executable.name

    new_params, new_state, _ = program.compile()(params, opt_state, xs, ys)
    expected_params, expected_state, _ = _reference(kind, False, steps=1)[0]
    actual = jax.tree_util.tree_leaves_with_path((new_params, new_state))
    expected = jax.tree_util.tree_leaves((expected_params, expected_state))
    stacked = [
        (jax.tree_util.keystr(path), leaf, want)
        for (path, leaf), want in zip(actual, expected, strict=True)
        if "layers" in jax.tree_util.keystr(path)
    ]
    assert len(stacked) == 6, [name for name, _, _ in stacked]
    even = len(set(program.stage_split)) == 1 and program.num_stages == mesh.mpmd_dim
    devices = jax.devices()[:4]
    for name, leaf, want in stacked:
        if even:
            assert isinstance(leaf, jax.Array) and not isinstance(leaf, pp.StackedArray), name
            assert leaf.sharding.spec[0] == "stage", (name, leaf.sharding)
            chunks = [
                (range(*shard.index[0].indices(LAYERS)), devices.index(shard.device), shard.data)
                for shard in sorted(leaf.addressable_shards, key=lambda s: s.index[0].start)
            ]
        else:
            assert isinstance(leaf, pp.StackedArray), (name, type(leaf))
            chunks = [(chunk.rows, chunk.rank, chunk.array) for chunk in leaf.chunks]
            for rows, rank, array in chunks:
                assert list(array.devices()) == [devices[rank]], (name, rows, array.devices())
        assert [(rows, rank) for rows, rank, _ in chunks] == owners, name
        for rows, _, array in chunks:
            assert array.shape == (len(rows), *want.shape[1:]), (name, rows, array.shape)
            toolkit.assert_matches_reference(
                np.asarray(array),
                np.asarray(want)[rows.start : rows.stop],
                toolkit.SEPARATE_PROGRAMS,
            )


@pytest.mark.parametrize("kind", ["lax", "linen", "nnx"])
@pytest.mark.parametrize("marked", [True, False], ids=["marked", "unmarked"])
def test_equal_scanned_layers_get_two_per_stage_without_an_imbalance_warning(kind, marked):
    """Eight equal layers between an embedding and a head no heavier than a layer: two
    layers per stage on Std1F1B(4). (The cost model charged a scanned layer the bytes of
    its loop's carried values instead of its body's, and each row it wrote into a stacked
    value as the whole stack: a layer looked a third of what it is next to the embedding
    and the head, and the planner split (1, 3, 3, 1), 2.2x to 2.4x apart.)"""
    _, lowered, _ = _lowered(kind, marked)
    program, unbalanced = toolkit.partition_with_imbalance_warnings(
        lowered, mesh=toolkit.make_mesh(4), schedule=pp.Std1F1B(4)
    )
    assert program.stage_split == (2, 2, 2, 2)
    assert not unbalanced, unbalanced


def _unrolled_apply(params, x):
    h = x @ params["embed"]
    for layer in range(LAYERS):
        w, b = params["layers"]["w"][layer], params["layers"]["b"][layer]
        h = pp.pipeline_enter_stage(jnp.tanh(h @ w + b))
    return h @ params["head"]


def test_a_scanned_layer_costs_what_the_same_layer_written_out_costs():
    """The forward of a layer of the scan and of the same layer written out with a marker
    after it are estimated alike, in FLOPs and in bytes (the first and last segments also
    hold the embedding and the head)."""
    costs = []
    for apply in (functools.partial(_lax_apply, marked=False), _unrolled_apply):
        step = _train_step(apply)
        params = _lax_params()
        opt_state = jax.jit(OPTIMIZER.init)(params)
        module, _ = import_step(jax.jit(step).lower(params, opt_state, *_batch()))
        PipelineRun(module, None).run(segment_pipeline(sharded=False))
        costs.append(segment_costs(module.operation))
    scanned, unrolled = costs
    assert scanned.num_segments == unrolled.num_segments == LAYERS
    # The scan's own bookkeeping (a row sliced out of each stacked weight, residuals
    # stacked into [L, ...] buffers for the gradient's loop) is traffic the written-out
    # layer has not: 1.21x the written-out layer's bytes on jax 0.12's lowering, 1.42x on
    # 0.10.2's (which lowers the written-out layer with fewer ops). Charging the loop's
    # operands per iteration instead, the bug this guards against, made it 0.3x.
    upper = {"forward_flops": 1.25, "forward_bytes": 1.5}
    for field in ("forward_flops", "forward_bytes"):
        ours, theirs = getattr(scanned, field)[1:-1], getattr(unrolled, field)[1:-1]
        for layer, written_out in zip(ours, theirs, strict=True):
            assert 0.8 * written_out <= layer <= upper[field] * written_out, (field, ours, theirs)


def test_stage_split_must_count_every_layer():
    _, lowered, _ = _sgd_lowered("lax", False)
    with pytest.raises(pp.PartitionError, match=r"stage split \[1, 3, 3, 2\] covers 9"):
        pp.partition(
            lowered, mesh=toolkit.make_mesh(4), schedule=pp.Std1F1B(4), stage_split=(1, 3, 3, 2)
        )


@pytest.mark.slow
def test_auto_schedule_splits_a_scanned_model():
    step, lowered, args = _sgd_lowered("linen", False)
    program = pp.partition(lowered, mesh=toolkit.make_mesh(4), schedule="auto")
    assert sum(program.stage_split) == LAYERS and program.num_stages >= 4
    _assert_every_stage_loops_over_its_layers(program)
    result = program.compile()(*args)
    toolkit.assert_matches_reference(result, jax.jit(step)(*args), toolkit.SEPARATE_PROGRAMS)


ENCODER, DECODER = 3, 5


def _scan(h, stack, marked: bool):
    def layer(h, p):
        return _mark(jnp.tanh(h @ p["w"] + p["b"]), marked), None

    return jax.lax.scan(layer, h, stack)[0]


def _encoder_decoder_step(marked: bool):
    def loss(params, microbatch):
        x, y = microbatch
        h = _scan(x @ params["embed"], params["encoder"], marked)
        h = _scan(jnp.sin(h) + x, params["decoder"], marked)
        return jnp.mean((h @ params["head"] - y) ** 2)

    def step(params, xs, ys):
        total, grads = pp.treduce(
            lambda mb: jax.value_and_grad(loss)(params, mb), (xs, ys), operation=pp.Add
        )
        return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), total

    return step


@pytest.mark.slow
@pytest.mark.parametrize("marked", [True, False], ids=["marked", "unmarked"])
def test_encoder_and_decoder_scans_are_split_in_program_order(marked):
    params = _lax_params()
    rng = np.random.default_rng(3)
    params["encoder"] = {
        "w": rng.standard_normal((ENCODER, WIDTH, WIDTH), dtype=np.float32) / 3,
        "b": rng.standard_normal((ENCODER, WIDTH), dtype=np.float32) / 10,
    }
    params["decoder"] = {
        "w": rng.standard_normal((DECODER, WIDTH, WIDTH), dtype=np.float32) / 3,
        "b": rng.standard_normal((DECODER, WIDTH), dtype=np.float32) / 10,
    }
    del params["layers"]
    args = (jax.tree_util.tree_map(toolkit.on_device, params), *_batch())
    step = _encoder_decoder_step(marked)
    program = pp.partition(
        jax.jit(step).lower(*args),
        mesh=toolkit.make_mesh(4),
        schedule=pp.Std1F1B(4),
        stage_split=(2, 2, 2, 2),
    )
    # Stage 1 holds the last encoder layer and the first decoder layer: two loops.
    assert [_loop_trip_counts(program.stage_module_texts(1)[0])] == [[1, 1]]
    _assert_every_stage_loops_over_its_layers(program)
    result = program.compile()(*args)
    toolkit.assert_matches_reference(result, jax.jit(step)(*args), toolkit.SEPARATE_PROGRAMS)


@pytest.mark.slow
def test_marked_loop_over_one_shared_weight_is_split_by_iteration():
    """A fori_loop with constant bounds reading one (unstacked) weight, a marker ending its
    body: each iteration is a stage; the body's use of the counter sees the original
    iteration number in every stage."""

    def loss(params, microbatch):
        x, y = microbatch

        def body(i, h):
            return pp.pipeline_enter_stage(jnp.tanh(h @ params["w"] + i))

        h = jax.lax.fori_loop(0, 4, body, x @ params["embed"])
        return jnp.mean((h - y) ** 2)

    def step(params, xs, ys):
        total, grads = pp.treduce(
            lambda mb: jax.value_and_grad(loss)(params, mb), (xs, ys), operation=pp.Add
        )
        return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), total

    weights = _lax_params()
    params = {"embed": weights["embed"], "w": weights["head"]}
    args = (jax.tree_util.tree_map(toolkit.on_device, params), *_batch())
    program = pp.partition(
        jax.jit(step).lower(*args), mesh=toolkit.make_mesh(4), schedule=pp.Std1F1B(4)
    )
    assert program.stage_split == (1, 1, 1, 1)
    for stage in range(4):
        assert [_loop_trip_counts(t) for t in program.stage_module_texts(stage)] == [[1], [1]]
    result = program.compile()(*args)
    toolkit.assert_matches_reference(result, jax.jit(step)(*args), toolkit.SEPARATE_PROGRAMS)


def test_marker_in_a_loop_that_is_not_a_layer_scan_is_refused():
    def loss(w, x):
        def body(carry):
            i, h, n = carry
            return i + 1, pp.pipeline_enter_stage(jnp.tanh(h @ w)), n

        return jax.lax.while_loop(lambda c: c[0] < c[2], body, (0, x, x.shape[0]))[1].sum()

    def step(w, xs):
        return pp.treduce(lambda mb: loss(w, mb), xs, operation=pp.Add)

    w = toolkit.on_device(np.eye(WIDTH, dtype=np.float32))
    xs = toolkit.normal((MICROBATCHES, 2, WIDTH), seed=0)
    with pytest.raises(
        pp.PartitionError,
        match="stage marker inside a 'stablehlo.while' that is not a layer scan: its trip "
        "count is not a constant",
    ):
        pp.partition(jax.jit(step).lower(w, xs), mesh=toolkit.make_mesh(2))


def test_remat_around_the_whole_scan_is_refused_with_the_remedy():
    _, params = _model("lax", False)

    def loss(params, microbatch):
        x, y = microbatch
        apply = jax.checkpoint(functools.partial(_lax_apply, marked=False))
        return jnp.mean((apply(params, x) - y) ** 2)

    def step(params, xs, ys):
        return pp.treduce(
            lambda mb: jax.value_and_grad(loss)(params, mb), (xs, ys), operation=pp.Add
        )

    lowered = jax.jit(step).lower(params, *_batch())
    with pytest.raises(
        pp.PartitionError,
        match=r"this layer scan is recomputed in the backward pass \(jax.checkpoint or remat "
        r"around the whole scan\).*put jax.checkpoint \(nn.remat, nnx.remat\) on the scanned",
    ):
        pp.partition(lowered, mesh=toolkit.make_mesh(4), schedule=pp.Std1F1B(4))


def test_step_without_markers_or_layer_scan_says_what_was_looked_for():
    def step(w, xs):
        return pp.treduce(lambda mb: jnp.tanh(mb @ w).sum(), xs, operation=pp.Add)

    w = toolkit.on_device(np.eye(WIDTH, dtype=np.float32))
    xs = toolkit.normal((MICROBATCHES, 2, WIDTH), seed=0)
    with pytest.raises(pp.PartitionError, match="no stage markers found.*a layer scan without"):
        pp.partition(jax.jit(step).lower(w, xs), mesh=toolkit.make_mesh(2))


def _assert_every_stage_loops_over_its_layers(
    program: pp.PartitionedProgram, layers: int = LAYERS
) -> None:
    """Each stage's forward and backward programs loop over exactly the stage's layers (one
    loop per layer scan it holds a part of): the split is done on the loops, not by
    unrolling them."""
    assert sum(program.stage_split) == layers
    for stage, layers in enumerate(program.stage_split):
        texts = program.stage_module_texts(stage)
        assert len(texts) == 2, f"stage {stage}: a forward and a backward program"
        for text in texts:
            trip_counts = _loop_trip_counts(text)
            assert trip_counts and sum(trip_counts) == layers, (stage, trip_counts)


def _loop_trip_counts(text: str) -> list[int]:
    """The constant each top-level ``stablehlo.while`` of the module's functions compares
    its counter with."""
    counts = []
    with make_context():
        module = ir.Module.parse(text)
        for function in module.body.operations:
            if function.operation.name != "func.func":  # an sdy.mesh
                continue
            for op in function.operation.regions[0].blocks[0].operations:
                if op.operation.name != "stablehlo.while":
                    continue
                condition = op.operation.regions[0].blocks[0]
                counts.extend(
                    int(ir.DenseIntElementsAttr(o.attributes["value"]).get_splat_value().value)
                    for o in condition.operations
                    if o.operation.name == "stablehlo.constant"
                )
    return counts


# -- tensor parallelism inside the stages ---------------------------------------------------

TP_LAYERS, TP_HIDDEN = 4, 16


def _tensor_parallel_apply(params, x, *, mesh: jax.sharding.Mesh):
    """Megatron-style layers: ``w1`` split by columns and ``w2`` by rows over ``model``;
    the activation carried split over ``model`` too, and read after the loop by an op
    computing it unchanged (``h - 0``, as the mean of an RMS norm lowers)."""
    split = NamedSharding(mesh, P(None, "model"))

    def layer(h, p):
        return jax.lax.with_sharding_constraint(h + jnp.tanh(h @ p["w1"]) @ p["w2"], split), None

    h, _ = jax.lax.scan(layer, x @ params["embed"], params["layers"])
    return (h - jnp.zeros_like(h)) @ params["head"]


@functools.cache
def _tensor_parallel_lowered(data: bool):
    """On (stage=2, model=2), or (stage=2, data=2, model=2) with the batch split over
    ``data``."""
    mesh = toolkit.mpmd_mesh(
        {"stage": 2, "data": 2, "model": 2} if data else {"stage": 2, "model": 2}
    )
    rng = np.random.default_rng(4)
    shapes = {"w1": (TP_LAYERS, WIDTH, TP_HIDDEN), "w2": (TP_LAYERS, TP_HIDDEN, WIDTH)}
    params = {
        "embed": rng.standard_normal((WIDTH, WIDTH), dtype=np.float32) / 3,
        "layers": {k: rng.standard_normal(s, dtype=np.float32) / 4 for k, s in shapes.items()},
        "head": rng.standard_normal((WIDTH, WIDTH), dtype=np.float32) / 3,
    }
    specs = {
        "embed": P(),
        "layers": {"w1": P(None, None, "model"), "w2": P(None, "model", None)},
        "head": P(),
    }
    lowering = mesh.lowering_mesh()
    params = jax.device_put(
        params,
        jax.tree_util.tree_map(
            lambda spec: NamedSharding(lowering, spec), specs, is_leaf=lambda x: isinstance(x, P)
        ),
    )
    step = _train_step(functools.partial(_tensor_parallel_apply, mesh=lowering))
    opt_state = jax.jit(OPTIMIZER.init)(params)
    batch = NamedSharding(lowering, P(None, "data") if data else P())
    xs, ys = (jax.device_put(b, batch) for b in _batch())
    args = (params, opt_state, xs, ys)
    return mesh, step, jax.jit(step).lower(*args), args


def _assert_trains_like_jax_jit(program: pp.PartitionedProgram, step, args) -> None:
    """``STEPS`` steps of ``program`` and of plain ``jax.jit(step)`` from ``args`` (the
    parameters and optimizer state fed back, the batch the same), compared after each:
    within ``SEPARATE_PROGRAMS`` after the first, ``ADAPTIVE_OPTIMIZER_STEPS`` after."""
    compiled = program.compile()
    ours, theirs = args, args
    jitted = jax.jit(step)
    for n in range(STEPS):
        *ours, loss = compiled(*ours)
        *theirs, expected = jitted(*theirs)
        tolerance = toolkit.SEPARATE_PROGRAMS if n == 0 else toolkit.ADAPTIVE_OPTIMIZER_STEPS
        toolkit.assert_matches_reference((*ours, loss), (*theirs, expected), tolerance)
        ours, theirs = (*ours, *args[2:]), (*theirs, *args[2:])


@pytest.mark.slow
@pytest.mark.filterwarnings("error::jaxpp_mlir.PartitionWarning")
@pytest.mark.parametrize("data", [False, True], ids=["model", "data-model"])
def test_tensor_parallel_stages_of_a_scanned_model_train_like_jax_jit(data):
    """A scan over layers whose weights are split over a ``model`` axis, two stages of two
    devices (four with a ``data`` axis splitting the batch), no markers. Each stage's loop
    reads its rows of the stacked weights as iteration arguments returned unchanged, with
    the loop's sharding listing one entry per argument: XLA's import folded those
    arguments away but kept the entries (``RET_CHECK leaf_count ==
    tuple_elements_.size()``); and it folded ``h - 0`` after the loop into the loop's
    result, putting that op's sharding on the loop as one sharding for all its results
    (``Number of tile assignment dimensions ...``). See passes/xla_import.py. The global
    norm of the clipping sums each stage's rows on its rank, as unsharded (its constants
    are Shardy's ``sdy.constant``): no warning of a stacked value read whole."""
    mesh, step, lowered, args = _tensor_parallel_lowered(data)
    program = pp.partition(lowered, mesh=mesh, schedule=pp.Std1F1B(2))
    _assert_every_stage_loops_over_its_layers(program, TP_LAYERS)
    for stage in range(2):
        for text in program.stage_module_texts(stage):
            assert '{"model"}' in text, f"stage {stage} is not split over 'model'"
    _assert_trains_like_jax_jit(program, step, args)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:stage .* costs about:jaxpp_mlir.PartitionWarning")
@pytest.mark.parametrize(
    "layout",
    [
        {"schedule": pp.Interleaved1F1B(4, 2)},
        {"schedule": pp.Std1F1B(2), "stage_split": (1, 3)},
    ],
    ids=["interleaved", "uneven"],
)
def test_tensor_parallel_scanned_stages_interleaved_or_uneven_train_like_jax_jit(layout):
    """The tensor-parallel scan as four stages on two ranks (two loops per rank, each over
    its layer), or as two stages of one and three layers: each stage loops over its rows
    of the split weights, and the steps match plain jax.jit's."""
    mesh, step, lowered, args = _tensor_parallel_lowered(False)
    program = pp.partition(lowered, mesh=mesh, **layout)
    _assert_every_stage_loops_over_its_layers(program, TP_LAYERS)
    for stage in range(len(program.stage_split)):
        for text in program.stage_module_texts(stage):
            assert '{"model"}' in text, f"stage {stage} is not split over 'model'"
    _assert_trains_like_jax_jit(program, step, args)


class _LinenTensorParallelBlock(nn.Module):
    """A Megatron-style layer in flax linen: the first Dense's kernel split by columns
    and the second's by rows over ``model`` (``nn.with_partitioning``), the activation
    carried split over ``model``."""

    mesh: jax.sharding.Mesh

    @nn.compact
    def __call__(self, h, _):
        inner = nn.Dense(
            TP_HIDDEN,
            use_bias=False,
            kernel_init=nn.with_partitioning(nn.initializers.normal(0.25), (None, "model")),
        )(h)
        out = nn.Dense(
            WIDTH,
            use_bias=False,
            kernel_init=nn.with_partitioning(nn.initializers.normal(0.25), ("model", None)),
        )(jnp.tanh(inner))
        split = NamedSharding(self.mesh, P(None, "model"))
        return jax.lax.with_sharding_constraint(h + out, split), None


class _LinenTensorParallelModel(nn.Module):
    mesh: jax.sharding.Mesh

    @nn.compact
    def __call__(self, x):
        h = nn.Dense(WIDTH, use_bias=False, name="embed")(x)
        layers = nn.scan(
            _LinenTensorParallelBlock,
            variable_axes={"params": 0},
            split_rngs={"params": True},
            length=TP_LAYERS,
            metadata_params={nn.PARTITION_NAME: None},
        )(self.mesh, name="layers")
        h, _ = layers(h, None)
        return nn.Dense(WIDTH, use_bias=False, name="head")(h - jnp.zeros_like(h))


@pytest.mark.slow
@pytest.mark.filterwarnings("error::jaxpp_mlir.PartitionWarning")
def test_tensor_parallel_stages_of_a_linen_scanned_model_train_like_jax_jit():
    """The same layers written with flax linen's ``nn.scan`` and ``nn.with_partitioning``
    (the kernels' specs come from the model's own partitioning metadata, with the scan's
    axis unsplit), two stages of two devices split over ``model``, no markers."""
    mesh = toolkit.mpmd_mesh({"stage": 2, "model": 2})
    lowering = mesh.lowering_mesh()
    model = _LinenTensorParallelModel(lowering)
    boxed = model.init(jax.random.key(0), np.zeros((2, WIDTH), np.float32))
    specs = nn.get_partition_spec(boxed)
    params = jax.device_put(
        nn.unbox(boxed),
        jax.tree_util.tree_map(
            lambda spec: NamedSharding(lowering, spec), specs, is_leaf=lambda s: isinstance(s, P)
        ),
    )

    step = _train_step(model.apply)
    opt_state = jax.jit(OPTIMIZER.init)(params)
    xs, ys = _batch()
    args = (params, opt_state, xs, ys)
    program = pp.partition(jax.jit(step).lower(*args), mesh=mesh, schedule=pp.Std1F1B(2))
    _assert_every_stage_loops_over_its_layers(program, TP_LAYERS)
    for stage in range(2):
        for text in program.stage_module_texts(stage):
            assert '{"model"}' in text, f"stage {stage} is not split over 'model'"
    _assert_trains_like_jax_jit(program, step, args)


def test_first_call_cuts_stacked_device_arrays_into_rows_without_compiling():
    """Stacked parameters made on one CPU device (not laid out by stage) are cut into each
    rank's rows from their host copy: the call compiles no slice program (it compiled one
    ``jit(dynamic_slice)`` per shape, 0.1 to 0.3 s each: benchmarks/stacked_inputs.py)."""
    step, lowered, (params, xs, ys) = _sgd_lowered("lax", False)
    compiled = pp.partition(lowered, mesh=toolkit.make_mesh(4), schedule=pp.Std1F1B(4)).compile()
    fresh = jax.tree_util.tree_map(lambda x: toolkit.on_device(np.asarray(x)), params)
    jax.clear_caches()  # a slice program compiled earlier in this process would be reused
    compiles = []

    def count(event: str, duration: float, **_) -> None:
        if event == "/jax/core/compile/backend_compile_duration":
            compiles.append(duration)

    jax.monitoring.register_event_duration_secs_listener(count)
    try:
        result = compiled(fresh, xs, ys)
    finally:
        jax.monitoring.unregister_event_duration_listener(count)
    assert compiles == []
    toolkit.assert_matches_reference(
        result, jax.jit(step)(params, xs, ys), toolkit.SEPARATE_PROGRAMS
    )
