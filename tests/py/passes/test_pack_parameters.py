"""jaxpp-pack-parameters end to end: fewer buffers per launch, same numbers.

Two 2-stage models trained one step with a treduce over 4 microbatches: the
biased-layers MLP (2 layers per stage, float32 weights and biases) and a model
whose stages mix float32 and bfloat16 parameters of different shapes (a
scalar among them, so some rows are one element wide). With
``JAXPP_MLIR_PACK_PARAMETERS=1`` (and with ``JAXPP_MLIR_PACK_ACCUMULATORS=1``
as well) each stage's tasks read its parameters from packed buffers, and the
step equals plain ``jax.jit`` of the same step written with ``lax.scan`` bit for
bit under GPipe, 1F1B, interleaved 1F1B (both stages on one rank) and ZeroBubble.
Two stages, not more: packing is per stage, and every further stage is more
modules to compile.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import toolkit
from toolkit import make_mesh

import jaxpp_mlir as pp
from jaxpp_mlir import partition_options

# Compares numbers with plain jax.jit or between runs: CI runs it under capped ISAs too.
pytestmark = pytest.mark.numerics

NUM_STAGES, LAYERS_PER_STAGE, WIDTH, NUM_MICROBATCHES = 2, 2, 8, 4
NUM_LAYERS = NUM_STAGES * LAYERS_PER_STAGE

SCHEDULES = {
    "GPipe": (pp.GPipe(NUM_STAGES), NUM_STAGES),
    "Std1F1B": (pp.Std1F1B(NUM_STAGES), NUM_STAGES),
    "Interleaved1F1B": (pp.Interleaved1F1B(NUM_STAGES, 1), 1),
    "ZeroBubble": (pp.ZeroBubble(NUM_STAGES), NUM_STAGES),  # the backward split in two
}
PACKINGS = {
    "parameters": {partition_options.PACK_PARAMETERS.env: "1"},
    "biases": {partition_options.PACK_PARAMETERS.env: "2"},  # not the operands of contractions
    "parameters+accumulators": {
        partition_options.PACK_PARAMETERS.env: "1",
        partition_options.PACK_ACCUMULATORS.env: "1",
    },
}


shared_stage_compiles = toolkit.stage_compiles_shared_by_file()


def _partition(lowered, schedule_name: str, packing: dict[str, str]) -> pp.PartitionedProgram:
    schedule, mpmd_dim = SCHEDULES[schedule_name]
    with pytest.MonkeyPatch.context() as patch:
        for name in (
            partition_options.PACK_PARAMETERS.env,
            partition_options.PACK_ACCUMULATORS.env,
        ):
            patch.delenv(name, raising=False)
        for name, value in packing.items():
            patch.setenv(name, value)
        return pp.partition(lowered, mesh=make_mesh(mpmd_dim), schedule=schedule)


# ------------------------------------------------------------ the biased-layers MLP


@pytest.fixture(scope="module")
def biased_inputs():
    return toolkit.biased_layers_inputs(NUM_LAYERS, WIDTH, NUM_MICROBATCHES, seed=11)


@pytest.fixture(scope="module")
def biased_lowered(biased_inputs):
    step = functools.partial(toolkit.biased_layers_sgd_step, layers_per_stage=LAYERS_PER_STAGE)
    return jax.jit(step).lower(*biased_inputs)


@pytest.mark.parametrize("packing", PACKINGS)
@pytest.mark.parametrize("schedule_name", SCHEDULES)
def test_biased_layers_equal_plain_jit_bit_for_bit(
    biased_lowered, biased_inputs, schedule_name, packing
):
    program = _partition(biased_lowered, schedule_name, PACKINGS[packing])
    expected = jax.jit(toolkit.biased_layers_scan_step)(*biased_inputs)
    toolkit.assert_matches_reference(
        program.compile()(*biased_inputs), expected, toolkit.SEPARATE_PROGRAMS
    )


def _stage_tasks(program: pp.PartitionedProgram, kind: str) -> dict[int, object]:
    return {s: program.plan.executables[f"stage{s}_{kind}"] for s in range(NUM_STAGES)}


def test_forward_tasks_read_one_packed_buffer_instead_of_each_parameter(biased_lowered):
    unpacked = _partition(biased_lowered, "Std1F1B", {})
    packed = _partition(biased_lowered, "Std1F1B", PACKINGS["parameters"])
    # A stage's L weights (WIDTH rows each) and L biases (one row each), rows of WIDTH.
    packed_shape = (LAYERS_PER_STAGE * (WIDTH + 1), WIDTH)
    before, after = _stage_tasks(unpacked, "fwd"), _stage_tasks(packed, "fwd")
    for stage in range(NUM_STAGES):
        # Every forward reads all 2L parameters of its stage: 2L buffers become one.
        dropped = len(before[stage].input_specs) - len(after[stage].input_specs)
        assert dropped == 2 * LAYERS_PER_STAGE - 1, stage
        shapes = [s.shape for s in after[stage].input_specs]
        assert shapes.count(packed_shape) == 1, shapes
        assert (WIDTH, WIDTH) not in shapes and (WIDTH,) not in shapes, shapes


def test_without_contraction_operands_only_the_biases_are_packed(biased_lowered):
    unpacked = _partition(biased_lowered, "Std1F1B", {})
    packed = _partition(biased_lowered, "Std1F1B", PACKINGS["biases"])
    before, after = _stage_tasks(unpacked, "fwd"), _stage_tasks(packed, "fwd")
    for stage in range(NUM_STAGES):
        # The L biases (one row of WIDTH each) become one buffer; the weights stay.
        dropped = len(before[stage].input_specs) - len(after[stage].input_specs)
        assert dropped == LAYERS_PER_STAGE - 1, stage
        shapes = [s.shape for s in after[stage].input_specs]
        shapes_before = [s.shape for s in before[stage].input_specs]
        # (A microbatch's activations have the packed biases' shape too.)
        packed_shape = (LAYERS_PER_STAGE, WIDTH)
        assert shapes.count(packed_shape) == shapes_before.count(packed_shape) + 1, shapes
        assert (WIDTH,) not in shapes, shapes
        assert shapes.count((WIDTH, WIDTH)) == LAYERS_PER_STAGE, shapes


def test_with_packed_accumulators_no_task_passes_a_single_weight_or_bias(biased_lowered):
    program = _partition(biased_lowered, "Std1F1B", PACKINGS["parameters+accumulators"])
    packed_shape = (LAYERS_PER_STAGE * (WIDTH + 1), WIDTH)
    for stage, task in _stage_tasks(program, "bwd").items():
        shapes = [s.shape for s in task.input_specs]
        assert (WIDTH, WIDTH) not in shapes and (WIDTH,) not in shapes, (stage, shapes)
        # The packed parameters and the packed gradient accumulators (same layout).
        assert shapes.count(packed_shape) == 2, (stage, shapes)
        outputs = [s.shape for s in task.output_specs]
        assert (WIDTH, WIDTH) not in outputs and (WIDTH,) not in outputs, (stage, outputs)


def test_the_pass_is_off_by_default(biased_lowered):
    program = _partition(biased_lowered, "Std1F1B", {})
    for task in _stage_tasks(program, "fwd").values():
        assert [s.shape for s in task.input_specs].count((WIDTH, WIDTH)) == LAYERS_PER_STAGE


# ------------------------------------------------------------ mixed dtypes and shapes

# Stage s maps width WIDTHS[s] to WIDTHS[s + 1].
WIDTHS = (8, 6, 4)


def _mixed_params(seed: int) -> list[tuple[jax.Array, jax.Array, jax.Array]]:
    """Per stage: a float32 weight, a bfloat16 bias and a float32 scalar gain."""
    params = []
    for s in range(NUM_STAGES):
        fan_in, fan_out = WIDTHS[s], WIDTHS[s + 1]
        weight = toolkit.normal((fan_in, fan_out), seed=seed + 3 * s, scale=1 / np.sqrt(fan_in))
        bias = toolkit.normal((fan_out,), seed=seed + 3 * s + 1, scale=0.1, dtype=jnp.bfloat16)
        gain = jnp.asarray(1.0 + 0.1 * s, jnp.float32)
        params.append((weight, bias, gain))
    return params


def _mixed_loss(params, microbatch, *, markers: bool):
    x, y = microbatch
    for weight, bias, gain in params:
        x = gain * jnp.tanh(x @ weight + bias.astype(jnp.float32))
        if markers:
            x = pp.pipeline_enter_stage(x)
    return jnp.mean((x - y) ** 2)


def _mixed_update(params, grads):
    return jax.tree_util.tree_map(lambda p, g: (p - 0.1 * g).astype(p.dtype), params, grads)


def _mixed_treduce_step(params, xs, ys):
    loss, grads = pp.treduce(
        lambda mb: jax.value_and_grad(functools.partial(_mixed_loss, markers=True))(params, mb),
        (xs, ys),
        operation=pp.Add,
    )
    return _mixed_update(params, grads), loss


def _mixed_scan_step(params, xs, ys):
    def body(carry, microbatch):
        total, grads = carry
        value, g = jax.value_and_grad(functools.partial(_mixed_loss, markers=False))(
            params, microbatch
        )
        return (total + value, jax.tree_util.tree_map(jnp.add, grads, g)), None

    zeros = (jnp.zeros((), jnp.float32), jax.tree_util.tree_map(jnp.zeros_like, params))
    (total, grads), _ = jax.lax.scan(body, zeros, (xs, ys))
    return _mixed_update(params, grads), total


@pytest.fixture(scope="module")
def mixed_inputs():
    xs = toolkit.normal((NUM_MICROBATCHES, 2, WIDTHS[0]), seed=40)
    ys = toolkit.normal((NUM_MICROBATCHES, 2, WIDTHS[-1]), seed=41)
    return _mixed_params(seed=30), xs, ys


@pytest.fixture(scope="module")
def mixed_lowered(mixed_inputs):
    return jax.jit(_mixed_treduce_step).lower(*mixed_inputs)


@pytest.mark.parametrize("packing", PACKINGS)
@pytest.mark.parametrize("schedule_name", SCHEDULES)
def test_mixed_dtypes_equal_plain_jit_bit_for_bit(
    mixed_lowered, mixed_inputs, schedule_name, packing
):
    program = _partition(mixed_lowered, schedule_name, PACKINGS[packing])
    expected = jax.jit(_mixed_scan_step)(*mixed_inputs)
    toolkit.assert_matches_reference(
        program.compile()(*mixed_inputs), expected, toolkit.SEPARATE_PROGRAMS
    )


def test_mixed_dtypes_pack_per_element_type(mixed_lowered):
    unpacked = _partition(mixed_lowered, "Std1F1B", {})
    packed = _partition(mixed_lowered, "Std1F1B", PACKINGS["parameters"])
    before, after = _stage_tasks(unpacked, "fwd"), _stage_tasks(packed, "fwd")
    for stage in range(NUM_STAGES):
        # The float32 weight and gain share one buffer; the bfloat16 bias is alone in
        # its group and stays as it is.
        assert len(before[stage].input_specs) - len(after[stage].input_specs) == 1, stage
        fan_in, fan_out = WIDTHS[stage], WIDTHS[stage + 1]
        float32_shapes = [s.shape for s in after[stage].input_specs if s.dtype == "float32"]
        assert (fan_in * fan_out + 1, 1) in float32_shapes, float32_shapes
        assert (fan_in, fan_out) not in float32_shapes, float32_shapes
        bfloat16 = [s.shape for s in after[stage].input_specs if s.dtype == "bfloat16"]
        assert bfloat16 == [(fan_out,)], bfloat16
