"""Marker misuse is caught (jaxpp-verify-markers, jaxpp-check-host-callbacks via partition)."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import toolkit
from jax.extend.mlir import ir

import jaxpp_mlir as pp
from jaxpp_mlir import ir_context
from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.frontend.markers import enter_stage_p
from jaxpp_mlir.ir import utils as ir_utils

# Compares numbers with plain jax.jit or between runs: CI runs it under capped ISAs too.
pytestmark = pytest.mark.numerics

# From numpy (toolkit.on_device): an eager jnp.full or jnp.ones is an XLA compilation.
WEIGHTS = [toolkit.on_device(np.full((4, 4), 0.1 * (i + 1), np.float32)) for i in range(4)]
BATCH = tuple(toolkit.on_device(np.ones((2, 3, 4), np.float32)) for _ in range(2))


@pytest.fixture(scope="module")
def mesh():
    return toolkit.make_mesh(4)


def _step(model, *, with_loss=True):
    def loss(params, microbatch):
        x, y = microbatch
        return jnp.mean((model(params, x) - y) ** 2)

    def step(params, batch):
        if with_loss:
            body = lambda mb: jax.value_and_grad(loss)(params, mb)  # noqa: E731
            return pp.treduce(body, batch, operation=(pp.Add, pp.Add))
        return pp.treduce(lambda mb: jax.grad(loss)(params, mb), batch, operation=pp.Add)

    return step


def _lower(model, **kwargs):
    return jax.jit(_step(model, **kwargs)).lower(WEIGHTS, BATCH)


def _partition(model, mesh, **kwargs):
    """The program and the marker warnings (set-up advice, tested elsewhere, switched off)."""
    with warnings.catch_warnings(record=True) as caught, pytest.MonkeyPatch.context() as env:
        env.setenv("JAXPP_MLIR_SETUP_WARNINGS", "0")
        warnings.simplefilter("always")
        program = pp.partition(_lower(model), mesh=mesh, **kwargs)
    return program, [w for w in caught if issubclass(w.category, pp.PartitionWarning)]


def marked_mlp(params, x):
    for w in params:
        x = pp.pipeline_enter_stage(jnp.tanh(x @ w))
    return x


@jax.custom_vjp
def _layer_without_backward_marker(w, x):
    return pp.pipeline_enter_stage(jnp.tanh(x @ w))


def _layer_fwd(w, x):
    y = jnp.tanh(x @ w)
    return pp.pipeline_enter_stage(y), (w, x, y)  # the marker in the custom_vjp forward


def _layer_bwd_unmarked(residuals, ct):
    w, x, y = residuals
    g = ct * (1 - y**2)
    return x.T @ g, g @ w.T


def _layer_bwd_marked(residuals, ct):
    return _layer_bwd_unmarked(residuals, pp.mark_stage_end_backward(ct))


_layer_without_backward_marker.defvjp(_layer_fwd, _layer_bwd_unmarked)


@jax.custom_vjp
def _layer_with_backward_marker(w, x):
    return pp.pipeline_enter_stage(jnp.tanh(x @ w))


_layer_with_backward_marker.defvjp(_layer_fwd, _layer_bwd_marked)


def _custom_vjp_mlp(layer):
    def model(params, x):
        for i, w in enumerate(params):
            x = layer(w, x) if i == 1 else pp.pipeline_enter_stage(jnp.tanh(x @ w))
        return x

    return model


def every_layer_custom_vjp_mlp(params, x):
    """Every marker in a custom_vjp forward rule without mark_stage_end_backward: the step
    has no backward marker at all (issue 37)."""
    for w in params:
        x = _layer_without_backward_marker(w, x)
    return x


def dead_marker_mlp(params, x):
    for i, w in enumerate(params):
        x = jnp.tanh(x @ w)
        if i == 1:
            pp.pipeline_enter_stage(x)  # DEAD MARKER: result unused
        else:
            x = pp.pipeline_enter_stage(x)
    return x


def parallel_markers_mlp(params, x):
    a = pp.pipeline_enter_stage(jnp.tanh(x @ params[0]))  # PARALLEL A
    b = pp.pipeline_enter_stage(jnp.tanh(x @ params[1]))  # PARALLEL B
    x = pp.pipeline_enter_stage(jnp.tanh((a + b) @ params[2]))
    return pp.pipeline_enter_stage(jnp.tanh(x @ params[3]))


def backward_marker_in_forward_mlp(params, x):
    for i, w in enumerate(params):
        x = jnp.tanh(x @ w)
        if i == 1:
            (x,) = enter_stage_p.bind(x, direction=jaxpp.BACKWARD)
        else:
            x = pp.pipeline_enter_stage(x)
    return x


def stray_backward_marker_mlp(params, x):
    """A backward-direction marker bound in forward code with no forward marker after it."""
    x = pp.pipeline_enter_stage(jnp.tanh(x @ params[0]))
    x = jnp.tanh(x @ params[1])
    (x,) = enter_stage_p.bind(x, direction=jaxpp.BACKWARD)  # STRAY
    return x


def old_placement_mlp(params, x):
    """JaxPP's placement before August 2025: markers at the start of stages 1..n-1."""
    for i, w in enumerate(params):
        if i > 0:
            x = pp.pipeline_enter_stage(x)
        x = jnp.tanh(x @ w)
    return x


