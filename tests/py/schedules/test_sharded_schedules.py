"""Sharded stages under schedules that fuse tasks, donation, and layout conflicts on a rank.

Every step is checked against plain ``jax.jit`` of the same step on the
lowering mesh.
"""

from __future__ import annotations

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import toolkit
from jax.extend.mlir import ir
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from jaxpp_mlir.runtime import (
    ExecutionPlan,
    InputBinding,
    OutputBinding,
    Recv,
    RunStage,
    Send,
    StageExecutable,
    TensorSpec,
    compile_plan,
)
from jaxpp_mlir.runtime.execution import codegen
from toolkit import mpmd_mesh
from transfer_layouts import unlaid_transfers

import jaxpp_mlir as pp
from jaxpp_mlir.ir_context import parse_module

# Compares numbers with plain jax.jit or between runs: CI runs it under capped ISAs too.
pytestmark = pytest.mark.numerics

NUM_STAGES = 4
NUM_MICROBATCHES = 4
MESH_222 = {"stage": 2, "data": 2, "model": 2}
MESH_42 = {"stage": 4, "data": 2}


shared_stage_compiles = toolkit.stage_compiles_shared_by_file()


def make_inputs(seed: int = 0):
    # As small as splits over the mesh axes (2 each) allow: XLA compiles narrower rows
    # faster (4 wide: 12% less than 8 for this file).
    seeds = iter(range(100 * seed, 100 * seed + 2 * NUM_STAGES + 2))
    params = [
        (
            toolkit.normal((4, 8), seed=next(seeds), scale=0.3),
            toolkit.normal((8, 4), seed=next(seeds), scale=0.3),
        )
        for _ in range(NUM_STAGES)
    ]
    shape = (NUM_MICROBATCHES, 4, 4)
    return params, (
        toolkit.normal(shape, seed=next(seeds)),
        toolkit.normal(shape, seed=next(seeds)),
    )


def make_step(constraints=None):
    """A 4-stage MLP training step; ``constraints[s]`` pins stage s's output layout."""

    def loss(params, microbatch):
        x, y = microbatch
        for s, (w_in, w_out) in enumerate(params):
            x = jnp.tanh(x @ w_in) @ w_out
            if constraints is not None:
                x = jax.lax.with_sharding_constraint(x, constraints[s])
            x = pp.pipeline_enter_stage(x)
        return jnp.mean((x - y) ** 2)

    def step(params, batch):
        losses, grads = pp.treduce(
            lambda mb: jax.value_and_grad(loss)(params, mb),
            batch,
            operation=(pp.Concat(), pp.Add),
        )
        new = [(a - 0.1 * ga, b - 0.1 * gb) for (a, b), (ga, gb) in zip(params, grads, strict=True)]
        return new, losses

    return step


def jitted_step(mesh: pp.MpmdMesh, *, tensor_parallel: bool, constraints=None):
    low = mesh.lowering_mesh()
    w_in, w_out = (P(None, "model"), P("model", None)) if tensor_parallel else (P(), P())
    params_sh = [(NamedSharding(low, w_in), NamedSharding(low, w_out))] * NUM_STAGES
    batch_sh = (NamedSharding(low, P(None, "data", None)),) * 2
    step = jax.jit(
        make_step(constraints),
        in_shardings=(params_sh, batch_sh),
        out_shardings=(params_sh, NamedSharding(low, P())),
    )
    params, batch = make_inputs()
    return step, jax.device_put(params, params_sh), jax.device_put(batch, batch_sh)


def leaves(tree) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


def main_shardings(text: str) -> tuple[list[str | None], list[str | None]]:
    """The ``sdy.sharding`` of each argument and each result of ``@main`` in ``text``."""
    module = parse_module(text)
    with module.context:
        main = ir.SymbolTable(module.operation)["main"]

        def shardings(key: str, count: int) -> list[str | None]:
            if key not in main.attributes:
                return [None] * count
            dicts = [ir.DictAttr(d) for d in ir.ArrayAttr(main.attributes[key])]
            return [str(d["sdy.sharding"]) if "sdy.sharding" in d else None for d in dicts]

        function_type = ir.FunctionType(main.attributes["function_type"].value)
        return (
            shardings("arg_attrs", len(function_type.inputs)),
            shardings("res_attrs", len(function_type.results)),
        )


