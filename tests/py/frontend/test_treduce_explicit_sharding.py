"""``treduce`` under JAX's explicit sharding, under plain ``jax.jit``.

With Explicit mesh axes the per-microbatch results carry their sharding in their type
(``float32[8,16@model]``), and a loop's carry must keep one type: every accumulator
starts typed like the values it accumulates, whether the mesh is set with
``jax.set_mesh`` or the shardings are given to ``jax.jit``.
"""

from __future__ import annotations

import contextlib
import functools

import jax
import jax.numpy as jnp
import pytest
import toolkit
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxpp_mlir.frontend.treduce import Add, Concat, Max, treduce

# Compares numbers with plain jax.jit: CI runs it under capped ISAs too.
pytestmark = pytest.mark.numerics

NUM_MB = 4
E, A = AxisType.Explicit, AxisType.Auto
AXIS_TYPES = {"explicit": (E, E), "mixed": (E, A)}  # ("data", "model")
W_SPEC, X_SPEC, Y_SPEC = P(None, "model"), P(None, "data", None), P(None, "data")


def per_microbatch(w, microbatch):
    """A loss, its gradient (typed like ``w``) and a per-row value (typed like ``y``)."""

    def loss(w):
        x, y = microbatch
        rows = jnp.tanh(x @ w).sum(axis=-1)
        return jnp.mean((rows - y) ** 2), rows

    (value, rows), grad = jax.value_and_grad(loss, has_aux=True)(w)
    return {"loss": value, "grad": grad, "rows": rows}


OPERATIONS = {
    "add-concat-max": {"loss": Concat(), "grad": Add, "rows": Max},
    "concat-after-rows": {"loss": Max, "grad": Add, "rows": Concat(1)},
}


def looped(w, batch, operation):
    return treduce(functools.partial(per_microbatch, w), batch, operation=operation)


def unrolled(w, batch, operation):
    """The sequential loop treduce stands for, unrolled: ``((0 + r0) + r1) + ...``."""
    results = [per_microbatch(w, jax.tree.map(lambda a, i=i: a[i], batch)) for i in range(NUM_MB)]

    def combine(op, values):
        if op is Add:
            return functools.reduce(jnp.add, values[1:], values[0])
        if op is Max:
            return functools.reduce(jnp.maximum, values[1:], values[0])
        return jnp.stack(values, axis=op.axis)

    return {name: combine(op, [r[name] for r in results]) for name, op in operation.items()}


def inputs(mesh):
    w = toolkit.normal((8, 16), seed=0, scale=8**-0.5)
    batch = (toolkit.normal((NUM_MB, 4, 8), seed=1), toolkit.normal((NUM_MB, 4), seed=2))
    shardings = (
        NamedSharding(mesh, W_SPEC),
        (NamedSharding(mesh, X_SPEC), NamedSharding(mesh, Y_SPEC)),
    )
    return jax.device_put((w, batch), shardings), shardings


def run(fn, mesh, *, set_mesh: bool, operation):
    (w, batch), shardings = inputs(mesh)
    if set_mesh:
        jitted, context = jax.jit(fn, static_argnums=2), jax.set_mesh(mesh)
    else:
        jitted = jax.jit(fn, static_argnums=2, in_shardings=shardings)
        context = contextlib.nullcontext()
    with context:
        return jitted(w, batch, operation)


def hashable(operation):
    return tuple(sorted(operation.items(), key=lambda item: item[0]))


@pytest.mark.parametrize("set_mesh", [True, False], ids=["set_mesh", "jit_shardings"])
@pytest.mark.parametrize("axis_types", list(AXIS_TYPES), ids=str)
@pytest.mark.parametrize("operation", list(OPERATIONS), ids=str)
def test_treduce_under_an_explicit_mesh_matches_the_unrolled_loop(set_mesh, axis_types, operation):
    mesh = jax.make_mesh((2, 2), ("data", "model"), axis_types=AXIS_TYPES[axis_types])
    ops = OPERATIONS[operation]

    def step(fn, w, batch, frozen):
        return fn(w, batch, dict(frozen))

    ours = run(functools.partial(step, looped), mesh, set_mesh=set_mesh, operation=hashable(ops))
    expected = run(
        functools.partial(step, unrolled), mesh, set_mesh=set_mesh, operation=hashable(ops)
    )
    # One loop body against the unrolled loop: separate programs, the same sums in order.
    toolkit.assert_matches_reference(ours, expected, toolkit.SEPARATE_PROGRAMS)
    # The accumulated results keep the sharding in the type of the values they accumulate
    # (an Auto axis is not in a type).
    model_typed = AXIS_TYPES[axis_types][1] == E
    assert jax.typeof(ours["grad"]).sharding.spec == (W_SPEC if model_typed else P(None, None))
    rows = {Max: P("data"), Concat(1): P("data", None)}[ops["rows"]]
    assert jax.typeof(ours["rows"]).sharding.spec == rows
    for name in ours:
        assert jax.typeof(ours[name]) == jax.typeof(expected[name]), name


def test_accumulators_are_typed_like_the_results_inside_the_loop():
    """The carry's type: the gradient accumulator is float32[8,16@model] from the start."""
    mesh = jax.make_mesh((2, 2), ("data", "model"), axis_types=(E, E))
    (w, batch), _ = inputs(mesh)
    with jax.set_mesh(mesh):
        jaxpr = jax.make_jaxpr(lambda w, b: looped(w, b, OPERATIONS["add-concat-max"]))(w, batch)
    (loop,) = [eqn for eqn in jaxpr.eqns if eqn.primitive.name in ("scan", "while")]
    carried = [str(var.aval) for var in loop.outvars]
    assert "float32[8,16@model]" in carried, carried
    assert "float32[4@data]" in carried, carried
