"""JaxPP's entry points (``jaxpp_mlir.jaxpp``): ported JaxPP code runs by changing the import."""

from __future__ import annotations

import importlib.util
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import toolkit

import jaxpp_mlir
import jaxpp_mlir.jaxpp as jaxpp

# Compares numbers with plain jax.jit or between runs: CI runs it under capped ISAs too.
pytestmark = pytest.mark.numerics

PORTS = pathlib.Path(__file__).parent / "jaxpp_ports"


def load_port(name: str):
    spec = importlib.util.spec_from_file_location(f"jaxpp_port_{name}", PORTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def assert_trees_match_jit(actual, expected, tolerance=toolkit.SEPARATE_PROGRAMS):
    """Within ``tolerance`` of plain ``jax.jit``'s results (stage programs are other
    programs); integer leaves exactly."""
    toolkit.assert_matches_reference(actual, expected, tolerance)


def test_jaxpp_api_spelling_is_the_same_module():
    assert jaxpp.api.treduce is jaxpp.treduce
    for name in ("BaseSchedule", "Std1F1B", "Eager1F1B", "Interleaved1F1B", "ZeroBubble"):
        assert hasattr(jaxpp, name)
    assert isinstance(jaxpp.Std1F1B(2), jaxpp.BaseSchedule)


def test_cross_mpmd_all_reduce_sums_and_checks_dtypes():
    total = jaxpp.cross_mpmd_all_reduce(jnp.ones(2), jnp.full(2, 2.0))
    np.testing.assert_array_equal(np.asarray(total), [3.0, 3.0])
    with pytest.raises(jaxpp_mlir.CallError, match="one dtype"):
        jaxpp.cross_mpmd_all_reduce(jnp.ones(2), jnp.ones(2, jnp.int32))


def test_tasks_have_the_format_of_jaxpp_tutorial():
    # Printed by JaxPP's tutorial notebook for Interleaved1F1B(4, 4) and 4 microbatches.
    schedule = jaxpp.Interleaved1F1B(num_stages=4, mpmd_dim=4)
    assert [str(e) for e in schedule.tasks(4)[2]] == [
        "fwd_2__0", "fwd_2__1", "fwd_2__2", "bwd_2__0",
        "fwd_2__3", "bwd_2__1", "bwd_2__2", "bwd_2__3",
    ]  # fmt: skip
    assert [str(e) for e in schedule.tasks(4)[3]] == [
        f"FusedTask(fwd_3__{i}, bwd_3__{i})" for i in range(4)
    ]


def test_older_jaxpp_time_grid():
    # JaxPP's older Std1F1B.tasks(3) with 2 stages (its warm-up/steady-state loops by hand):
    # rank 0: F0 F1 . B0 F2 B1 . B2; rank 1: . F0 B0 F1 B1 F2 B2 .
    grid = jaxpp.jaxpp_grid(jaxpp.Std1F1B(2), 3)
    fwd, bwd = jaxpp.TaskType.FWD, jaxpp.TaskType.BWD

    def row(stage, items):
        return [None if i is None else jaxpp.GridTask(stage, i[1], i[0]) for i in items]

    assert grid[0] == row(
        0, [(fwd, 0), (fwd, 1), None, (bwd, 0), (fwd, 2), (bwd, 1), None, (bwd, 2)]
    )
    assert grid[1] == row(
        1, [None, (fwd, 0), (bwd, 0), (fwd, 1), (bwd, 1), (fwd, 2), (bwd, 2), None]
    )


@pytest.fixture(scope="module")
def readme_port():
    data = toolkit.normal((4, 2, 8), seed=1)  # the port's 4 microbatches of 2 rows of 8
    return load_port("readme_example").build(data=data, init=numpy_init)


def test_jaxpp_readme_train_step_matches_jax_jit(readme_port):
    mesh, pp_train_step, (opt_state, pars, batch) = readme_port
    reference = jax.jit(pp_train_step.fun)
    ours = pp_train_step(opt_state, pars, batch)
    expected = reference(opt_state, pars, batch)
    assert_trees_match_jit(ours, expected)  # the int aux (4) went through treduce too
    # The second step takes the first's outputs and reuses the compiled program.
    ours = pp_train_step(*ours[:2], batch)
    expected = reference(*expected[:2], batch)
    assert_trees_match_jit(ours, expected, toolkit.SEVERAL_STEPS)
    assert len(pp_train_step._compiled) == 1


def test_a_new_input_signature_compiles_again(readme_port):
    mesh, pp_train_step, (opt_state, pars, batch) = readme_port
    before = len(pp_train_step._compiled)
    ours = pp_train_step(opt_state, pars, batch[:2])
    assert_trees_match_jit(ours, jax.jit(pp_train_step.fun)(opt_state, pars, batch[:2]))
    assert len(pp_train_step._compiled) == before + 1


def numpy_init(model, key, x):
    """``model.init``'s parameters, drawn by numpy instead (it would compile a sampler
    program for them, which these tests do not need), of the sizes flax's initializers give:
    kernels over the square root of their input size, layer-norm scales near 1, small
    biases."""
    shapes = jax.eval_shape(model.init, key, x)
    leaves, tree = jax.tree_util.tree_flatten_with_path(shapes)
    params = []
    for seed, (path, leaf) in enumerate(leaves):
        name = jax.tree_util.keystr(path[-1:])
        if name == "['kernel']":
            fan_in = int(np.prod(leaf.shape[:-1]))
            params.append(toolkit.normal(leaf.shape, seed=seed, scale=fan_in**-0.5))
        else:
            value = toolkit.normal(leaf.shape, seed=seed, scale=0.1)
            params.append(value + 1 if name == "['scale']" else value)
    return jax.tree_util.tree_unflatten(tree, params)


@pytest.mark.slow
def test_jaxpp_tutorial_train_step_matches_jax_jit():
    port = load_port("tutorial_example")
    # Two stages of one block each: what four would check, at half the stage compiles.
    xs = toolkit.normal(port.dummy_input.shape, seed=1)
    mesh, pp_train_step, inputs = port.build(
        num_stages=2, fsdp=2, num_layers=2, xs=xs, init=numpy_init
    )
    compiled = pp_train_step.compile(*inputs)
    state, loss = compiled(*inputs)
    state, loss = compiled(state, *inputs[1:])
    lowering = mesh.lowering_mesh()
    in_shardings = port.fsdp_in_shardings(inputs[0], lowering)
    # Placed as the first step's outputs come back, so that jit compiles its step once.
    placed = jax.device_put(inputs, in_shardings)
    with jax.set_mesh(lowering):
        reference = jax.jit(pp_train_step.fun, in_shardings=in_shardings)
        expected_state, expected_loss = reference(*placed)
        expected_state, expected_loss = reference(expected_state, *placed[1:])
    # Layer norm and softmax reductions fuse differently across stage boundaries:
    # float rounding only. adamw normalizes each update to about lr (1e-3), so a
    # parameter whose gradient is ~0 may move by up to lr per step either way.
    toolkit.assert_matches_reference(loss, expected_loss, toolkit.SEVERAL_STEPS)
    assert int(state.step) == int(expected_state.step) == 2
    for a, e in zip(
        jax.tree.leaves(state.params), jax.tree.leaves(expected_state.params), strict=True
    ):
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), atol=4e-3, rtol=0)
    # Parameters of block i live on rank i (one block per stage).
    for i in range(2):
        kernel = state.params[f"block_{i}"]["Dense_0"]["kernel"]
        assert kernel.to_mpmd_local_array.devices() == set(mesh.rank_devices(i))
        assert kernel.mpmd_idxs == (i,)


