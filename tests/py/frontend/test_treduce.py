"""Tests of the microbatch loop frontend ``treduce`` and its loop marker."""

from __future__ import annotations

import functools
import re
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import toolkit
from jax import lax
from toolkit import on_device

from jaxpp_mlir.dialect import ops as dops
from jaxpp_mlir.dialect.ops import (
    BACKWARD,
    FORWARD,
    LOOP_MARKER,
    LOOP_NUM_MICROBATCHES_ATTR,
    LOOP_REDUCTIONS_ATTR,
    MARKER_ATTR,
    MARKER_OP,
    SCHEDULE_ATTR,
)
from jaxpp_mlir.errors import MarkerError
from jaxpp_mlir.frontend.markers import pipeline_enter_stage
from jaxpp_mlir.frontend.treduce import (
    Add,
    AddOp,
    Concat,
    Max,
    MaxOp,
    TreduceError,
    loop_marker_p,
    treduce,
    treduce_i,
)
from jaxpp_mlir.schedules import GPipe
from jaxpp_mlir.schedules.record import schedule_from_record

# Compares numbers with plain jax.jit or between runs: CI runs it under capped ISAs too.
pytestmark = pytest.mark.numerics

NUM_MB = 8


def _marker_re(*tags: str) -> re.Pattern[str]:
    tag = "|".join(re.escape(t) for t in tags)
    return re.compile(re.escape(MARKER_OP) + r" \{[^}]*" + re.escape(MARKER_ATTR) + f' = "({tag})"')


LOOP_MARKER_RE = _marker_re(LOOP_MARKER)
STAGE_MARKER_RE = _marker_re(FORWARD, BACKWARD)


# ------------------------------------------------------------------ helpers


def assert_trees_equal(got: Any, want: Any) -> None:
    """Same structure, dtypes, shapes and bits: two runs of the same programs by construction."""
    toolkit.assert_same_program(got, want)


def assert_trees_close(got: Any, want: Any, tolerance=toolkit.SEPARATE_PROGRAMS) -> None:
    """Within ``tolerance`` (ulps of each leaf's scale): ``want`` comes from another program
    (a loop without the loop marker, a Python loop, an unmarked model)."""
    toolkit.assert_matches_reference(got, want, tolerance)


def python_reference(fun, xs, ops, axis=0):
    """The sequential loop ``treduce`` means: a list of per-leaf ops, eager, unrolled."""
    n = jax.tree_util.tree_leaves(xs)[0].shape[axis]
    results = [
        fun(jax.tree_util.tree_map(lambda x, i=i: jnp.take(x, i, axis), xs)) for i in range(n)
    ]
    flat = [jax.tree_util.tree_leaves(r) for r in results]
    treedef = jax.tree_util.tree_structure(results[0])
    out = []
    for j, op in enumerate(ops):
        column = [f[j] for f in flat]
        if isinstance(op, Concat):
            out.append(jnp.stack(column, axis=op.axis))
        else:
            acc = MaxOp().init(n, column[0]) if isinstance(op, MaxOp) else jnp.zeros_like(column[0])
            for c in column:
                acc = lax.max(acc, c) if isinstance(op, MaxOp) else lax.add(acc, c)
            out.append(acc)
    return jax.tree_util.tree_unflatten(treedef, out)


def fori_reference(fun, xs, ops, axis=0):
    """The same loop as ``lax.fori_loop`` without any marker (same order of operations)."""
    n = jax.tree_util.tree_leaves(xs)[0].shape[axis]

    def at(i):
        return fun(
            jax.tree_util.tree_map(lambda x: lax.dynamic_index_in_dim(x, i, axis, False), xs)
        )

    shape = jax.eval_shape(at, jax.ShapeDtypeStruct((), jnp.int32))
    leaves, treedef = jax.tree_util.tree_flatten(shape)
    init = [op.init(n, leaf) for op, leaf in zip(ops, leaves, strict=True)]

    def body(i, state):
        values = jax.tree_util.tree_leaves(at(i))
        return [op.update(s, v, i) for op, s, v in zip(ops, state, values, strict=True)]

    return jax.tree_util.tree_unflatten(treedef, lax.fori_loop(0, n, body, init))


