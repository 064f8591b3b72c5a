"""Tests of the frontend stage marker ``pipeline_enter_stage``."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import toolkit
from jax.extend.mlir import ir, passmanager

from jaxpp_mlir.dialect import ops as jaxpp_ops
from jaxpp_mlir.dialect.ops import BACKWARD, FORWARD, MARKER_ATTR, MARKER_OP
from jaxpp_mlir.errors import MarkerError
from jaxpp_mlir.frontend.markers import (
    enter_stage_p,
    mark_stage_end,
    pipeline_enter_stage,
)
from jaxpp_mlir.ir import utils as ir_utils

# Compares numbers with plain jax.jit or between runs: CI runs it under capped ISAs too.
pytestmark = pytest.mark.numerics

MARKER_RE = re.compile(
    re.escape(MARKER_OP) + r" \{" + re.escape(MARKER_ATTR) + r' = "(?P<direction>\w+)"\} '
    r"(?P<operands>[^:]*) :"
)


def markers(text: str) -> list[tuple[int, str]]:
    """(operand count, direction) of every stage marker in the IR text."""
    return [(len(m["operands"].split(",")), m["direction"]) for m in MARKER_RE.finditer(text)]


def directions(text: str) -> list[str]:
    return [d for _, d in markers(text)]


def init_mlp(sizes: tuple[int, ...] = (4, 5, 6, 3)) -> list[tuple[jax.Array, jax.Array]]:
    return [
        (
            toolkit.normal((m, n), seed=i, scale=1 / np.sqrt(m)),
            toolkit.on_device(np.full(n, 0.1, np.float32)),
        )
        for i, (m, n) in enumerate(zip(sizes[:-1], sizes[1:], strict=True))
    ]


def mlp(params, x, *, marked: bool):
    for w, b in params:
        x = jnp.tanh(x @ w + b)
        if marked:
            x = pipeline_enter_stage(x)
    return x


def loss(params, x, *, marked: bool):
    return jnp.mean(mlp(params, x, marked=marked) ** 2)


@pytest.fixture(scope="module")
def data():
    return init_mlp(), toolkit.normal((2, 4), seed=10)


@pytest.mark.parametrize(
    "mark",
    [
        pipeline_enter_stage,
        mark_stage_end,
        lambda tree: mark_stage_end(anchor=tree, name="block"),
    ],
)
def test_both_names_are_the_eager_identity(mark):
    tree = {"a": jnp.arange(3.0), "b": (jnp.ones((2, 2), jnp.int32), jnp.float32(2.0))}
    out = mark(tree)
    assert jax.tree_util.tree_structure(out) == jax.tree_util.tree_structure(tree)
    for got, want in zip(
        jax.tree_util.tree_leaves(out), jax.tree_util.tree_leaves(tree), strict=True
    ):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_stage_name_is_recorded_on_both_markers():
    def loss(x):
        return mark_stage_end(jnp.sin(x), name="embed").sum()

    text = jax.jit(jax.value_and_grad(loss)).lower(jnp.ones(3)).as_text()
    markers = [line for line in text.splitlines() if MARKER_OP in line and MARKER_ATTR in line]
    assert len(markers) == 2
    assert all('jaxpp.stage_name = "embed"' in line for line in markers)
    with pytest.raises(MarkerError, match="name must be a str"):
        mark_stage_end(jnp.ones(2), name=3)


def test_python_scalars_and_empty_tree():
    a, b = pipeline_enter_stage((1.5, 2))
    assert isinstance(a, jax.Array) and isinstance(b, jax.Array)
    assert float(a) == 1.5 and int(b) == 2
    assert pipeline_enter_stage(()) == ()


def test_one_bind_per_call():
    jaxpr = jax.make_jaxpr(lambda x, y: pipeline_enter_stage({"x": x, "y": (y, x)}))(
        jnp.ones(2), jnp.ones(3)
    )
    eqns = [e for e in jaxpr.jaxpr.eqns if e.primitive is enter_stage_p]
    assert len(eqns) == 1
    assert len(eqns[0].invars) == 3
    assert eqns[0].params == {"direction": FORWARD, "name": ""}


def test_multi_leaf_lowers_to_one_barrier():
    x, y = jnp.ones((2, 3)), jnp.ones((3,), jnp.int32)
    text = jax.jit(lambda x, y: pipeline_enter_stage((x, y, x))).lower(x, y).as_text()
    assert markers(text) == [(3, FORWARD)]
    assert ": tensor<2x3xf32>, tensor<3xi32>, tensor<2x3xf32>" in text
    assert "custom_call" not in text


def test_users_own_barrier_is_not_a_marker():
    text = jax.jit(lambda x: pipeline_enter_stage(jax.lax.optimization_barrier(x))).lower(
        jnp.ones(2)
    )
    assert markers(text.as_text()) == [(1, FORWARD)]
    module = text.compiler_ir("stablehlo")
    barriers = [op for op in ir_utils.walk(module.operation) if op.name == MARKER_OP]
    assert len(barriers) == 2
    assert [jaxpp_ops.is_stage_marker(op) for op in barriers].count(True) == 1


def test_jit_runs_and_matches_unmarked(data):
    params, x = data
    marked = jax.jit(lambda p, x: mlp(p, x, marked=True))
    text = marked.lower(params, x).as_text()
    assert directions(text) == [FORWARD] * 3
    # A marker is a fusion barrier: the marked model is another program than the unmarked.
    toolkit.assert_matches_reference(
        marked(params, x),
        jax.jit(lambda p, x: mlp(p, x, marked=False))(params, x),
        toolkit.SEPARATE_PROGRAMS,
    )


def test_value_and_grad_matches_unmarked(data):
    params, x = data
    vg_marked = jax.jit(jax.value_and_grad(lambda p, x: loss(p, x, marked=True)))
    vg_plain = jax.jit(jax.value_and_grad(lambda p, x: loss(p, x, marked=False)))
    (v1, g1), (v2, g2) = vg_marked(params, x), vg_plain(params, x)
    toolkit.assert_matches_reference((v1, g1), (v2, g2), toolkit.SEPARATE_PROGRAMS)


def test_value_and_grad_has_fwd_and_bwd_markers(data):
    params, x = data
    text = (
        jax.jit(jax.value_and_grad(lambda p, x: loss(p, x, marked=True))).lower(params, x).as_text()
    )
    found = directions(text)
    assert found.count(FORWARD) == 3
    assert found.count(BACKWARD) == 3
    assert found.index(BACKWARD) > max(i for i, d in enumerate(found) if d == FORWARD)


def test_first_stage_input_cotangent_is_dropped():
    def f(x):
        x = pipeline_enter_stage(x)
        return jnp.sum(jnp.sin(x))

    x = jnp.ones(3)
    text = jax.jit(jax.grad(f)).lower(x).as_text()
    assert sorted(directions(text)) == [BACKWARD, FORWARD]
    toolkit.assert_matches_reference(jax.jit(jax.grad(f))(x), jnp.cos(x), toolkit.SEPARATE_PROGRAMS)


def test_grad_with_integer_and_unused_leaves():
    def f(x, n, unused):
        x, n, unused = pipeline_enter_stage((x, n, unused))
        return jnp.sum(x * n)

    x, n, unused = jnp.arange(3.0), jnp.int32(2), jnp.ones(2)
    gx, gu = jax.grad(f, argnums=(0, 2))(x, n, unused)
    np.testing.assert_array_equal(gx, jnp.full(3, 2.0))
    np.testing.assert_array_equal(gu, jnp.zeros(2))
    gx, gn = jax.jit(jax.grad(f, argnums=(0, 1), allow_int=True))(x, n, unused)
    np.testing.assert_array_equal(gx, jnp.full(3, 2.0))
    assert gn.dtype == jax.dtypes.float0
    text = jax.jit(jax.grad(f, argnums=(0, 2))).lower(x, n, unused).as_text()
    assert [m for m in markers(text) if m[1] == BACKWARD] == [(1, BACKWARD)]


def test_jvp_marks_only_nonzero_tangents():
    def f(x, y):
        return pipeline_enter_stage((x, y))

    jaxpr = jax.make_jaxpr(lambda x, t: jax.jvp(lambda x: f(x, 2.0), (x,), (t,)))(
        jnp.ones(2), jnp.ones(2)
    )
    eqns = [e for e in jaxpr.jaxpr.eqns if e.primitive is enter_stage_p]
    assert [len(e.invars) for e in eqns] == [2, 1]
    assert all(e.params["direction"] == FORWARD for e in eqns)


def test_grad_of_grad_scalar():
    def f(x):
        y = pipeline_enter_stage(jnp.sin(x))
        return pipeline_enter_stage(y * y)

    x = jnp.float32(0.3)
    ggf = jax.jit(jax.grad(jax.grad(f)))
    expected = jax.jit(jax.grad(jax.grad(lambda x: jnp.sin(x) ** 2)))(x)
    toolkit.assert_matches_reference(ggf(x), expected, toolkit.SEPARATE_PROGRAMS)
    assert FORWARD in directions(ggf.lower(x).as_text())


def test_vmap_matches_unmarked(data):
    params, _ = data
    xs = toolkit.normal((5, 2, 4), seed=11)
    marked = jax.vmap(lambda x: mlp(params, x, marked=True))
    plain = jax.vmap(lambda x: mlp(params, x, marked=False))
    toolkit.assert_matches_reference(
        jax.jit(marked)(xs), jax.jit(plain)(xs), toolkit.SEPARATE_PROGRAMS
    )
    toolkit.assert_matches_reference(marked(xs), plain(xs), toolkit.SEPARATE_PROGRAMS)


def test_vmap_keeps_batch_dims():
    def f(x, y):
        return pipeline_enter_stage((x, y))

    x, y = jnp.arange(6.0).reshape(2, 3), jnp.arange(3.0)
    a, b = jax.vmap(f, in_axes=(1, None), out_axes=(1, None))(x, y)
    np.testing.assert_array_equal(a, x)
    np.testing.assert_array_equal(b, y)
    jaxpr = jax.make_jaxpr(jax.vmap(f, in_axes=(1, None)))(x, y)
    (eqn,) = [e for e in jaxpr.jaxpr.eqns if e.primitive is enter_stage_p]
    assert eqn.invars[0].aval.shape == (2, 3)


def test_nested_jit(data):
    params, x = data
    inner = jax.jit(lambda h: pipeline_enter_stage(jnp.tanh(h)))

    def outer(p, x):
        return jnp.sum(inner(x @ p[0][0]) ** 2)

    text = jax.jit(outer).lower(params, x).as_text()
    assert directions(text) == [FORWARD]
    assert re.search(r"func\.func private @\S+\([^\n]*\{\n[^}]*jaxpp\.marker = \"fwd\"", text)
    plain = jax.jit(lambda p, x: jnp.sum(jax.jit(jnp.tanh)(x @ p[0][0]) ** 2))
    toolkit.assert_matches_reference(
        jax.jit(outer)(params, x), plain(params, x), toolkit.SEPARATE_PROGRAMS
    )
    grad_text = jax.jit(jax.grad(outer)).lower(params, x).as_text()
    assert sorted(directions(grad_text)) == [BACKWARD, FORWARD]


def test_checkpoint(data):
    params, x = data

    def f(p, x):
        return loss(p, x, marked=True)

    g_remat = jax.jit(jax.grad(jax.checkpoint(f)))
    g_plain = jax.jit(jax.grad(lambda p, x: loss(p, x, marked=False)))
    toolkit.assert_matches_reference(
        g_remat(params, x), g_plain(params, x), toolkit.SEPARATE_PROGRAMS
    )
    found = directions(g_remat.lower(params, x).as_text())
    assert found.count(FORWARD) >= 3 and found.count(BACKWARD) == 3


def test_prng_key_leaf():
    keys = jax.random.split(jax.random.key(0), 3)
    f = jax.jit(lambda k: jax.random.normal(pipeline_enter_stage(k)[1], (2,)))
    toolkit.assert_matches_reference(
        f(keys), jax.random.normal(keys[1], (2,)), toolkit.SEPARATE_PROGRAMS
    )


def test_sharded_input_keeps_sharding():
    mesh = jax.make_mesh((8,), ("d",))
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("d"))
    x = jax.device_put(jnp.arange(32.0).reshape(8, 4), sharding)
    f = jax.jit(lambda x: jnp.sin(pipeline_enter_stage((x * 2, 3.0))[0]))
    lowered = f.lower(x).compiler_ir("stablehlo")
    with lowered.context:
        module = ir.Module.parse(str(lowered))  # a copy: jax compiles the lowered module
        passmanager.PassManager.parse("builtin.module(sdy-propagation-pipeline)").run(
            module.operation
        )
    (marker,) = [op for op in ir_utils.walk(module.operation) if jaxpp_ops.is_stage_marker(op)]
    # Shardy propagates through the barrier: the marked value keeps the input's sharding.
    assert 'sdy.sharding_per_value<[<@mesh, [{"d"}, {}]>' in str(marker.attributes["sdy.sharding"])
    out = f(x)
    assert out.sharding.is_equivalent_to(sharding, 2)
    toolkit.assert_matches_reference(
        out, jax.jit(lambda x: jnp.sin(x * 2))(x), toolkit.SEPARATE_PROGRAMS
    )


def test_marker_between_layouts_xla_chooses():
    """Resharding the output of a step lets XLA pick a column-major layout around the
    backward marker; the marker pins one layout, so its aliasing reads the right values."""
    mesh = jax.make_mesh((2,), ("model",))
    in_sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(None, "model"))
    out_sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("model", None))
    w = toolkit.normal((4, 4), seed=12)
    x = toolkit.normal((2, 4), seed=13)

    def step(w, x, *, marked):
        def loss(w):
            h = jnp.tanh(x @ w)
            return jnp.sum((pipeline_enter_stage(h) if marked else h) ** 2)

        value, grad = jax.value_and_grad(loss)(w)
        return w - 0.1 * grad, value

    def run(marked):
        fn = jax.jit(
            lambda w, x: step(w, x, marked=marked),
            in_shardings=(in_sharding, None),
            out_shardings=(out_sharding, None),
        )
        return fn(w, x)

    toolkit.assert_matches_reference(run(True), run(False), toolkit.SEPARATE_PROGRAMS)