def debug_print_mlp(params, x):
    for i, w in enumerate(params):
        x = jnp.tanh(x @ w)
        if i == 1:
            jax.debug.print("x {}", x.sum())  # CALLBACK
        x = pp.pipeline_enter_stage(x)
    return x


def pure_callback_mlp(params, x):
    for i, w in enumerate(params):
        x = jnp.tanh(x @ w)
        if i == 1:
            total = jax.lax.stop_gradient(x.sum())
            shape = jax.ShapeDtypeStruct((), x.dtype)
            x = x + jax.lax.stop_gradient(jax.pure_callback(np.asarray, shape, total))  # CALLBACK
        x = pp.pipeline_enter_stage(x)
    return x


def _column_of(function, tag, part):
    import inspect

    lines, _ = inspect.getsourcelines(function)
    line = next(line for line in lines if tag in line)
    return line.index(part)  # JAX records Python's 0-based column offset


def _line_of(function, tag):
    import inspect

    lines, start = inspect.getsourcelines(function)
    return start + next(i for i, line in enumerate(lines) if tag in line)


def test_consistent_markers_partition_without_warning(mesh):
    program, caught = _partition(marked_mlp, mesh, strict=True)
    assert program.num_stages == 4
    assert caught == []


def test_grad_without_loss_is_consistent(mesh):
    # jax.grad drops the last forward marker; the backward markers still count 4 stages.
    program = pp.partition(_lower(marked_mlp, with_loss=False), mesh=mesh, strict=True)
    assert program.num_stages == 4


def test_custom_vjp_without_backward_marker_is_a_located_error(mesh):
    with pytest.raises(pp.PartitionError) as info:
        _partition(_custom_vjp_mlp(_layer_without_backward_marker), mesh)
    message = str(info.value)
    assert f"test_marker_consistency.py:{_line_of(_layer_fwd, 'custom_vjp forward')}:" in message
    assert "has no backward counterpart" in message
    assert "jaxpp_mlir.mark_stage_end_backward" in message


def test_custom_vjp_without_any_backward_marker_is_a_located_error(mesh):
    """No marker of the step has a backward counterpart: the backward rules' code reads
    the stages' values (issue 37: it ran with the whole backward on the last rank)."""
    with pytest.raises(pp.PartitionError) as info:
        _partition(every_layer_custom_vjp_mlp, mesh)
    message = str(info.value)
    assert message.startswith(f"{__file__}:{_line_of(_layer_fwd, 'custom_vjp forward')}:"), message
    assert "a stage marker has no backward counterpart: the step's gradient crosses 0 " in message
    assert "(in '_layer_fwd')" in message
    assert "jaxpp_mlir.mark_stage_end_backward" in message
    assert "follows the last stage marker" not in message


def test_custom_vjp_with_backward_marker_matches_jit(mesh):
    model = _custom_vjp_mlp(_layer_with_backward_marker)
    program, caught = _partition(model, mesh, strict=True)
    assert program.num_stages == 4 and caught == []
    got = program.compile()(WEIGHTS, BATCH)
    want = jax.jit(_step(model))(WEIGHTS, BATCH)
    toolkit.assert_matches_reference(got, want, toolkit.SEPARATE_PROGRAMS)


