"""The plan builder package: modules emitted once, loop units read from attributes,
one dtype table, stages found by attribute."""

from __future__ import annotations

import collections
import re

import jax
import jax.numpy as jnp
import pytest
import toolkit
from jax.extend.mlir import ir
from jaxpp_mlir.runtime import dtypes
from jaxpp_mlir.runtime.multiprocess import collectives
from jaxpp_mlir.runtime.plan import TensorSpec

import jaxpp_mlir as pp
from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.errors import PartitionError
from jaxpp_mlir.ir_context import parse_module
from jaxpp_mlir.plan import build_plan, emission, tensor_spec

NUM_STAGES = 4
NUM_MICROBATCHES = 4


def _step(params, xs):
    def loss(params, x):
        for w in params:
            x = pp.pipeline_enter_stage(jnp.tanh(x @ w))
        return jnp.mean(x**2)

    losses, grads = pp.treduce(
        lambda x: jax.value_and_grad(loss)(params, x), xs, operation=(pp.Concat(), pp.Add)
    )
    return [p - 0.1 * g for p, g in zip(params, grads, strict=True)], losses


def _inputs():
    params = [toolkit.normal((8, 8), seed=s, scale=0.5) for s in range(NUM_STAGES)]
    xs = toolkit.normal((NUM_MICROBATCHES, 2, 8), seed=100)
    return params, xs


@pytest.fixture(scope="module")
def lowered():
    params, xs = _inputs()
    return jax.jit(_step, donate_argnums=0).lower(params, xs)


@pytest.fixture(scope="module")
def emitted(lowered):
    """The program partitioned with a fusing schedule, and every module emission made."""
    calls: list[str] = []
    standalone, fused = emission.standalone_module, emission.fused_module

    def count_standalone(module, callee, aliases=None):
        calls.append(callee)
        return standalone(module, callee, aliases)

    def count_fused(module, callees, wiring, input_types, aliases=None, kept=None):
        calls.append("fused__" + "__".join(callees))
        return fused(module, callees, wiring, input_types, aliases, kept)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(emission, "standalone_module", count_standalone)
        patch.setattr(emission, "fused_module", count_fused)
        program = pp.partition(
            lowered, mesh=toolkit.make_mesh(2), schedule=pp.Interleaved1F1B(NUM_STAGES, 2)
        )
    return program, calls


def test_every_module_is_emitted_once(emitted):
    program, calls = emitted
    executables = program.plan.executables
    fused = [name for name, e in executables.items() if e.fused_parts]
    aliased = [name for name, e in executables.items() if "tf.aliasing_output" in e.mlir_module]
    assert fused, "the schedule fuses tasks: the fused path must be exercised"
    assert aliased, "the parameters are donated: the aliasing path must be exercised"
    # A fused executable's name may carry a wiring suffix (__v2); count by callees.
    emitted_names = collections.Counter(calls)
    assert max(emitted_names.values()) == 1, emitted_names
    expected = {re.sub(r"__v\d+$", "", name) for name in executables} | set(program.stage_modules)
    assert set(emitted_names) == expected
    assert len(calls) == len(expected)


def test_stage_modules_are_the_plan_modules(emitted):
    program, _ = emitted
    for name, text in program.stage_modules.items():
        if name in program.plan.executables:
            assert program.plan.executables[name].mlir_module == text


def test_stage_ir_selects_by_the_stage_attribute_without_outer_tasks(emitted):
    program, _ = emitted
    module = parse_module(program.ir())
    with module.context:
        tasks = [op.operation for op in _walk_tasks(module)]
        kinds_of_stage_0 = sorted(jaxpp.get_kind(t) for t in tasks if jaxpp.get_stage(t) == 0)
    # Stage 0 numbers its forward and backward and also the code before the loop.
    assert "pre" in kinds_of_stage_0 and "fwd" in kinds_of_stage_0
    text = program.stage_ir(0)
    assert text.count("func.func public @main") == 2  # forward and backward only
    assert "jaxpp" not in text


