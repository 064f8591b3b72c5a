"""Stages on wider submeshes: data and tensor parallelism inside each stage."""

from __future__ import annotations

import dataclasses
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import toolkit
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from jaxpp_mlir.runtime.errors import PlanError
from jaxpp_mlir.runtime.execution.executor import compile_plan
from jaxpp_mlir.runtime.instructions import receive
from jaxpp_mlir.runtime.plan import Layout
from toolkit import mpmd_mesh
from transfer_layouts import unlaid_transfers

import jaxpp_mlir as pp

# Compares numbers with plain jax.jit or between runs: CI runs it under capped ISAs too.
pytestmark = pytest.mark.numerics

WIDTH = 4  # as small as the splits over the mesh axes allow: faster compiles
NUM_MICROBATCHES = 4


def loss_fn(params, microbatch):
    x, y = microbatch
    for w_in, w_out in params:
        x = jnp.tanh(x @ w_in) @ w_out
        x = pp.pipeline_enter_stage(x)
    return jnp.mean((x - y) ** 2)


def train_step(params, batch):
    losses, grads = pp.treduce(
        lambda mb: jax.value_and_grad(loss_fn)(params, mb), batch, operation=(pp.Concat(), pp.Add)
    )
    return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), losses


def make_inputs(num_stages: int):
    params = [
        (
            toolkit.normal((WIDTH, 2 * WIDTH), seed=2 * s, scale=1 / np.sqrt(WIDTH)),
            toolkit.normal((2 * WIDTH, WIDTH), seed=2 * s + 1, scale=1 / np.sqrt(2 * WIDTH)),
        )
        for s in range(num_stages)
    ]
    shape = (NUM_MICROBATCHES, 4, WIDTH)
    batch = (toolkit.normal(shape, seed=100), toolkit.normal(shape, seed=101))
    return params, batch


def shardings(mesh: Mesh, num_stages: int, tensor_parallel: bool):
    w_in, w_out = (P(None, "model"), P("model", None)) if tensor_parallel else (P(), P())
    params = [(NamedSharding(mesh, w_in), NamedSharding(mesh, w_out))] * num_stages
    batch = (NamedSharding(mesh, P(None, "data", None)),) * 2
    return params, batch


CASES = [
    ({"stage": 2, "data": 2, "model": 2}, True),
    ({"stage": 4, "data": 2}, False),
]


@pytest.mark.parametrize(("shape", "tensor_parallel"), CASES, ids=lambda c: str(c))
def test_sharded_stages_match_jax_jit_on_the_lowering_mesh(shape, tensor_parallel):
    mesh = mpmd_mesh(shape)
    lowering_mesh = mesh.lowering_mesh()
    num_stages = shape["stage"]
    params, batch = make_inputs(num_stages)
    param_shardings, batch_shardings = shardings(lowering_mesh, num_stages, tensor_parallel)
    params = jax.device_put(params, param_shardings)
    batch = jax.device_put(batch, batch_shardings)
    step = jax.jit(
        train_step,
        in_shardings=(param_shardings, batch_shardings),
        out_shardings=(param_shardings, NamedSharding(lowering_mesh, P())),
    )
    program = pp.partition(step.lower(params, batch), mesh=mesh)
    assert "mhlo.num_partitions = 4" in program.stage_ir(0) or shape.get("model") is None
    # Every value sent between ranks has its layout in the plan (no key-value round).
    assert unlaid_transfers(program.plan) == []
    new_params, losses = program.compile()(params, batch)
    expected_params, expected_losses = step(params, batch)
    # Each stage is an SPMD program of its own (same shardings, same collectives as the
    # jitted step on the lowering mesh), a separate program from jax.jit's.
    toolkit.assert_matches_reference(
        (new_params, losses), (expected_params, expected_losses), toolkit.SEPARATE_PROGRAMS
    )
    # Each stage's parameters stay sharded, as requested, on exactly its submesh.
    submeshes = mesh.unstack
    for stage, (w_in, w_out) in enumerate(new_params):
        rank = stage % mesh.mpmd_dim
        specs = (P(None, "model"), P("model", None)) if tensor_parallel else (P(), P())
        for array, spec in zip((w_in, w_out), specs, strict=True):
            assert array.devices() == set(mesh.rank_devices(rank))
            expected = NamedSharding(submeshes[rank], spec)
            assert array.sharding.is_equivalent_to(expected, array.ndim)