def test_dead_marker_warns_at_its_line(mesh):
    program, caught = _partition(dead_marker_mlp, mesh)
    line = _line_of(dead_marker_mlp, "DEAD MARKER")
    assert program.num_stages == 3
    assert len(caught) == 1
    assert caught[0].lineno == line and caught[0].filename.endswith("test_marker_consistency.py")
    assert "no longer bound a stage: JAX removed them because their result is unused" in str(
        caught[0].message
    )


def test_parallel_markers_end_a_stage_each_as_in_jaxpp(mesh):
    program, caught = _partition(parallel_markers_mlp, mesh)
    assert program.num_stages == 4
    assert not caught


def test_parallel_markers_merged_on_request_warn_that_they_merge(mesh):
    program, caught = _partition(parallel_markers_mlp, mesh, merge_parallel_markers=True)
    assert program.num_stages == 3
    assert [w.lineno for w in caught] == [_line_of(parallel_markers_mlp, "PARALLEL A")]
    message = str(caught[0].message)
    assert "do not depend on each other, so they end the same stage (0)" in message
    assert "NVIDIA JaxPP makes one stage per marker" in message
    assert f":{_line_of(parallel_markers_mlp, 'PARALLEL B')}:" in message


@pytest.mark.parametrize(
    ("model", "options"),
    [(dead_marker_mlp, {}), (parallel_markers_mlp, {"merge_parallel_markers": True})],
)
def test_strict_turns_warnings_into_errors(mesh, model, options):
    with pytest.raises(pp.PartitionError, match="strict=True"):
        pp.partition(_lower(model), mesh=mesh, strict=True, **options)


def test_backward_marker_in_forward_code_is_a_located_error(mesh):
    with pytest.raises(pp.PartitionError, match="backward-direction stage marker in forward code"):
        _partition(backward_marker_in_forward_mlp, mesh)


@pytest.mark.parametrize("with_loss", [True, False], ids=["value_and_grad", "grad"])
def test_backward_marker_bound_in_forward_code_is_a_located_error(mesh, with_loss):
    """No forward marker depends on it: its location says autodiff did not place it
    (issue 37: the step ran with one stage less)."""
    lowered = _lower(stray_backward_marker_mlp, with_loss=with_loss)
    with pytest.raises(pp.PartitionError) as info:
        pp.partition(lowered, mesh=mesh)
    message = str(info.value)
    assert message.startswith(f"{__file__}:{_line_of(stray_backward_marker_mlp, 'STRAY')}:")
    assert "backward-direction stage marker in forward code: it was bound outside every" in message


def test_backward_marker_in_a_forward_only_step_is_a_located_error(mesh):
    def step(params, batch):
        forward = lambda mb: stray_backward_marker_mlp(params, mb[0])  # noqa: E731
        return pp.treduce(forward, batch, operation=pp.Add)

    with pytest.raises(pp.PartitionError, match="backward-direction stage marker in forward code"):
        pp.partition(jax.jit(step).lower(WEIGHTS, BATCH), mesh=mesh)


def test_old_marker_placement_says_the_last_marker_is_missing(mesh):
    """Four stages asked for, three markers written, a layer after the last: the old
    placement (markers at the start of stages 1..n-1)."""
    with pytest.raises(pp.PartitionError) as info:
        _partition(old_placement_mlp, mesh, schedule=pp.Std1F1B(4))
    message = str(info.value)
    assert "the last stage's marker is missing: the schedule has 4 stages" in message
    assert "add pipeline_enter_stage after the last layer" in message


def test_layer_after_the_last_marker_without_a_stage_count_warns_of_an_idle_rank(mesh):
    """No schedule says how many stages: the layer runs in the last stage; on a mesh of
    one rank more than markers (the old placement's sign), with a warning."""
    program, caught = _partition(old_placement_mlp, mesh)
    assert program.num_stages == 3
    assert [str(w.message).split(": ", 1)[1] for w in caught if "follows" in str(w.message)] == [
        "warning: a layer ('stablehlo.dot_general' at "
        f"{__file__}:{_line_of(old_placement_mlp, 'x = jnp.tanh(x @ w)')}:"
        f"{_column_of(old_placement_mlp, 'x = jnp.tanh(x @ w)', 'x @ w')}) follows the last "
        "stage marker: it runs in the last stage (2), as in JaxPP, and 1 of the mesh's 4 ranks "
        "gets no stage. If the markers are at the start of stages 1..n-1 (JaxPP's old "
        "placement), add one after the last layer"
    ]


