"""jaxpp-split-stacked-values on a step in the form a layer scan split into stages takes.

The step is written in JAX so that the default pipeline's stage choice gives that form
without the loop split of a scan: each stage's layers are a ``lax.scan`` over a static
slice of the stacked parameter (one ``stablehlo.slice`` of the argument per stage, read
by that stage's forward and backward loops), and the stacked gradient is the
concatenation of the stages' pieces, summed by ``treduce``'s accumulator; after the loop,
``optax.clip_by_global_norm`` and ``optax.adamw``.

The pass's result is checked for its structure (chunks, pieces, assembled outputs), for
its numbers (the module after the pass, with each ``jaxpp.chunk`` read as a slice, each
``jaxpp.assemble`` as a concatenation and the microbatch loop unrolled, compiled by XLA,
against ``jax.jit`` of the step), and through the rest of the pipeline (only scalars cross
ranks after the loop). That programs without such slices are left unchanged is checked
on every captured module by tests/py/passes/test_pass_contracts.py.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.extend.mlir import ir
from jax.extend.mlir.dialects import stablehlo
from jaxpp_mlir.runtime.compilation.compile import compile_stage
from numerics import SEPARATE_PROGRAMS, assert_matches_reference

import jaxpp_mlir as pp
from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.ir_context import parse_module
from jaxpp_mlir.passes.choose_stages import ChooseStages
from jaxpp_mlir.passes.pipeline import make_element, run_pipeline
from jaxpp_mlir.passes.pipelines import default_pipeline
from jaxpp_mlir.passes.split_stacked_values import SplitStackedValues

LAYERS, WIDTH, STAGE_ROWS = 4, 4, (1, 3)  # uneven: stage 0 holds 1 layer, stage 1 holds 3


def _layer(x, w):
    return jnp.tanh(x @ w), None


def _loss(w0, w1, head, microbatch):
    x, y = microbatch
    x, _ = jax.lax.scan(_layer, x, w0)
    x = pp.pipeline_enter_stage(x)
    x, _ = jax.lax.scan(_layer, x, w1)
    return pp.pipeline_enter_stage(jnp.mean((x @ head - y) ** 2))


_OPTIMIZER = optax.chain(optax.clip_by_global_norm(0.5), optax.adamw(1e-2, weight_decay=0.1))


def _step(params, opt_state, batch, *, layer_dtype=jnp.float32):
    def microbatch(mb):
        w = params["w"].astype(layer_dtype)  # a cast of the whole stack, sliced after
        w0, w1 = w[: STAGE_ROWS[0]], w[STAGE_ROWS[0] :]
        grad = jax.value_and_grad(_loss, argnums=(0, 1, 2))
        loss, (g0, g1, g_head) = grad(w0, w1, params["head"], mb)
        g = jnp.concatenate([g0, g1]).astype(jnp.float32)  # the cast's transpose
        return loss, {"head": g_head, "w": g}

    losses, grads = pp.treduce(microbatch, batch)
    updates, opt_state = _OPTIMIZER.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, losses


# The step in f32, and with bf16 layers: the stages read their rows of a bf16 cast of
# the parameter and their bf16 gradient rows are cast back for the f32 accumulator.
STEPS = {
    "f32": _step,
    "bf16_layers": functools.partial(_step, layer_dtype=jnp.bfloat16),
}


def _inputs():
    keys = jax.random.split(jax.random.PRNGKey(3), 4)
    params = {
        "w": jax.random.normal(keys[0], (LAYERS, WIDTH, WIDTH)) / WIDTH,
        "head": jax.random.normal(keys[1], (WIDTH, 2)),
    }
    opt_state = _OPTIMIZER.init(params)
    # A step already taken, so the moments are not zeros.
    opt_state = jax.tree.map(lambda x: x + 0.01 if x.dtype == jnp.float32 else x + 1, opt_state)
    batch = (jax.random.normal(keys[2], (3, 2, WIDTH)), jax.random.normal(keys[3], (3, 2, 2)))
    return params, opt_state, batch


def _prefix(through: str) -> list:
    elements = default_pipeline(mpmd_dim=2)
    names = [e.name for e in elements]
    return elements[: names.index(through) + 1]


def staged_text(step: str = "f32") -> str:
    """The step's module once its stages are chosen (the pass's input), as text: for
    ``f32``, also the input of tests/lit/jaxpp-split-stacked-values/
    split_stacked_values_pipeline.mlir (``inputs/regenerate.py`` there writes it)."""
    module = parse_module(jax.jit(STEPS[step]).lower(*_inputs()).as_text())
    run_pipeline(module, _prefix(ChooseStages.name))
    return module.operation.get_asm()


@pytest.fixture(scope="module", params=sorted(STEPS))
def step(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def split_text(step) -> str:
    """The module after jaxpp-split-stacked-values, as text."""
    module = parse_module(staged_text(step))
    completed = {e.name for e in _prefix(ChooseStages.name) if e.jaxpp_pass is not None}
    run_pipeline(module, [make_element(SplitStackedValues())], completed=completed)
    return module.operation.get_asm()


def _outer_ops(module: ir.Module) -> list[ir.Operation]:
    return ir_utils.block_ops(ir_utils.body(ir_utils.find_main(module.operation)))


def test_stacked_arguments_become_chunks_and_outputs_assembles(split_text):
    module = parse_module(split_text)
    main = ir_utils.find_main(module.operation)
    ops = _outer_ops(module)
    chunks = [op for op in ops if jaxpp.is_chunk(op)]
    # w (read by the stages' loops), and its two Adam moments (read after the loop).
    by_argument = {}
    for chunk in chunks:
        by_argument.setdefault(ir.BlockArgument(chunk.operands[0]).arg_number, []).append(
            (jaxpp.chunk_rows(chunk), jaxpp.get_stage(chunk))
        )
    rows = [((0, STAGE_ROWS[0]), 0), ((STAGE_ROWS[0], STAGE_ROWS[1]), 1)]
    assert len(by_argument) == 3
    assert all(sorted(found) == rows for found in by_argument.values())
    assert ops[: len(chunks)] == chunks, "chunks are not at the top of @main"
    assembles = [op for op in ops if jaxpp.is_assemble(op)]
    assert len(assembles) == 3  # the new w and its two moments
    # No op reads or makes a whole stacked value but the chunks and the assembles: the
    # optimizer and the clipping run per piece.
    stacked = f"tensor<{LAYERS}x{WIDTH}x{WIDTH}x"  # of any element type
    for op in ops:
        if jaxpp.is_chunk(op) or jaxpp.is_assemble(op) or op.name == "func.return":
            continue
        values = [*ir_utils.operands_read(op), *op.results]
        whole = [v.type for v in values if str(v.type).startswith(stacked)]
        assert not whole, f"{op.name} reads or makes a whole {whole[0]}"
    loop = ir_utils.find_loop(main)
    body_slices = [op for op in ir_utils.walk(loop) if op.name == "stablehlo.slice"]
    assert not body_slices, "a stage still slices the whole parameter"


def test_after_the_loop_only_scalars_cross_ranks(split_text):
    module = parse_module(split_text)
    rest = default_pipeline(mpmd_dim=2)
    start = [e.name for e in rest].index(SplitStackedValues.name) + 1
    completed = {e.name for e in rest[:start] if e.jaxpp_pass is not None}
    run_pipeline(module, rest[start:], completed=completed)
    ops = _outer_ops(module)
    transfers = [op for op in ops if jaxpp.is_send(op) or jaxpp.is_recv(op)]
    assert transfers, "the global norm needs the partial sums of both ranks"
    for op in transfers:
        value = op.operands[0] if jaxpp.is_send(op) else op.results[0]
        assert ir.RankedTensorType(value.type).rank == 0, f"{op} moves a tensor"
    chunk_ranks = {jaxpp.get_rank(op) for op in ops if jaxpp.is_chunk(op)}
    assert chunk_ranks == {0, 1}


def _unrolled_plain_stablehlo(text: str) -> str:
    """The module with each chunk a slice, each assemble a concatenation and the
    microbatch loop unrolled: a program XLA compiles."""
    module = parse_module(text)
    with module.context, ir.Location.unknown():
        for op in _outer_ops(module):
            with ir.InsertionPoint(op):
                if jaxpp.is_chunk(op):
                    start, rows = jaxpp.chunk_rows(op)
                    shape = list(ir.RankedTensorType(op.operands[0].type).shape)
                    value = stablehlo.SliceOp(
                        op.operands[0],
                        ir.DenseI64ArrayAttr.get([start] + [0] * (len(shape) - 1)),
                        ir.DenseI64ArrayAttr.get([start + rows, *shape[1:]]),
                        ir.DenseI64ArrayAttr.get([1] * len(shape)),
                    ).result
                elif jaxpp.is_assemble(op):
                    value = stablehlo.ConcatenateOp(list(op.operands), 0).result
                elif jaxpp.is_loop(op):
                    _unroll(op)
                    continue
                else:
                    continue
            op.results[0].replace_all_uses_with(value)
            op.erase()
    return module.operation.get_asm()


def _unroll(loop: ir.Operation) -> None:
    body = jaxpp.loop_body(loop)
    body_ops = ir_utils.block_ops(body)
    states = list(loop.operands)
    for index in range(jaxpp.get_int_attr(loop, jaxpp.LOOP_NUM_MICROBATCHES_ATTR)):
        counter = ir.DenseElementsAttr.get(np.array(index, np.int32))
        mapping = {body.arguments[0]: stablehlo.ConstantOp(counter).result}
        mapping.update(zip(list(body.arguments)[1:], states, strict=True))
        for op in body_ops[:-1]:
            copy = op.clone(ip=ir.InsertionPoint(loop)).operation
            for nested in [copy, *ir_utils.walk(copy)]:
                operands = nested.operands
                for position in range(len(operands)):
                    if operands[position] in mapping:
                        operands[position] = mapping[operands[position]]
            mapping.update(zip(op.results, copy.results, strict=True))
        states = [mapping.get(value, value) for value in body_ops[-1].operands]
    for result, state in zip(loop.results, states, strict=True):
        result.replace_all_uses_with(state)
    loop.erase()


@pytest.mark.numerics
def test_split_step_computes_what_jax_jit_does(step, split_text):
    inputs = _inputs()
    expected = jax.jit(STEPS[step])(*inputs)
    device = jax.devices()[0]
    executable = compile_stage("split_step", _unrolled_plain_stablehlo(split_text), [device])
    arguments = [jax.device_put(leaf, device) for leaf in jax.tree.leaves(inputs)]
    outputs = executable.execute_sharded(arguments).disassemble_into_single_device_arrays()
    actual = jax.tree.unflatten(jax.tree.structure(expected), [out[0] for out in outputs])
    assert_matches_reference(actual, expected, SEPARATE_PROGRAMS)