def init_mlp(sizes: tuple[int, ...] = (4, 5, 3)) -> list[tuple[jax.Array, jax.Array]]:
    return [
        (
            toolkit.normal((m, n), seed=i, scale=1 / np.sqrt(m)),
            toolkit.on_device(np.full(n, 0.1, np.float32)),
        )
        for i, (m, n) in enumerate(zip(sizes[:-1], sizes[1:], strict=True))
    ]


def loss_fn(params, batch, *, marked: bool):
    x, y = batch
    for w, b in params:
        x = jnp.tanh(x @ w + b)
        if marked:
            x = pipeline_enter_stage(x)
    return jnp.mean((x - y) ** 2)


@pytest.fixture(scope="module")
def model():
    params = init_mlp()
    batch = (
        toolkit.normal((NUM_MB, 2, 4), seed=10),
        toolkit.normal((NUM_MB, 2, 3), seed=11),
    )
    return params, batch


@pytest.fixture(scope="module")
def xs():
    # About 1 KiB of loop state, not less: XLA CPU compiles a while loop whose state is
    # tiny (a few hundred bytes) as one LLVM function ("small call"), which a custom
    # call in the body prevents; the marker-free reference would then be codegen'd
    # differently and may differ from treduce by an ulp in its reductions. Not more
    # either: XLA compiles wider rows slower (4 x 8 compiles in 60% of 8 x 16's time).
    return {
        "a": toolkit.normal((NUM_MB, 4, 8), seed=20),
        "b": toolkit.normal((NUM_MB, 5), seed=21),
    }


def per_mb(mb):
    """A per-microbatch function with a dict result of two leaves, of ranks 1 and 1."""
    return {
        "s": jnp.sum(mb["a"] * mb["a"], axis=1) + jnp.sum(mb["b"]),
        "v": jnp.tanh(mb["a"]) @ mb["a"][0],
    }


# ---------------------------------------------------------- the reductions


def test_ops_are_singletons_and_reprs():
    assert Add == AddOp() and Max == MaxOp()
    assert repr(Add) == "Add" and repr(Max) == "Max" and repr(Concat()) == "Concat(axis=0)"
    assert Concat(1) == Concat(axis=1) and Concat() != Concat(1)
    assert (Add.tag, Max.tag, Concat(-1).tag) == ("add", "max", "concat(-1)")


@pytest.mark.parametrize("op", [Add, Max, Concat(), Concat(1), Concat(-1)], ids=repr)
def test_single_operation_matches_references(xs, op):
    step = jax.jit(lambda xs: treduce(per_mb, xs, operation=op))
    got = step(xs)
    ops = [op, op]
    assert_trees_close(got, jax.jit(lambda xs: fori_reference(per_mb, xs, ops))(xs))
    assert_trees_close(got, python_reference(per_mb, xs, ops))
    # Eagerly (the loop runs compiled, but not as one program with the rest).
    assert_trees_close(treduce(per_mb, xs, operation=op), got)


def test_concat_stacks_along_a_new_axis():
    xs = on_device(np.arange(24, dtype=np.float32).reshape(NUM_MB, 3))
    np.testing.assert_array_equal(treduce(lambda x: x, xs, operation=Concat()), xs)
    np.testing.assert_array_equal(treduce(lambda x: x, xs, operation=Concat(1)), xs.T)
    np.testing.assert_array_equal(treduce(lambda x: x, xs, operation=Concat(-1)), xs.T)
    scalars = treduce(lambda x: x.sum(), xs, operation=Concat())
    np.testing.assert_array_equal(scalars, xs.sum(axis=1))


def test_max_and_add_on_integers():
    xs = on_device(np.array([[3, -7], [-2, 5], [1, 1]], np.int32))
    assert_trees_equal(treduce(lambda x: x, xs, operation=Max), np.array([3, 5], np.int32))
    assert_trees_equal(treduce(lambda x: x, xs, operation=Add), np.array([2, -1], np.int32))
    neg = on_device(np.full((4, 2), -np.inf, np.float32))
    assert_trees_equal(treduce(lambda x: x, neg, operation=Max), neg[0])