# ------------------------------------------------------------ fused tasks


def _is_subsequence(items: list, sequence: list) -> bool:
    remaining = iter(sequence)
    return all(any(item == other for other in remaining) for item in items)


FUSED_CASES = [
    (MESH_222, True, pp.Interleaved1F1B(4, 2)),  # fuses the last stage's fwd and bwd
    (MESH_222, True, pp.DualPipeV(4, 2, fuse_overlapped=True)),  # fwd with bwd_i + bwd_w
    (MESH_42, False, pp.Interleaved1F1B(4, 4, fuse_steady_state=True)),
    (MESH_42, False, pp.ZeroBubble(4)),  # split backward, nothing fused
]


@functools.cache
def plain_step(shape: tuple[tuple[str, int], ...], tensor_parallel: bool):
    """The mesh, the jitted step, its placed inputs and its lowering: one per mesh shape
    and layout, shared by the schedules (jax.jit compiles the reference step once)."""
    mesh = mpmd_mesh(dict(shape))
    step, params, batch = jitted_step(mesh, tensor_parallel=tensor_parallel)
    return mesh, step, params, batch, step.lower(params, batch)


@pytest.mark.parametrize(
    ("shape", "tensor_parallel", "schedule"), FUSED_CASES, ids=lambda c: str(c)
)
def test_sharded_schedules_match_jax_jit(shape, tensor_parallel, schedule):
    mesh, step, params, batch, lowered = plain_step(tuple(shape.items()), tensor_parallel)
    program = pp.partition(lowered, mesh=mesh, schedule=schedule)
    # Every value sent between ranks has its layout in the plan (no key-value round).
    assert unlaid_transfers(program.plan) == []
    fused = [n for n, e in program.plan.executables.items() if e.fused_parts]
    assert bool(fused) == (not isinstance(schedule, pp.ZeroBubble))
    for name in fused:
        text = program.plan.executables[name].mlir_module
        assert "mhlo.num_partitions = 4" in text or shape is MESH_42
        assert "mhlo.num_partitions = 2" in text or shape is MESH_222
        assert "sdy.mesh @mesh" in text
        # Every argument and result carries the sharding of the part value it wires to.
        arguments, results = main_shardings(text)
        part_arguments, part_results = [], []
        for part in program.plan.executables[name].fused_parts:
            part_arguments_of, part_results_of = main_shardings(program.stage_modules[part])
            part_arguments += part_arguments_of
            part_results += part_results_of
        # A fused run returns only the part results read after it, in part order.
        assert None not in arguments and _is_subsequence(results, part_results)
        assert len(results) == len(program.plan.executables[name].output_specs)
        assert set(arguments) <= set(part_arguments)
    got = program.compile()(params, batch)
    # Each stage (fused or not) is a separate SPMD program: within rounding of jax.jit's.
    toolkit.assert_matches_reference(
        leaves(got), leaves(step(params, batch)), toolkit.SEPARATE_PROGRAMS
    )


@pytest.fixture(scope="module")
def constrained():
    """Stages that pin alternating layouts on their outputs (rows, then columns): with
    unannotated fused modules XLA picked the layouts of the fused results itself and the
    runtime failed ("needs value ... sharded as ...")."""
    mesh = mpmd_mesh(MESH_222)
    low = mesh.lowering_mesh()
    rows, cols = NamedSharding(low, P("data", None)), NamedSharding(low, P(None, "model"))
    step, params, batch = jitted_step(
        mesh, tensor_parallel=True, constraints=[rows, cols, rows, cols]
    )

    def run(schedule):
        program = pp.partition(step.lower(params, batch), mesh=mesh, schedule=schedule)
        assert unlaid_transfers(program.plan) == []
        return program, leaves(program.compile()(params, batch))

    return run, leaves(step(params, batch))