def test_stages_that_want_different_shardings_for_the_boundary_value():
    mesh = mpmd_mesh({"stage": 2, "data": 2, "model": 2})
    lowering_mesh = mesh.lowering_mesh()
    params, batch = make_inputs(2)
    rows = NamedSharding(lowering_mesh, P("data", None))
    cols = NamedSharding(lowering_mesh, P(None, "model"))

    def loss(params, microbatch):
        x, y = microbatch
        (w0, w0_out), (w1, w1_out) = params
        h = jax.lax.with_sharding_constraint(jnp.tanh(x @ w0) @ w0_out, rows)
        h = pp.pipeline_enter_stage(h)
        h = jax.lax.with_sharding_constraint(h, cols)  # stage 1 wants another layout
        out = pp.pipeline_enter_stage(jnp.tanh(h @ w1) @ w1_out)
        return jnp.mean((out - y) ** 2)

    def step(params, batch):
        losses, grads = pp.treduce(
            lambda mb: jax.value_and_grad(loss)(params, mb), batch, operation=(pp.Concat(), pp.Add)
        )
        return grads, losses

    jitted = jax.jit(step)
    expected = jitted(params, batch)
    program = pp.partition(jitted.lower(params, batch), mesh=mesh)
    assert unlaid_transfers(program.plan) == []
    result = program.compile()(params, batch)
    toolkit.assert_matches_reference(result, expected, toolkit.SEPARATE_PROGRAMS)


def test_constraint_naming_the_mpmd_axis_drops_it():
    """A with_sharding_constraint over ("stage", "data") inside the step, as JaxPP users
    write it: "stage" has size 1 on the lowering mesh, so the constraint shards over
    "data" alone, in the stage program as in jax.jit."""
    mesh = mpmd_mesh({"stage": 2, "data": 2, "model": 2})
    lowering_mesh = mesh.lowering_mesh()
    params, batch = make_inputs(2)
    rows = NamedSharding(lowering_mesh, P(("stage", "data"), None))

    def loss(params, microbatch):
        x, y = microbatch
        for w_in, w_out in params:
            x = jax.lax.with_sharding_constraint(jnp.tanh(x @ w_in) @ w_out, rows)
            x = pp.pipeline_enter_stage(x)
        return jnp.mean((x - y) ** 2)

    def step(params, batch):
        return pp.treduce(
            lambda mb: jax.value_and_grad(loss)(params, mb), batch, operation=(pp.Concat(), pp.Add)
        )

    jitted = jax.jit(step)
    program = pp.partition(jitted.lower(params, batch), mesh=mesh)
    assert all('{"stage"' not in program.stage_ir(s) for s in range(2))  # no sharding names it
    assert unlaid_transfers(program.plan) == []
    toolkit.assert_matches_reference(
        program.compile()(params, batch), jitted(params, batch), toolkit.SEPARATE_PROGRAMS
    )


# ------------------------------------------------------------------ errors


def _line() -> int:
    """The caller's line number."""
    return inspect.currentframe().f_back.f_lineno


def test_step_lowered_on_the_whole_mesh_is_rejected():
    mesh = mpmd_mesh({"stage": 2, "data": 2, "model": 2})
    params, batch = make_inputs(2)
    param_shardings, batch_shardings = shardings(mesh.jax_mesh, 2, True)
    step = jax.jit(train_step, in_shardings=(param_shardings, batch_shardings))
    lowered, line = step.lower(params, batch), _line()
    with pytest.raises(pp.PartitionError, match="mpmd axis 'stage' has size 2") as info:
        pp.partition(lowered, mesh=mesh)
    # At the line that lowered the step, naming the first argument sharded over the mesh.
    assert str(info.value).startswith(f"{__file__}:{line}:")
    assert "(argument 0 ('params[0]" in str(info.value)


def test_sharding_that_names_the_mpmd_axis_is_rejected():
    mesh = mpmd_mesh({"stage": 2, "data": 2, "model": 2})
    params, batch = make_inputs(2)
    param_shardings, _ = shardings(mesh.lowering_mesh(), 2, True)
    batch_shardings = (NamedSharding(mesh.lowering_mesh(), P(None, "stage", None)),) * 2
    step = jax.jit(train_step, in_shardings=(param_shardings, batch_shardings))
    lowered, line = step.lower(params, batch), _line()
    with pytest.raises(pp.PartitionError, match="names the mpmd axis 'stage'") as info:
        pp.partition(lowered, mesh=mesh)
    assert str(info.value).startswith(f"{__file__}:{line}:")
    first_batch_argument = len(jax.tree.leaves(params))
    assert f"the sharding of argument {first_batch_argument} ('batch[0]')" in str(info.value)