def test_pytree_of_operations(xs):
    operation = {"s": Concat(), "v": Max}
    got = jax.jit(lambda xs: treduce(per_mb, xs, operation=operation))(xs)
    ops = [Concat(), Max]  # leaves of the result dict, in key order
    assert_trees_close(got, jax.jit(lambda xs: fori_reference(per_mb, xs, ops))(xs))
    assert got["s"].shape == (NUM_MB, 4) and got["v"].shape == (4,)


def test_operation_is_a_prefix_of_the_result(xs):
    def fun(mb):
        return jnp.sum(mb["b"]), {"x": mb["a"], "y": mb["b"] * 2}

    got = jax.jit(lambda xs: treduce(fun, xs, operation=(Concat(), Max)))(xs)
    want = jax.jit(lambda xs: fori_reference(fun, xs, [Concat(), Max, Max]))(xs)
    assert_trees_close(got, want)


def test_operation_classes_are_accepted(xs):
    got = treduce(per_mb, xs, operation={"s": Concat, "v": MaxOp})
    assert_trees_equal(got, treduce(per_mb, xs, operation={"s": Concat(), "v": Max}))


@functools.partial(jax.jit, static_argnums=2)
def losses_and_grads(params, batch, marked: bool):
    """The per-microbatch losses and the summed gradients of ``loss_fn`` (compiled once
    for the tests that use it)."""
    return treduce(
        lambda mb: jax.value_and_grad(loss_fn)(params, mb, marked=marked),
        batch,
        operation=(Concat(), Add),
    )


def test_default_operation_on_loss_and_grads(model):
    params, batch = model

    def step(params, batch):
        return treduce(lambda mb: jax.value_and_grad(loss_fn)(params, mb, marked=False), batch)

    got = jax.jit(step)(params, batch)
    assert_trees_equal(got, losses_and_grads(params, batch, False))
    losses, grads = got
    assert losses.shape == (NUM_MB,)
    assert jax.tree_util.tree_structure(grads) == jax.tree_util.tree_structure(params)


def test_default_operation_otherwise_adds(xs):
    got = jax.jit(lambda xs: treduce(per_mb, xs))(xs)
    assert_trees_equal(got, jax.jit(lambda xs: treduce(per_mb, xs, operation=Add))(xs))
    three = treduce(lambda mb: (mb["b"], mb["b"], mb["b"]), xs)
    assert all(t.shape == (5,) for t in three)
    lst = treduce(lambda mb: [mb["b"], mb["b"].sum()], xs)
    assert lst[0].shape == (5,) and lst[1].shape == ()


def test_axis_one():
    xs = {
        "x": toolkit.normal((3, NUM_MB, 4), seed=3),
        "y": on_device(np.arange(2 * NUM_MB, dtype=np.float32).reshape(2, -1)),
    }

    def fun(mb):
        assert mb["x"].shape == (3, 4) and mb["y"].shape == (2,)
        return jnp.sum(mb["x"], axis=0) * mb["y"][1], mb["y"]

    ops = [Concat(), Add]
    got = jax.jit(lambda xs: treduce(fun, xs, axis=1, operation=(Concat(), Add)))(xs)
    assert_trees_close(got, jax.jit(lambda xs: fori_reference(fun, xs, ops, axis=1))(xs))
    assert_trees_close(got, python_reference(fun, xs, ops, axis=1))
    # A negative axis counts from each leaf's end: axis -1 of y is axis 1.
    six = np.arange(6, dtype=np.float32).reshape(2, 3)
    same = treduce(lambda mb: mb, on_device(six), axis=-1, operation=Concat(1))
    np.testing.assert_array_equal(same, six)


# ------------------------------------------------------------------- errors


def test_mismatched_microbatch_sizes_raise():
    xs = {
        "a": on_device(np.zeros((8, 2), np.float32)),
        "b": on_device(np.zeros((4, 2), np.float32)),
    }
    with pytest.raises(TreduceError, match=r"same size along axis 0.*\['a'\]: 8.*\['b'\]: 4"):
        treduce(lambda mb: mb["a"], xs)
    # Also a MarkerError and a ValueError.
    with pytest.raises(MarkerError):
        treduce(lambda mb: mb["a"], xs)
    with pytest.raises(ValueError):
        jax.jit(lambda xs: treduce(lambda mb: mb["a"], xs))(xs)