def test_mpmd_jit_by_yield_runs_a_step_without_treduce():
    mesh = jaxpp.MpmdMesh(jax.sharding.Mesh(np.array(jax.devices()[:2]), ("mpmd",)), "mpmd")
    w = [jnp.eye(4) * 0.5, jnp.eye(4) * 2.0]

    def loss(w, x):
        for wi in w:
            x = jaxpp.pipeline_enter_stage(jnp.tanh(x @ wi))
        return jnp.sum(x**2)

    def step(w, x):
        value, grads = jax.value_and_grad(loss)(w, x)
        return value, jax.tree.map(lambda p, g: p - 0.1 * g, w, grads)

    x = jnp.arange(8.0).reshape(2, 4) / 8
    pipelined = jaxpp.mpmd_jit_by_yield(step, mpmd_mesh=mesh)
    ours = pipelined(w, x)
    assert_trees_match_jit(ours, jax.jit(step)(w, x))
    assert ours[1][1].to_mpmd_local_array.devices() == set(mesh.rank_devices(1))


def test_jaxpp_parallel_stage_merge_transpose_order_passes():
    """JaxPP's test of markers on independent branches (a and b, then c from a + b), with
    ``Eager1F1B(num_stages=3)``: each marker ends its own stage, as in JaxPP, so the two
    branches run on two ranks; results within JaxPP's own tolerance of jax.jit."""
    pipelined, args = load_port("parallel_stages").test_parallel_stage_merge_transpose_order()
    program = pipelined.lower(*args).program
    assert program.num_stages == 3
    assert [program.schedule.stage_rank(stage) for stage in range(3)] == [0, 1, 2]
    assert "stage 0 (a)" in program.summary() and "stage 1 (b)" in program.summary()