def test_fused_stages_keep_the_layouts_the_step_asks_for(constrained):
    run, expected = constrained
    program, fused = run(pp.Interleaved1F1B(4, 2))
    assert "fused__stage3_fwd__stage3_bwd" in program.plan.executables
    _, unfused = run(pp.DualPipeV(4, 2, split_backward=False))  # the same stages, no fusion
    for a, u, e in zip(fused, unfused, expected, strict=True):
        # Fusing changes nothing: bit for bit the unfused plan of the same stage programs.
        toolkit.assert_same_program(a, u)
        # Against jax.jit: the jitted step partitions stage 2's weight-gradient dot
        # (batch contracted, operands [data, model] x [-, model]) in its own way,
        # which sums in another order, fused or not.
        toolkit.assert_matches_reference(a, e, toolkit.SEPARATE_PROGRAMS)


# --------------------------------------------------------------- donation


def donation_step(params, xs):
    def loss(params, x):
        for w in params:
            x = pp.pipeline_enter_stage(jnp.tanh(x @ w))
        return jnp.mean(x**2)

    losses, grads = pp.treduce(
        lambda x: jax.value_and_grad(loss)(params, x), xs, operation=(pp.Concat(), pp.Add)
    )
    return [p - 0.1 * g for p, g in zip(params, grads, strict=True)], losses


@pytest.fixture(scope="module")
def donation():
    mesh = mpmd_mesh(MESH_222)
    low = mesh.lowering_mesh()
    cols, rows = NamedSharding(low, P(None, "model")), NamedSharding(low, P("model", None))
    params = [toolkit.normal((8, 8), seed=1), toolkit.normal((8, 8), seed=2, scale=0.5)]
    xs = toolkit.normal((NUM_MICROBATCHES, 4, 8), seed=3)
    return mesh, cols, rows, params, xs


@pytest.mark.parametrize("out_layout", ["same", "other"])
def test_donated_parameters_with_an_output_sharding(donation, out_layout):
    """Donated parameters whose new values are laid out as the old ones are updated in
    place; laid out otherwise (``out_shardings`` != ``in_shardings``) they are not
    aliased (XLA cannot update a buffer in place across layouts) and only freed."""
    mesh, cols, rows, params, xs = donation
    in_sh = [cols, cols]
    out_sh = in_sh if out_layout == "same" else [rows, rows]
    kwargs = {"in_shardings": (in_sh, None), "out_shardings": (out_sh, None)}
    step = jax.jit(donation_step, donate_argnums=0, **kwargs)
    reference = jax.jit(donation_step, **kwargs)  # the same step, nothing donated
    program = pp.partition(step.lower(jax.device_put(params, in_sh), xs), mesh=mesh)
    assert program.donated_inputs == frozenset({0, 1})
    aliased = {  # executables writing into a donated parameter's buffer (not an accumulator's)
        inst.executable
        for inst in program.plan.instructions
        if inst.kind == RunStage.kind
        for position, _ in program.plan.executables[inst.executable].aliases
        if inst.inputs[position] in program.donated_inputs
    }
    assert bool(aliased) == (out_layout == "same")
    for name in aliased:  # the alias keeps the argument's sharding
        assert re.search(
            r'sdy\.sharding = #sdy\.sharding<@mesh, \[\{\}, \{"model"\}\]>, tf\.aliasing_output',
            program.plan.executables[name].mlir_module,
        )
    compiled = program.compile()
    ours = jax.device_put(params, in_sh)
    theirs = jax.device_put(params, in_sh)
    for _ in range(3):
        donated = ours
        ours, losses = compiled(ours, xs)
        assert all(p.is_deleted() for p in donated)
        with pytest.raises(pp.CallError, match="deleted \\(or donated\\)"):
            compiled(donated, xs)
        theirs, expected_losses = reference(theirs, xs)
        toolkit.assert_matches_reference(
            leaves((ours, losses)), leaves((theirs, expected_losses)), toolkit.SEVERAL_STEPS
        )
        for stage, (p, sharding) in enumerate(zip(ours, out_sh, strict=True)):
            expected_sharding = NamedSharding(mesh.unstack[stage], sharding.spec)
            assert p.sharding.is_equivalent_to(expected_sharding, p.ndim)
        theirs = jax.device_put(theirs, in_sh)  # jax.jit takes only in_shardings-laid inputs