@pytest.mark.parametrize(
    ("xs", "kwargs", "pattern"),
    [
        ((), {}, "no array leaves"),
        (on_device(np.float32(1.0)), {}, "out of range"),
        (on_device(np.zeros((2, 3), np.float32)), {"axis": 2}, "out of range"),
        (on_device(np.zeros((0, 3), np.float32)), {}, "at least one microbatch"),
        (on_device(np.zeros((2, 3), np.float32)), {"axis": 1.0}, "axis must be an int"),
        (
            on_device(np.zeros((2, 3), np.float32)),
            {"operation": (Add, Add)},
            "does not match the structure",
        ),
        (
            on_device(np.zeros((2, 3), np.float32)),
            {"operation": "add"},
            "must be Add, Max or Concat",
        ),
        (
            on_device(np.zeros((2, 3), np.float32)),
            {"operation": Concat(3)},
            r"Concat\(axis=3\) is out of range",
        ),
    ],
)
def test_bad_inputs_raise(xs, kwargs, pattern):
    with pytest.raises(TreduceError, match=pattern):
        treduce(lambda mb: mb, xs, **kwargs)


def test_max_rejects_complex():
    with pytest.raises(TreduceError, match="Max cannot reduce"):
        treduce(lambda mb: mb, on_device(np.zeros((2, 3), np.complex64)), operation=Max)


def test_add_rejects_booleans():
    with pytest.raises(TreduceError, match="Add cannot sum boolean results: use Max"):
        treduce(lambda mb: mb > 0, on_device(np.zeros((2, 3), np.float32)), operation=Add)


# ---------------------------------------------------------------- lowering


def _loop_markers(module) -> list:
    """Every loop marker op of a lowered module, in every function."""
    found = []

    def visit(op):
        if dops.is_loop_marker(op):
            found.append(op)
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    visit(inner.operation)

    visit(module.operation)
    return found


def test_lowers_to_one_while_with_one_loop_marker(xs):
    schedule = GPipe(2)
    step = jax.jit(lambda xs: treduce(per_mb, xs, schedule=schedule, operation=Add))
    lowered = step.lower(xs)
    text = lowered.as_text()
    assert text.count("stablehlo.while") == 1
    markers = LOOP_MARKER_RE.findall(text)
    assert len(markers) == 1
    line = next(ln for ln in text.splitlines() if LOOP_MARKER_RE.search(ln))
    assert f"{LOOP_NUM_MICROBATCHES_ATTR} = {NUM_MB} : i64" in line
    assert f'{SCHEDULE_ATTR} = {{kind = "GPipe", num_stages = 2 : i64}}' in line
    assert f'{LOOP_REDUCTIONS_ATTR} = "add,add"' in line
    assert line.rstrip().endswith(": tensor<i32>")
    # The accessors of dialect/ops.py read the same attributes.
    (op,) = _loop_markers(lowered.compiler_ir("stablehlo"))
    assert dops.loop_num_microbatches(op) == NUM_MB
    assert dops.loop_schedule(op) == {"kind": "GPipe", "num_stages": 2}
    assert dops.loop_reductions(op) == ("add", "add")
    assert not dops.is_stage_marker(op)


def test_marker_attributes_without_schedule(xs):
    text = (
        jax.jit(lambda xs: treduce(per_mb, xs, operation={"s": Concat(), "v": Max}))
        .lower(xs)
        .as_text()
    )
    line = next(ln for ln in text.splitlines() if LOOP_MARKER_RE.search(ln))
    assert SCHEDULE_ATTR not in line
    assert f'{LOOP_REDUCTIONS_ATTR} = "concat(0),max"' in line


