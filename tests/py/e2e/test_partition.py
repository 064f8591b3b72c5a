"""End to end: marked JAX steps partitioned, compiled and run, against plain jax.jit."""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import pytest
import toolkit
from toolkit import make_mesh

import jaxpp_mlir as pp

# Compares numbers with plain jax.jit or between runs: CI runs it under capped ISAs too.
pytestmark = pytest.mark.numerics

# Every stage runs the same StableHLO ops in the same order as the jitted step,
# and XLA's CPU backend gives these ops the same results whichever module they
# sit in: results are compared bit for bit.


shared_stage_compiles = toolkit.stage_compiles_shared_by_file()


def run_pipelined(fn, *args, num_ranks):
    program = pp.partition(jax.jit(fn).lower(*args), mesh=make_mesh(num_ranks))
    return program, program.compile()(*args)


def mlp_params(num_stages, width=8, layers_per_stage=2, seed=0):
    return toolkit.mlp_params(num_stages * layers_per_stage, width, seed=seed)


def mlp(params, x, layers_per_stage=2):
    for index, w in enumerate(params):
        x = jnp.tanh(x @ w)
        if index % layers_per_stage == layers_per_stage - 1:
            x = pp.pipeline_enter_stage(x)
    return x


def mse(params, x, y):
    return jnp.mean((mlp(params, x) - y) ** 2)


@pytest.fixture(scope="module")
def batch():
    return toolkit.normal((4, 8), seed=1), toolkit.normal((4, 8), seed=2)


@pytest.mark.parametrize("num_stages", [2, 3, 4])
def test_mlp_value_and_grad(num_stages, batch):
    params = mlp_params(num_stages)
    step = jax.value_and_grad(mse)
    program, result = run_pipelined(step, params, *batch, num_ranks=num_stages)
    assert program.num_stages == num_stages
    toolkit.assert_matches_reference(
        result, jax.jit(step)(params, *batch), toolkit.SEPARATE_PROGRAMS
    )


