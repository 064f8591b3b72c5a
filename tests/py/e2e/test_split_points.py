"""Models one cannot edit (issue 36, item 4): stages cut by module paths, no markers.

A flax linen model whose blocks are submodules ``layers_0..layers_5`` between an
embedding and a head, pipelined with ``split_points=`` (the modules where stages start)
and with no option at all (the repeated blocks, balanced into stages by the planner),
with and without ``nn.remat`` on the blocks: the numbers of plain ``jax.jit``, and the
transfers a hand-marked model of the same stages has.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import pytest
import toolkit
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from jaxpp_mlir.runtime.instructions import receive, registry

import jaxpp_mlir as pp

pytestmark = pytest.mark.numerics

WIDTH = 16
LAYERS = 6
MICROBATCHES = 6


class Block(nn.Module):
    @nn.compact
    def __call__(self, x):
        return x + jnp.tanh(nn.Dense(WIDTH)(nn.LayerNorm()(x)))


class Model(nn.Module):
    remat: bool = False
    mark_after: tuple[int, ...] = ()  # blocks after which a hand-marked model ends a stage

    @nn.compact
    def __call__(self, x):
        x = nn.Dense(WIDTH, name="embed")(x)
        block = nn.remat(Block) if self.remat else Block
        for i in range(LAYERS):
            x = block(name=f"layers_{i}")(x)
            if i in self.mark_after:
                x = pp.pipeline_enter_stage(x)
        return nn.Dense(3, name="head")(x)


def _step(model: Model):
    def loss(params, microbatch):
        x, y = microbatch
        return jnp.mean((model.apply(params, x) - y) ** 2)

    def step(params, xs, ys):
        value, grads = pp.treduce(
            lambda mb: jax.value_and_grad(loss)(params, mb), (xs, ys), operation=(pp.Add, pp.Add)
        )
        return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads), value

    return step


@pytest.fixture(scope="module")
def inputs():
    xs = toolkit.normal((MICROBATCHES, 2, 5), seed=1)
    ys = toolkit.normal((MICROBATCHES, 2, 3), seed=2)
    params = jax.jit(Model().init)(jax.random.key(0), xs[0])
    return params, xs, ys


@pytest.fixture(scope="module", params=[False, True], ids=["plain", "remat"])
def lowered(request, inputs):
    step = _step(Model(remat=request.param))
    return jax.jit(step).lower(*inputs), jax.jit(step)(*inputs)


def _check_one_step(program: pp.PartitionedProgram, inputs, expected) -> None:
    toolkit.assert_matches_reference(
        program.compile()(*inputs), expected, toolkit.SEPARATE_PROGRAMS
    )


def _transfers(program: pp.PartitionedProgram) -> int:
    return registry.count(program.plan.instructions)[receive.KIND]


def test_split_points_start_the_stages_they_name(lowered, inputs):
    step, expected = lowered
    program = pp.partition(
        step,
        mesh=toolkit.make_mesh(3),
        schedule=pp.Std1F1B(3),
        split_points=("layers_2", "layers_4"),
    )
    assert program.segment_starts == ("Model/layers_2", "Model/layers_4")
    assert program.stage_split == (1, 1, 1)
    assert "stage 1 from Model/layers_2" in program.summary()
    _check_one_step(program, inputs, expected)


def test_split_points_move_what_markers_at_the_same_places_move(inputs):
    """The forward of a block and its backward land in the same stage: the cut program
    sends what the hand-marked one does (each boundary's activation and its gradient),
    no residual and no gradient of a block's weights."""
    marked = jax.jit(_step(Model(mark_after=(1, 3, 5)))).lower(*inputs)
    cut = jax.jit(_step(Model())).lower(*inputs)
    mesh, schedule = toolkit.make_mesh(3), pp.Std1F1B(3)
    by_markers = pp.partition(marked, mesh=mesh, schedule=schedule)
    by_points = pp.partition(
        cut, mesh=mesh, schedule=schedule, split_points=("layers_2", "layers_4")
    )
    assert _transfers(by_points) == _transfers(by_markers) == 2 * 2 * MICROBATCHES


def test_repeated_blocks_are_balanced_into_stages(lowered, inputs):
    step, expected = lowered
    program = pp.partition(step, mesh=toolkit.make_mesh(3), schedule=pp.Std1F1B(3))
    assert program.segment_starts == tuple(f"Model/layers_{i}" for i in range(1, LAYERS))
    assert sum(program.stage_split) == LAYERS and len(program.stage_split) == 3
    assert max(program.stage_split) <= 3, program.stage_split
    _check_one_step(program, inputs, expected)


def test_repeated_blocks_under_an_interleaved_schedule(lowered, inputs):
    step, expected = lowered
    schedule = pp.Interleaved1F1B(num_stages=LAYERS, mpmd_dim=3)
    program = pp.partition(step, mesh=toolkit.make_mesh(3), schedule=schedule)
    assert program.num_stages == LAYERS and program.stage_split == (1,) * LAYERS
    _check_one_step(program, inputs, expected)


@pytest.mark.parametrize(
    ("points", "message"),
    [
        (
            ("layers_9",),
            "split point 'layers_9' names no module of the step: the repeated blocks found "
            "are Model/layers_0, Model/layers_1, Model/layers_2, Model/layers_3, "
            "Model/layers_4, Model/layers_5",
        ),
        (("Dense_0",), "split point 'Dense_0' is ambiguous: it names Model/layers_0/Dense_0, "),
        (("layers_4", "layers_2"), "split point 'Model/layers_2' runs before 'Model/layers_4'"),
    ],
)
def test_a_bad_split_point_is_an_error_at_the_step_that_lists_the_candidates(
    inputs, points, message
):
    lowered = toolkit.lower_cached(_step(Model()), *inputs)
    with pytest.raises(pp.PartitionError) as raised:
        pp.partition(lowered, mesh=toolkit.make_mesh(2), split_points=points)
    assert message in str(raised.value)
    assert __file__.rsplit("/", 1)[-1] in str(raised.value)  # the treduce call's line


def test_a_step_without_markers_or_blocks_says_what_was_looked_for(inputs):
    params, xs, ys = inputs

    def step(w, xs, ys):
        def loss(w, mb):
            return jnp.mean((jnp.tanh(mb[0] @ w) - mb[1]) ** 2)

        return pp.treduce(lambda mb: jax.value_and_grad(loss)(w, mb), (xs, ys), operation=pp.Add)

    lowered = jax.jit(step).lower(toolkit.normal((5, 3), seed=3), xs, ys)
    with pytest.raises(
        pp.PartitionError,
        match="no stage markers found in the function treduce.*repeated blocks without markers",
    ):
        pp.partition(lowered, mesh=toolkit.make_mesh(2), schedule=pp.Std1F1B(2))


def test_more_stages_than_blocks_says_where_the_segments_start(inputs):
    lowered = toolkit.lower_cached(_step(Model()), *inputs)
    with pytest.raises(pp.PartitionError) as raised:
        pp.partition(lowered, mesh=toolkit.make_mesh(8), schedule=pp.Std1F1B(8))
    assert (
        "has 8 stages but the program has 6 (cut by jaxpp-segment-repeated-blocks, starting at "
        "the step, Model/layers_1, Model/layers_2, Model/layers_3, Model/layers_4, "
        "Model/layers_5)"
    ) in str(raised.value)


def test_repeated_blocks_of_a_step_sharded_inside_each_stage(inputs):
    """Shardy's propagation, which runs before the segmenters, keeps the ops' locations."""
    mesh = toolkit.mpmd_mesh({"stage": 2, "data": 2})
    lowering_mesh = mesh.lowering_mesh()
    rows = NamedSharding(lowering_mesh, P(None, "data", None))
    params, xs, ys = inputs
    replicated = jax.tree.map(lambda _: NamedSharding(lowering_mesh, P()), params)
    args = (jax.device_put(params, replicated), jax.device_put(xs, rows), jax.device_put(ys, rows))
    step = jax.jit(_step(Model(remat=True)), in_shardings=(replicated, rows, rows))
    program = pp.partition(step.lower(*args), mesh=mesh, schedule=pp.Std1F1B(2))
    assert program.segment_starts == tuple(f"Model/layers_{i}" for i in range(1, LAYERS))
    assert _transfers(program) == 2 * MICROBATCHES  # the activation and its gradient
    toolkit.assert_matches_reference(
        program.compile()(*args), step(*args), toolkit.SEPARATE_PROGRAMS
    )