def test_a_loop_transfer_without_its_task_is_rejected(emitted):
    program, _ = emitted
    module = parse_module(program.ir())
    with module.context:
        loop = next(op for op in _main_ops(module) if jaxpp.is_loop(op))
        recv = next(op.operation for op in jaxpp.loop_body(loop).operations if jaxpp.is_recv(op))
        del recv.attributes[jaxpp.FOR_TASK_ATTR]
    with pytest.raises(PartitionError, match=r"jaxpp\.recv .* does not name its task"):
        build_plan(module, num_ranks=2, schedule=pp.Interleaved1F1B(NUM_STAGES, 2))


def test_a_loop_transfer_naming_a_missing_task_is_rejected(emitted):
    program, _ = emitted
    module = parse_module(program.ir())
    with module.context:
        loop = next(op for op in _main_ops(module) if jaxpp.is_loop(op))
        send = next(op.operation for op in jaxpp.loop_body(loop).operations if jaxpp.is_send(op))
        jaxpp.set_for_task(send, 99, jaxpp.FORWARD)
    with pytest.raises(PartitionError, match="fwd task of stage 99"):
        build_plan(module, num_ranks=2, schedule=pp.Interleaved1F1B(NUM_STAGES, 2))


DTYPES = sorted(dtypes.ELEMENT_TYPES)


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_dtype_table_agrees_with_jax_lowering(dtype):
    """jax's own lowering is the oracle: the element type it prints for ``dtype`` is the
    table's, and the plan reads it back as ``dtype``."""
    with jax.enable_x64(True):  # 64-bit types lower as such
        arg = jax.ShapeDtypeStruct((2, 3), jnp.dtype(dtype))
        text = jax.jit(lambda x: x).lower(arg).as_text()
    element = re.search(r"%arg0: tensor<2x3x(complex<\w+>|\w+)>", text).group(1)
    assert dtypes.element_type(dtype) == element
    # The transfer modules, built with the bindings, type their values as jax does.
    module = collectives.permute_module([TensorSpec((2, 3), dtype)], 1)
    assert f"(%arg0: tensor<2x3x{element}>) -> tensor<2x3x{element}>" in module
    with parse_module("module {}").context:
        spec = tensor_spec(ir.Type.parse(f"tensor<2x3x{element}>"))
    assert spec == TensorSpec((2, 3), dtype)


def test_an_unsupported_element_type_is_named():
    with parse_module("module {}").context:
        with pytest.raises(PartitionError, match="unsupported element type f8E4M3FN"):
            tensor_spec(ir.Type.parse("tensor<2xf8E4M3FN>"))


def _main_ops(module: ir.Module) -> list[ir.Operation]:
    main = ir.SymbolTable(module.operation)["main"]
    return [op.operation for op in main.regions[0].blocks[0].operations]


def _walk_tasks(module: ir.Module):
    for op in _main_ops(module):
        if jaxpp.is_task(op):
            yield op
        elif jaxpp.is_loop(op):
            yield from (o for o in jaxpp.loop_body(op).operations if jaxpp.is_task(o))


def test_each_executable_carries_the_flop_estimate_of_its_module(emitted):
    """``StageExecutable.flops`` (which orders compiles on GPUs) is the planner's estimate
    of the module the executable runs, a fused one's the sum of its parts' modules; a
    backward costs more than its forward (two products per forward product)."""
    from jaxpp_mlir.setup_advice import estimate_flops

    program, _ = emitted
    executables = program.plan.executables
    assert any(e.fused_parts for e in executables.values())
    for name, executable in executables.items():
        texts = [program.stage_modules[part] for part in executable.fused_parts]
        expected = sum(map(estimate_flops, texts or [executable.mlir_module]))
        assert executable.flops == pytest.approx(expected), name
    forward, backward = executables["stage0_fwd"].flops, executables["stage0_bwd"].flops
    assert 0 < forward < backward
