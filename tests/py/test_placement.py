"""Arrays that say where they live; Python scalars in treduce; unstack keeps the mpmd axis."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import toolkit
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import jaxpp_mlir as pp

# Compares numbers with plain jax.jit or between runs: CI runs it under capped ISAs too.
pytestmark = pytest.mark.numerics


def loss_fn(params, microbatch):
    x, y = microbatch
    for w_in, w_out in params:
        x = pp.pipeline_enter_stage(jnp.tanh(x @ w_in) @ w_out)
    return jnp.mean((x - y) ** 2), 3  # a Python int aux, as in JaxPP's README


def step(params, batch, lr):
    (losses, aux), grads = pp.treduce(
        lambda mb: jax.value_and_grad(loss_fn, has_aux=True)(params, mb),
        batch,
        operation=((pp.Concat(), pp.Concat()), pp.Add),
    )
    new = jax.tree.map(lambda p, g: p - lr * g, params, grads)
    return new, losses, aux


PARAM_SPECS = [(P(None, "model"), P("model", None))] * 2


def trained_reference(mesh: pp.MpmdMesh):
    lowering = mesh.lowering_mesh()
    param_sh = jax.tree.map(lambda s: NamedSharding(lowering, s), PARAM_SPECS)
    batch_sh = NamedSharding(lowering, P(None, "data", None))
    return jax.jit(step, in_shardings=(param_sh, (batch_sh, batch_sh), None))


@pytest.fixture(scope="module")
def trained():
    mesh = toolkit.mpmd_mesh({"stage": 2, "data": 2, "model": 2})
    params = [
        (toolkit.normal((4, 8), seed=2 * i), toolkit.normal((8, 4), seed=2 * i + 1))
        for i in range(2)
    ]
    batch = (toolkit.normal((2, 4, 4), seed=10), toolkit.normal((2, 4, 4), seed=11))
    jitted = trained_reference(mesh)
    program = pp.partition(jitted.lower(params, batch, 0.1), mesh=mesh)
    compiled = program.compile()
    outputs = compiled(params, batch, 0.1)
    expected = jitted(params, batch, 0.1)
    return mesh, program, compiled, (params, batch), outputs, expected


def test_python_scalars_in_treduce_results_and_step_arguments(trained):
    *_, outputs, expected = trained
    new, losses, aux = outputs
    np.testing.assert_array_equal(aux, np.full(2, 3))
    assert aux.dtype == expected[2].dtype
    toolkit.assert_matches_reference(outputs, expected, toolkit.SEPARATE_PROGRAMS)


def test_outputs_carry_named_shardings_with_the_stage_spec(trained):
    mesh, program, compiled, (params, batch), (new, losses, aux), _ = trained
    for stage, layer in enumerate(new):
        for array, spec in zip(layer, PARAM_SPECS[stage], strict=True):
            assert isinstance(array.sharding, NamedSharding)
            assert array.sharding.spec == spec
            assert array.sharding.mesh == mesh.unstack[stage]
            assert dict(array.sharding.mesh.shape) == {"stage": 1, "data": 2, "model": 2}
            again = jax.device_put(array, array.sharding)
            assert again.sharding == array.sharding
            np.testing.assert_array_equal(again, array)


def test_output_sharding_round_trips_through_out_shardings(trained):
    mesh, program, compiled, (params, batch), (new, losses, aux), _ = trained
    w = new[1][0]
    doubled = jax.jit(lambda x: 2 * x, out_shardings=w.sharding)(w)
    assert doubled.sharding == w.sharding
    np.testing.assert_array_equal(doubled, 2 * np.asarray(w))


def test_outputs_feed_the_next_step(trained):
    mesh, program, compiled, (params, batch), (new, losses, aux), expected = trained
    again = compiled(new, batch, 0.1)
    want = trained_reference(mesh)(expected[0], batch, 0.1)
    toolkit.assert_matches_reference(again, want, toolkit.SEVERAL_STEPS)


def test_placement_says_which_rank_holds_each_leaf(trained):
    mesh, program, compiled, _, outputs, _ = trained
    where = compiled.placement(outputs)
    new, losses, aux = where
    assert new[0][0].mpmd_idxs == (0,)
    assert new[1][1].mpmd_idxs == (1,)
    assert new[1][1].spec == P("model", None)
    text = repr(new[1][0])
    assert text.startswith("MpmdArray(shape=(4, 8), dtype=float32, mpmd_idxs=(1,), sharding=")
    assert "spec=P(None, 'model')" in text


def test_unstack_keeps_the_mpmd_axis_with_size_one():
    mesh = toolkit.mpmd_mesh({"stage": 2, "data": 2, "model": 2})
    submeshes = mesh.unstack
    assert [dict(m.shape) for m in submeshes] == [{"stage": 1, "data": 2, "model": 2}] * 2
    assert list(submeshes[1].devices.flat) == mesh.rank_devices(1)
    assert submeshes[0].axis_names == mesh.lowering_mesh().axis_names


def test_treduce_python_float_result_under_jit_and_eagerly():
    xs = jnp.arange(6.0).reshape(3, 2)

    def body(x):
        return jnp.sum(x), 0.5

    total, halves = jax.jit(lambda xs: pp.treduce(body, xs, operation=(pp.Add, pp.Concat())))(xs)
    np.testing.assert_array_equal(total, 15.0)
    np.testing.assert_array_equal(halves, np.full(3, 0.5, np.float32))