def test_stage_mesh_larger_than_the_submesh_is_rejected():
    mesh = mpmd_mesh({"stage": 4, "data": 2})
    big = pp.MpmdMesh(Mesh(np.array(jax.devices()[:8]).reshape(1, 8), ("stage", "data")), "stage")
    params, batch = make_inputs(4)
    param_shardings, _ = shardings(big.lowering_mesh(), 4, False)
    step = jax.jit(train_step, in_shardings=(param_shardings, None))
    lowered, line = step.lower(params, batch), _line()
    message = "mesh has 8 devices .* but each submesh has 2"
    with pytest.raises(pp.PartitionError, match=message) as info:
        pp.partition(lowered, mesh=mesh)
    assert str(info.value).startswith(f"{__file__}:{line}:")
    assert "(argument 0 ('params[0]" in str(info.value)


def test_mesh_whose_mpmd_axis_does_not_divide_the_devices():
    with pytest.raises(pp.MeshError, match="3 devices do not split evenly along 'stage'"):
        pp.MpmdMesh.from_devices(jax.devices()[:3], {"stage": 2, "data": -1}, "stage")


# ------------------------------------------- boundary layouts carried by the plan


@pytest.fixture(scope="module")
def tensor_parallel():
    mesh = mpmd_mesh({"stage": 2, "data": 2, "model": 2})
    lowering_mesh = mesh.lowering_mesh()
    params, batch = make_inputs(2)
    param_shardings, batch_shardings = shardings(lowering_mesh, 2, True)
    params = jax.device_put(params, param_shardings)
    batch = jax.device_put(batch, batch_shardings)
    step = jax.jit(
        train_step,
        in_shardings=(param_shardings, batch_shardings),
        out_shardings=(param_shardings, NamedSharding(lowering_mesh, P())),
    )
    return mesh, pp.partition(step.lower(params, batch), mesh=mesh)


def test_every_transferred_value_has_its_layout_in_the_plan(tensor_parallel):
    _, program = tensor_parallel
    receives = [i for i in program.plan.instructions if i.kind == receive.KIND]
    assert receives and unlaid_transfers(program.plan) == []
    assert {dict(r.spec.layout.mesh_axes)["model"] for r in receives} == {2}


def _weight_input(plan):
    """(executable name, input position) of a forward stage's model-sharded weight."""
    for name, stage in plan.executables.items():
        for position, spec in enumerate(stage.input_specs):
            if spec.layout is not None and ("model",) in spec.layout.dims:
                return name, position
    raise AssertionError("no input of the plan is laid out over the 'model' axis")


def test_boundary_layouts_are_in_the_plan(tensor_parallel):
    _, program = tensor_parallel
    name, position = _weight_input(program.plan)
    layout = program.plan.executables[name].input_specs[position].layout
    assert (
        dict(layout.mesh_axes) == {"data": 2, "model": 2}
        or dict(layout.mesh_axes).get("model") == 2
    )


def test_an_executable_that_disagrees_with_the_plan_is_a_plan_error(tensor_parallel):
    mesh, program = tensor_parallel
    plan = program.plan
    name, position = _weight_input(plan)
    stage = plan.executables[name]
    spec = stage.input_specs[position]
    wrong = Layout(spec.layout.mesh_axes, tuple(() for _ in spec.shape))  # replicated
    specs = list(stage.input_specs)
    specs[position] = dataclasses.replace(spec, layout=wrong)
    bad = dataclasses.replace(
        plan,
        executables={
            **plan.executables,
            name: dataclasses.replace(stage, input_specs=tuple(specs)),
        },
    )
    rank_devices = [mesh.rank_devices(r) for r in range(plan.num_ranks)]
    with pytest.raises(PlanError, match=rf"input {position} of '{name}' is laid out as .*"
                       r"but the plan says \[.*\] on <"):  # fmt: skip
        compile_plan(bad, rank_devices)
    compile_plan(plan, rank_devices)  # the plan as built passes the check