@pytest.mark.parametrize("schedule", [None, pp.Std1F1B(2)], ids=["one-per-marker", "merged"])
def test_layer_after_the_last_marker_is_jaxpps_placement_without_a_warning(schedule):
    """A head after the last of N markers runs in the last stage: with N stages, or fewer
    stages of merged segments (issue 35 item 4), nothing is said."""
    program, caught = _partition(old_placement_mlp, toolkit.make_mesh(3), schedule=schedule)
    assert program.num_stages == (3 if schedule is None else 2)
    assert caught == []


@pytest.mark.parametrize("model", [debug_print_mlp, pure_callback_mlp])
def test_host_callback_in_a_stage_is_refused_at_its_line(mesh, model):
    with pytest.raises(pp.PartitionError) as info:
        _partition(model, mesh)
    message = str(info.value)
    assert "a host callback (jax.debug.print, jax.pure_callback" in message
    assert f"test_marker_consistency.py:{_line_of(model, '# CALLBACK')}:" in message


# ------------------------------------------------------------- saved, edited IR


@pytest.fixture(scope="module")
def saved_text():
    return _lower(marked_mlp).as_text(debug_info=True)


def _edited(text, edit):
    module = ir_context.parse_module(text)
    backward = [
        op
        for op in ir_utils.walk(module.operation)
        if jaxpp.is_stage_marker(op) and jaxpp.marker_direction(op) == jaxpp.BACKWARD
    ]
    assert len(backward) == 4
    with module.context, ir.Location.unknown():
        edit(backward)
    return module.operation.get_asm(enable_debug_info=True)


def _flip_first(backward):
    jaxpp.set_marker_direction(backward[0], jaxpp.FORWARD)


def _remove(index):
    def edit(backward):
        op = backward[index]
        for result, operand in zip(op.results, op.operands, strict=True):
            result.replace_all_uses_with(operand)
        op.erase()

    return edit


def test_saved_module_with_flipped_direction_is_refused(mesh, saved_text):
    with pytest.raises(pp.PartitionError, match="marked forward .'fwd'. but autodiff placed it"):
        pp.partition(_edited(saved_text, _flip_first), mesh=mesh)


@pytest.mark.parametrize("index", [0, 1, 3])
def test_saved_module_without_a_backward_marker_is_refused(mesh, saved_text, index):
    with pytest.raises(pp.PartitionError) as info:
        pp.partition(_edited(saved_text, _remove(index)), mesh=mesh)
    message = str(info.value)
    assert "a stage marker has no backward counterpart" in message
    assert "3 backward marker(s) for 4 forward marker(s)" in message
    assert f"stage {3 - index}" in message  # the stage whose backward marker was removed


def test_treduce_inside_cond_is_blamed_on_the_users_line(mesh):
    def loss(params, x):
        for w in params[:2]:
            x = pp.pipeline_enter_stage(jnp.tanh(x @ w))
        return jnp.mean(x)

    def step(params, batch, flag):
        def pipelined():
            body = lambda mb: jax.value_and_grad(loss)(params, mb)  # noqa: E731
            return pp.treduce(body, batch, operation=(pp.Add, pp.Add))  # TREDUCE IN COND

        def skipped():
            return jnp.zeros(()), [jnp.zeros_like(w) for w in params]

        return jax.lax.cond(flag, pipelined, skipped)

    lowered = jax.jit(step).lower(WEIGHTS, BATCH[0], True)
    with pytest.raises(pp.PartitionError) as info:
        pp.partition(lowered, mesh=mesh)
    message = str(info.value)
    line = _line_of(test_treduce_inside_cond_is_blamed_on_the_users_line, "TREDUCE IN COND")
    assert message.startswith(f"{__file__}:{line}:"), message
    assert "treduce inside other control flow is not supported" in message
    assert "treduce.py" not in message


def test_module_printed_without_debug_info_gives_no_spurious_dead_marker_warning(mesh):
    # Without debug info the markers' locations are lines of the text, not the traced ones.
    program = pp.partition(_lower(marked_mlp).as_text(), mesh=mesh, strict=True)
    assert program.num_stages == 4