def test_mlp_outputs_live_on_their_stage_rank(batch):
    params = mlp_params(4)
    program, (loss, grads) = run_pipelined(jax.value_and_grad(mse), params, *batch, num_ranks=4)
    devices = jax.devices()
    assert loss.devices() == {devices[3]}
    for index, grad in enumerate(grads):
        assert grad.devices() == {devices[index // 2]}


def test_several_arrays_cross_one_boundary(batch):
    params = mlp_params(3, layers_per_stage=1)

    def loss(params, x, y):
        a = jnp.tanh(x @ params[0])
        b = jnp.sin(x @ params[0].T)
        a, b = pp.pipeline_enter_stage((a, b))
        c = pp.pipeline_enter_stage(jnp.tanh(a @ params[1]) * b)
        d = pp.pipeline_enter_stage(c @ params[2] + a)
        return jnp.mean((d - y) ** 2)

    step = jax.value_and_grad(loss)
    _, result = run_pipelined(step, params, *batch, num_ranks=3)
    toolkit.assert_matches_reference(
        result, jax.jit(step)(params, *batch), toolkit.SEPARATE_PROGRAMS
    )


def test_skip_connection_over_a_stage(batch):
    params = mlp_params(3, layers_per_stage=1)

    def loss(params, x, y):
        h0 = pp.pipeline_enter_stage(jnp.tanh(x @ params[0]))
        h1 = pp.pipeline_enter_stage(jnp.tanh(h0 @ params[1]))
        out = pp.pipeline_enter_stage(h1 @ params[2] + h0)  # stage 0's output used in stage 2
        return jnp.mean((out - y) ** 2)

    step = jax.value_and_grad(loss)
    program, result = run_pipelined(step, params, *batch, num_ranks=3)
    toolkit.assert_matches_reference(
        result, jax.jit(step)(params, *batch), toolkit.SEPARATE_PROGRAMS
    )
    assert any(
        inst.rank == 0 and getattr(inst, "peer", None) == 2 for inst in program.plan.instructions
    ), "stage 0's output must be sent straight to rank 2"


def test_stage_without_parameters(batch):
    params = mlp_params(2, layers_per_stage=1)

    def loss(params, x, y):
        h = pp.pipeline_enter_stage(jnp.tanh(x @ params[0]))
        h = pp.pipeline_enter_stage(jnp.sin(h) * 2.0)  # no parameters in stage 1
        h = pp.pipeline_enter_stage(h @ params[1])
        return jnp.mean((h - y) ** 2)

    step = jax.value_and_grad(loss)
    program, result = run_pipelined(step, params, *batch, num_ranks=3)
    assert program.num_stages == 3
    toolkit.assert_matches_reference(
        result, jax.jit(step)(params, *batch), toolkit.SEPARATE_PROGRAMS
    )


def test_grad_without_the_last_forward_marker(batch):
    """Under jax.grad, JAX drops the last forward marker when only the loss reads it."""
    params = mlp_params(3, layers_per_stage=1)

    def loss(params, x):
        h = pp.pipeline_enter_stage(jnp.tanh(x @ params[0]))
        h = pp.pipeline_enter_stage(jnp.tanh(h @ params[1]))
        return jnp.mean(pp.pipeline_enter_stage(h @ params[2]))  # linear: no residual

    step = jax.grad(loss)
    lowered = jax.jit(step).lower(params, batch[0])
    text = lowered.as_text()
    assert text.count('jaxpp.marker = "fwd"') == 2
    assert text.count('jaxpp.marker = "bwd"') == 3
    program, result = run_pipelined(step, params, batch[0], num_ranks=3)
    assert program.num_stages == 3
    toolkit.assert_matches_reference(
        result, jax.jit(step)(params, batch[0]), toolkit.SEPARATE_PROGRAMS
    )


def test_layernorm_softmax_model_within_float_tolerance():
    """Reductions (layer norm, softmax, logsumexp) on both sides of the boundary.

    XLA fuses and reassociates reductions differently in a stage program than in
    the whole step (so does jax.jit itself with and without the markers): results
    agree to a few float32 ulps of each leaf's scale, not bit for bit.
    """
    # Two stages, 16 wide: one boundary shows it, and XLA:CPU's compile time grows with
    # the stage count and the width of such rows.
    params = [toolkit.normal((16, 16), seed=11 + i, scale=0.2) for i in range(2)]
    x = toolkit.normal((4, 16), seed=15)

    def model(params, x):
        for w in params:
            h = x @ w
            h = (h - h.mean(-1, keepdims=True)) / jnp.sqrt(h.var(-1, keepdims=True) + 1e-5)
            x = pp.pipeline_enter_stage(jax.nn.softmax(h, axis=-1) * 3.0 + x)
        return jnp.log(jnp.sum(jnp.exp(x)))

    step = jax.value_and_grad(model)
    _, result = run_pipelined(step, params, x, num_ranks=2)
    expected = jax.jit(step)(params, x)
    toolkit.assert_matches_reference(result, expected, toolkit.SEPARATE_PROGRAMS)


@pytest.mark.parametrize("num_stages", [2, 4])
def test_forward_only(num_stages, batch):
    params = mlp_params(num_stages)
    program, result = run_pipelined(mlp, params, batch[0], num_ranks=num_stages)
    assert "bwd" not in " ".join(program.stage_modules)
    toolkit.assert_matches_reference(
        result, jax.jit(mlp)(params, batch[0]), toolkit.SEPARATE_PROGRAMS
    )


def test_training_step_with_sgd_update(batch):
    params = mlp_params(4)

    def step(params, x, y):
        loss, grads = jax.value_and_grad(mse)(params, x, y)
        return [p - 0.1 * g for p, g in zip(params, grads, strict=True)], loss

    program = pp.partition(jax.jit(step).lower(params, *batch), mesh=make_mesh(4))
    compiled = program.compile()
    ours, reference = params, params
    for _ in range(3):
        ours, loss = compiled(ours, *batch)
        reference, reference_loss = jax.jit(step)(reference, *batch)
        toolkit.assert_matches_reference(loss, reference_loss, toolkit.SEVERAL_STEPS)
    toolkit.assert_matches_reference(ours, reference, toolkit.SEVERAL_STEPS)


def test_partition_from_mlir_text_file(tmp_path, batch):
    params = mlp_params(2)
    step = jax.value_and_grad(mse)
    path = tmp_path / "step.mlir"
    path.write_text(jax.jit(step).lower(params, *batch).as_text())
    program = pp.partition(path.read_text(), mesh=make_mesh(2))
    flat = program.compile()(*params, *batch)
    expected = jax.tree_util.tree_leaves(jax.jit(step)(params, *batch))
    toolkit.assert_matches_reference(list(flat), expected, toolkit.SEPARATE_PROGRAMS)


def test_stage_ir_and_dump(tmp_path, batch):
    params = mlp_params(2)
    lowered = jax.jit(jax.value_and_grad(mse)).lower(params, *batch)
    program = pp.partition(lowered, mesh=make_mesh(2), dump_dir=tmp_path)
    text = program.stage_ir(1)
    assert "jaxpp" not in text and "custom_call" not in text
    assert text.count("func.func public @main") == 2  # forward and backward of stage 1
    assert "jaxpp.send" in program.ir() and "jaxpp.recv" in program.ir()
    names = sorted(os.listdir(tmp_path))
    assert names[0] == "00_input.mlir"
    assert "01_after_jaxpp-check-attributes.mlir" in names
    assert "02_after_jaxpp-inline-calls.mlir" in names
    dumped = sorted(os.listdir(tmp_path / "program"))
    assert "task_graph.mlir" in dumped and "stage1_bwd.mlir" in dumped and "schedule.txt" in dumped


def test_second_call_reuses_executables(batch):
    params = mlp_params(2)
    program = pp.partition(
        jax.jit(jax.value_and_grad(mse)).lower(params, *batch), mesh=make_mesh(2)
    )
    compiled = program.compile()
    compiled(params, *batch)
    executables = dict(compiled.executable.executables)
    compiled(params, *batch)
    assert {k: id(v) for k, v in compiled.executable.executables.items()} == {
        k: id(v) for k, v in executables.items()
    }


# ------------------------------------------------------------------ errors


def test_no_markers_is_a_clear_error(batch):
    def loss(w, x):
        return jnp.sum(jnp.tanh(x @ w))

    lowered = jax.jit(loss).lower(jnp.ones((8, 8)), batch[0])
    with pytest.raises(pp.PartitionError, match="no stage markers found"):
        pp.partition(lowered, mesh=make_mesh(2))


def test_no_markers_in_treduce_is_an_error_at_the_treduce_call(batch):
    def loss(w, x):
        return jnp.sum(jnp.tanh(x @ w))

    def step(w, xs):
        return pp.treduce(lambda x: jax.value_and_grad(loss)(w, x), xs)

    lowered = jax.jit(step).lower(jnp.ones((8, 8)), batch[0])
    line = step.__code__.co_firstlineno + 1  # the treduce call
    with pytest.raises(pp.PartitionError) as info:
        pp.partition(lowered, mesh=make_mesh(2))
    assert str(info.value).startswith(f"{__file__}:{line}:")
    assert "no stage markers found in the function treduce applies to each microbatch" in str(
        info.value
    )


def test_more_stages_than_submeshes_is_an_error_at_the_first_marker_without_a_rank(batch):
    def model(ws, x):
        for w in ws:
            x = pp.pipeline_enter_stage(jnp.tanh(x @ w))
        return jnp.sum(x)

    lowered = jax.jit(jax.value_and_grad(model)).lower([jnp.eye(8)] * 3, batch[0])
    with pytest.raises(pp.PartitionError) as info:
        pp.partition(lowered, mesh=make_mesh(2))
    message = str(info.value)
    assert message.startswith(f"{__file__}:{model.__code__.co_firstlineno + 2}:"), message
    assert "the program has 3 stages but the mesh has only 2 submeshes" in message
    assert "(the marker here ends stage 2, the first without a rank)" in message


def test_more_stages_than_submeshes(batch):
    params = mlp_params(4)
    lowered = jax.jit(mlp).lower(params, batch[0])
    with pytest.raises(pp.PartitionError, match="4 stages but the mesh has only 2 submeshes"):
        pp.partition(lowered, mesh=make_mesh(2))


def test_marker_inside_control_flow_names_the_source_line(batch):
    # A loop whose trip count depends on the data is no layer scan (a fori_loop over
    # constant bounds is one: each iteration then ends a stage).
    def body(carry):
        i, n, x = carry
        return i + 1, n, pp.pipeline_enter_stage(jnp.tanh(x))

    def f(x):
        n = (x.sum() > 0).astype(jnp.int32) + 2
        return jax.lax.while_loop(lambda c: c[0] < c[1], body, (0, n, x))[2]

    with pytest.raises(
        pp.PartitionError,
        match=r"test_partition.py:\d+:\d+: error: stage marker "
        r"inside a 'stablehlo.while' that is not a layer scan: its trip count is not a constant",
    ):
        pp.partition(jax.jit(f).lower(batch[0]), mesh=make_mesh(2))


def test_malformed_mlir_text():
    with pytest.raises(pp.MlirParseError, match="malformed MLIR module: line 1:"):
        pp.partition("module { func.func @main( }", mesh=make_mesh(2))


@pytest.fixture(scope="module")
def compiled_two_stage(batch):
    params = mlp_params(2)
    program = pp.partition(
        jax.jit(jax.value_and_grad(mse)).lower(params, *batch), mesh=make_mesh(2)
    )
    return params, program.compile()


def test_call_with_wrong_shape(compiled_two_stage, batch):
    params, compiled = compiled_two_stage
    with pytest.raises(
        pp.CallError,
        match=r"^argument x \(input \d+\) has shape \(2, 8\) and dtype float32, but the "
        r"program expects shape \(4, 8\) and dtype float32$",
    ):
        compiled(params, batch[0][:2], batch[1])


def test_call_with_wrong_dtype(compiled_two_stage, batch):
    params, compiled = compiled_two_stage
    with pytest.raises(
        pp.CallError,
        match=r"^argument x \(input \d+\) has shape \(4, 8\) and dtype int32, but the "
        r"program expects shape \(4, 8\) and dtype float32$",
    ):
        compiled(params, batch[0].astype(jnp.int32), batch[1])


def test_call_with_wrong_structure(compiled_two_stage, batch):
    params, compiled = compiled_two_stage
    with pytest.raises(pp.CallError, match="structure"):
        compiled(params[:1], *batch)