# ------------------------------------------------- two layouts of one value


def test_a_rank_reads_one_value_in_two_layouts():
    """Two runs on one 2-device rank want one value (a program input, and a received
    boundary value) in different layouts: the second layout is a reshard on the rank,
    made once and shared by every reader that wants it."""
    devices = jax.devices()
    mesh = Mesh(np.array(devices[:2]), ("x",))
    rows, cols = NamedSharding(mesh, P("x", None)), NamedSharding(mesh, P(None, "x"))
    mat = TensorSpec((4, 8), "float32")
    arg = jax.ShapeDtypeStruct((4, 8), np.float32)

    def stage(name: str, rank: int, fn, in_shardings, out_sharding) -> StageExecutable:
        shardings = in_shardings
        text = (
            jax.jit(fn, in_shardings=shardings, out_shardings=out_sharding)
            .lower(*[arg] * len(shardings))
            .as_text()
        )
        return StageExecutable(name, rank, text, (mat,) * len(shardings), (mat,))

    def f(a, b):
        return jnp.tanh(a) * 2.0 + b

    def g(a):
        return a * 3.0

    exes = {
        "rows": stage("rows", 0, f, (rows, rows), rows),
        "cols": stage("cols", 0, f, (cols, cols), cols),
        "cols_again": stage("cols_again", 0, g, (cols,), cols),
        "send": stage("send", 1, g, (rows,), cols),
    }
    # Input 0 on rank 0; input 1 on rank 1, sent to rank 0 as value 3.
    plan = ExecutionPlan(
        2,
        exes,
        (InputBinding(0, mat, (0,)), InputBinding(1, mat, (1,))),
        (OutputBinding(4, 0, mat), OutputBinding(5, 0, mat), OutputBinding(6, 0, mat)),
        (
            RunStage(1, "send", (1,), (2,)),
            Send(1, 0, 0, 2),
            Recv(0, 1, 0, 3, mat),
            RunStage(0, "rows", (0, 3), (4,)),  # fixes both layouts on rank 0: rows
            RunStage(0, "cols", (0, 3), (5,)),  # wants both as columns: two reshards
            RunStage(0, "cols_again", (0,), (6,)),  # reuses the column copy of input 0
        ),
    )
    compiled = compile_plan(plan, [devices[0:2], devices[2:4]])
    runs = [codegen.source(op) for op in compiled.dispatch.ops if op.kind == "run"]
    copies = sum(source.count(" = device_put(") for source in runs)
    assert copies == 2  # before "cols": one copy of input 0, one of value 3
    x = np.arange(32, dtype=np.float32).reshape(4, 8) / 10
    y = np.cos(np.arange(32, dtype=np.float32)).reshape(4, 8)
    for _ in range(2):
        out_rows, out_cols, out_again = compiled(x, y)
        sent = jax.jit(g)(y)
        # Two-device programs against one-device jax.jit: other vector widths per shard.
        toolkit.assert_matches_reference(out_rows, jax.jit(f)(x, sent), toolkit.SEPARATE_PROGRAMS)
        toolkit.assert_matches_reference(out_cols, jax.jit(f)(x, sent), toolkit.SEPARATE_PROGRAMS)
        toolkit.assert_matches_reference(out_again, jax.jit(g)(x), toolkit.SEPARATE_PROGRAMS)
        assert out_cols.devices() == set(devices[0:2])
    # The copies die after their last reader, like any value.
    assert compiled.last_uses[(0, 0)] == 4  # input 0 (rows) is last read to make its copy