def test_a_schedule_name_is_recorded_as_a_bare_name(xs):
    lowered = jax.jit(lambda xs: treduce(per_mb, xs, schedule="GPipe", operation=Add)).lower(xs)
    (op,) = _loop_markers(lowered.compiler_ir("stablehlo"))
    assert dops.loop_schedule(op) == {"kind": "GPipe"}


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ("Std1F1B(num_stages=2)", "'Std1F1B\\(num_stages=2\\)' is not a built-in schedule name"),
        ("import os", "is not a built-in schedule name"),
        (42, "takes a jaxpp_mlir schedule .*, got int"),
        ("gpipe", "'gpipe' is not a built-in schedule name .*; did you mean 'GPipe'\\?"),
        ("auto", "the planner chooses the schedule when the step is partitioned"),
    ],
)
def test_schedule_text_or_other_objects_are_refused_when_traced(xs, schedule, message):
    step = jax.jit(lambda xs: treduce(per_mb, xs, schedule=schedule, operation=Add))
    with pytest.raises(TreduceError, match=message):
        step.lower(xs)


def test_a_schedule_a_record_cannot_hold_is_recorded_as_its_task_lists(xs):
    """A Schedule subclass of one's own: the task lists it gives for treduce's count."""

    class ForwardsFirst(GPipe):  # GPipe's order, built by hand: not the built-in's code
        def _build(self, num_microbatches):
            return super()._build(num_microbatches)

    schedule = ForwardsFirst(1)
    step = jax.jit(lambda xs: treduce(per_mb, xs, schedule=schedule, operation=Add))
    (op,) = _loop_markers(step.lower(xs).compiler_ir("stablehlo"))
    record = dops.loop_schedule(op)
    assert record["kind"] == "CustomSchedule"
    count = len(xs["a"])
    assert schedule_from_record(record).tasks(count) == schedule.tasks(count)


def test_marker_survives_canonicalize(xs):
    """The marker's result feeds the slicing, so dead-code elimination keeps it."""
    from jax.extend.mlir import passmanager

    module = jax.jit(lambda xs: treduce(per_mb, xs)).lower(xs).compiler_ir("stablehlo")
    with module.context:
        passmanager.PassManager.parse("builtin.module(canonicalize,cse,symbol-dce)").run(
            module.operation
        )
    assert len(_loop_markers(module)) == 1


def test_loop_marker_in_jaxpr_and_identity():
    jaxpr = jax.make_jaxpr(lambda xs: treduce(lambda x: x * 2, xs))(np.ones((4, 2), np.float32))
    assert loop_marker_p.name in str(jaxpr)
    i = jnp.int32(3)
    out = loop_marker_p.bind(i, num_microbatches=4, schedule=None, reductions=("add",))
    assert out.dtype == jnp.int32 and int(out) == 3


# ------------------------------------------------------ models and autodiff


def test_marked_model_under_treduce_matches_unmarked(model):
    params, batch = model
    # The markers are fusion barriers: another program than the unmarked one.
    assert_trees_close(
        losses_and_grads(params, batch, True), losses_and_grads(params, batch, False)
    )
    text = losses_and_grads.lower(params, batch, True).as_text()
    assert text.count("stablehlo.while") == 1
    assert len(LOOP_MARKER_RE.findall(text)) == 1
    # 2 forward + 2 backward stage markers, all inside the single loop's body.
    assert len(STAGE_MARKER_RE.findall(text)) == 4


def test_training_step_matches_reference(model):
    params, batch = model

    def step(params, batch):
        losses, grads = treduce(
            lambda mb: jax.value_and_grad(loss_fn)(params, mb, marked=True),
            batch,
            operation=(Concat(), Add),
        )
        new_params = jax.tree_util.tree_map(lambda p, g: p - 0.1 * g / NUM_MB, params, grads)
        return jnp.mean(losses), new_params

    def reference(params, batch):
        def body(i, state):
            losses, grads = state
            mb = jax.tree_util.tree_map(lambda x: lax.dynamic_index_in_dim(x, i, 0, False), batch)
            loss, g = jax.value_and_grad(loss_fn)(params, mb, marked=False)
            losses = lax.dynamic_update_index_in_dim(losses, loss, i, 0)
            return losses, jax.tree_util.tree_map(lax.add, grads, g)

        zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
        losses, grads = lax.fori_loop(0, NUM_MB, body, (jnp.zeros((NUM_MB,)), zeros))
        new_params = jax.tree_util.tree_map(lambda p, g: p - 0.1 * g / NUM_MB, params, grads)
        return jnp.mean(losses), new_params

    got = jax.jit(step)(params, batch)
    assert_trees_close(got, jax.jit(reference)(params, batch))

    # Against a plain Python loop over microbatches, jitted as a whole (eagerly, each of
    # its ops would be compiled on its own).
    @jax.jit
    def unrolled(params, batch):
        losses, grads = [], jax.tree_util.tree_map(jnp.zeros_like, params)
        for i in range(NUM_MB):
            mb = jax.tree_util.tree_map(lambda x, i=i: x[i], batch)
            loss, g = jax.value_and_grad(loss_fn)(params, mb, marked=False)
            losses.append(loss)
            grads = jax.tree_util.tree_map(jnp.add, grads, g)
        return (
            jnp.mean(jnp.stack(losses)),
            jax.tree_util.tree_map(lambda p, g: p - 0.1 * g / NUM_MB, params, grads),
        )

    assert_trees_close(got, unrolled(params, batch))


def test_grad_of_a_function_containing_treduce(model):
    params, batch = model

    def total(params, batch, marked):
        return treduce(lambda mb: loss_fn(params, mb, marked=marked), batch, operation=Add)

    def reference(params, batch):
        def body(i, acc):
            mb = jax.tree_util.tree_map(lambda x: lax.dynamic_index_in_dim(x, i, 0, False), batch)
            return acc + loss_fn(params, mb, marked=False)

        return lax.fori_loop(0, NUM_MB, body, jnp.zeros(()))

    grad = jax.jit(jax.value_and_grad(total), static_argnums=2)
    got = grad(params, batch, True)
    unmarked = grad(params, batch, False)
    assert_trees_close(unmarked, jax.jit(jax.value_and_grad(reference))(params, batch))
    # The backward marker is a fusion barrier: XLA may fuse the last bias gradient's multiply
    # into its batch reduction when unmarked, while the marker makes it round the product
    # first.
    assert_trees_close(got, unmarked)
    # Differentiating the loop itself gives JAX's forward and backward loops.
    text = grad.lower(params, batch, True).as_text()
    assert text.count("stablehlo.while") == 2
    assert len(LOOP_MARKER_RE.findall(text)) == 1


def test_grad_through_max_and_concat():
    xs = toolkit.normal((NUM_MB, 3), seed=4)

    def f(w):
        out = treduce(lambda x: (x * w, jnp.sin(x * w)), xs, operation=(Max, Concat(1)))
        return jnp.sum(out[0]) + jnp.sum(out[1] ** 2)

    def g(w):
        rs = [xs[i] * w for i in range(NUM_MB)]
        mx = rs[0]
        for r in rs[1:]:
            mx = jnp.maximum(mx, r)
        return jnp.sum(mx) + jnp.sum(jnp.stack([jnp.sin(r) for r in rs], 1) ** 2)

    w = on_device(np.array([0.5, -1.0, 2.0], np.float32))
    # Both jitted: eagerly, each of the reference's ops would be compiled on its own.
    assert_trees_close(jax.jit(jax.grad(f))(w), jax.jit(jax.grad(g))(w))


def test_vmap_of_treduce():
    values = np.arange(24, dtype=np.float32).reshape(2, 4, 3)
    got = jax.vmap(lambda xs: treduce(lambda x: x.sum(), xs, operation=Max))(on_device(values))
    np.testing.assert_array_equal(got, values.sum(-1).max(-1))


def test_treduce_i_passes_the_index():
    got = jax.jit(lambda: treduce_i(lambda i: i * 2, 5, operation=Concat()))()
    np.testing.assert_array_equal(got, np.arange(5, dtype=np.int32) * 2)
    assert got.dtype == jnp.int32


def test_warns_when_fun_ignores_its_microbatch():
    w = on_device(np.arange(3, dtype=np.float32))
    zeros = on_device(np.zeros((4, 3), np.float32))
    with pytest.warns(RuntimeWarning, match="does not depend on its microbatch"):
        got = jax.jit(lambda xs: treduce(lambda mb: w * 2, xs))(zeros)
    np.testing.assert_array_equal(got, np.arange(3, dtype=np.float32) * 8)
    # Concat reads the counter itself: the marker stays, no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        text = jax.jit(lambda xs: treduce(lambda mb: w, xs, operation=Concat())).lower(zeros)
        assert len(LOOP_MARKER_RE.findall(text.as_text())) == 1
