"""Loop-carried donation (issue 13): each task writes an accumulator's next version in place.

A backward task reads version m of each gradient accumulator and defines
version m + 1; where it reads version m last on its rank (for every microbatch
it runs), its module aliases the two (``tf.aliasing_output``) and the runtime
gives the buffer to the launch. Checked here: the aliases in the plan and in
the compiled executables (packed and unpacked accumulators), the donated
buffers consumed at run time and nothing else, the numbers equal to plain
``jax.jit`` bit for bit under three schedules, and the cases where a buffer
must not be consumed: a caller's buffer as the accumulator's start, a value
read again later, sent, or returned.
"""

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import toolkit
from jax.extend.mlir import ir
from jaxpp_mlir.runtime import plan as rt
from jaxpp_mlir.runtime.execution.arguments import place_arguments
from jaxpp_mlir.runtime.execution.executor import compile_plan
from jaxpp_mlir.runtime.instructions import run
from jaxpp_mlir.runtime.instructions.run import RunStage
from jaxpp_mlir.runtime.instructions.send import Send
from toolkit import make_mesh

import jaxpp_mlir as pp
from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.ir_context import parse_module
from jaxpp_mlir.plan import build_plan
from jaxpp_mlir.plan.donation import donation_aliases

# Compares numbers with plain jax.jit or between runs: CI runs it under capped ISAs too.
pytestmark = pytest.mark.numerics

NUM_STAGES, NUM_MICROBATCHES, WIDTH = 4, 4, 8
ALIAS = re.compile(r"tf\.aliasing_output = (\d+)")


shared_stage_compiles = toolkit.stage_compiles_shared_by_file()


# One layer (weight and bias) per stage.
_step = functools.partial(toolkit.biased_layers_sgd_step, layers_per_stage=1)


@pytest.fixture(scope="module")
def inputs():
    return toolkit.biased_layers_inputs(NUM_STAGES, WIDTH, NUM_MICROBATCHES, seed=5)


@pytest.fixture(scope="module")
def lowered(inputs):
    return jax.jit(_step).lower(*inputs)


@pytest.fixture(scope="module")
def expected(inputs):
    return jax.jit(_step)(*inputs)


def _partition(lowered, schedule, *, packed: bool, mpmd_dim: int = NUM_STAGES):
    """``lowered`` partitioned over ``mpmd_dim`` ranks, with jaxpp-pack-accumulators
    (``JAXPP_MLIR_PACK_ACCUMULATORS=1``) where ``packed``."""
    partition = toolkit.partition_with_packed_accumulators if packed else pp.partition
    return partition(lowered, mesh=make_mesh(mpmd_dim), schedule=schedule)


@pytest.fixture(scope="module")
def packed_std(lowered):
    return _partition(lowered, pp.Std1F1B(NUM_STAGES), packed=True)


def _aliases(text: str) -> dict[int, int]:
    """A module's argument -> the result it aliases."""
    module = parse_module(text)
    main = ir.SymbolTable(module.operation)["main"]
    if "arg_attrs" not in main.attributes:
        return {}
    aliases = {}
    for position, attrs in enumerate(ir.ArrayAttr(main.attributes["arg_attrs"])):
        attrs = ir.DictAttr(attrs)
        if "tf.aliasing_output" in attrs:
            aliases[position] = ir.IntegerAttr(attrs["tf.aliasing_output"]).value
    return aliases


# ------------------------------------------------------------ aliases in the plan


def test_packed_backward_tasks_alias_their_accumulator(packed_std):
    packed_shape = (WIDTH + 1, WIDTH)  # one weight (WIDTH rows) and one bias (1 row)
    for stage in range(NUM_STAGES):
        bwd = packed_std.plan.executables[f"stage{stage}_bwd"]
        position = bwd.input_specs.index(rt.TensorSpec(packed_shape, "float32"))
        output = bwd.output_specs.index(rt.TensorSpec(packed_shape, "float32"))
        assert _aliases(bwd.mlir_module) == {position: output}
    # The loss accumulator of the last stage's forward, in place too.
    last_fwd = packed_std.plan.executables[f"stage{NUM_STAGES - 1}_fwd"]
    scalar = rt.TensorSpec((), "float32")
    assert _aliases(last_fwd.mlir_module) == {
        last_fwd.input_specs.index(scalar): last_fwd.output_specs.index(scalar)
    }
    # Nothing else: the forwards of other stages carry no accumulator, and the
    # parameters are the caller's (not donated).
    for name, executable in packed_std.plan.executables.items():
        if name not in {f"stage{s}_bwd" for s in range(NUM_STAGES)} | {last_fwd.name}:
            assert not ALIAS.search(executable.mlir_module), name


def test_each_alias_pairs_an_accumulator_with_its_next_version(lowered):
    """Unpacked: every weight and bias accumulator of a backward task aliases the output
    that becomes the same accumulator's input in the next microbatch."""
    program = _partition(lowered, pp.Std1F1B(NUM_STAGES), packed=False)
    plan = program.plan
    for stage in range(NUM_STAGES):
        name = f"stage{stage}_bwd"
        aliases = _aliases(plan.executables[name].mlir_module)
        assert len(aliases) == 2  # the weight's and the bias's gradient
        runs = [i for i in plan.instructions if i.kind == run.KIND and i.executable == name]
        assert len(runs) == NUM_MICROBATCHES
        for before, after in zip(runs, runs[1:], strict=False):
            for position, output in aliases.items():
                assert after.inputs[position] == before.outputs[output]


def test_compiled_executables_alias_the_accumulator(packed_std):
    compiled = packed_std.compile()
    for stage in range(NUM_STAGES):
        name = f"stage{stage}_bwd"
        (position, _), *_ = _aliases(packed_std.plan.executables[name].mlir_module).items()
        exe = compiled.executable.executables[name]
        branch = getattr(exe, "branch", None)  # a member of a union program: its slot there
        if branch is not None:
            position = branch.parameters[position]
        header = exe.hlo_modules()[0].to_string().splitlines()[0]
        aliases = re.search(r"input_output_alias=\{ (.*) \}, entry", header)
        assert aliases and re.search(rf"\{{\d*\}}: \({position}, \{{\}}, may-alias\)", aliases[1])


def test_the_runtime_consumes_exactly_the_aliased_buffers(packed_std, inputs):
    """Dispatched op by op: after each backward run, its aliased inputs are deleted
    (donated to the launch) and its other inputs are alive."""
    compiled = packed_std.compile()
    plan_run = compiled.executable
    flat = compiled._flatten_inputs(inputs, {}) + list(compiled._index_arrays)
    env = [None] * plan_run.dispatch.num_slots
    place_arguments(flat, plan_run._inputs, env)
    runs = iter(inst for inst in packed_std.plan.instructions if inst.kind == run.KIND)
    checked = 0
    for op in plan_run.dispatch.ops:
        if op.kind != "run":
            op(env)
            continue
        inst = next(runs)
        aliases = _aliases(packed_std.plan.executables[inst.executable].mlir_module)
        arrays = [env[plan_run.dispatch.slot_of[(inst.rank, v)]] for v in inst.inputs]
        op(env)
        for position, array in enumerate(arrays):
            assert array.is_deleted() == (position in aliases), (inst.label, position)
        checked += bool(aliases)
    assert checked == NUM_STAGES * NUM_MICROBATCHES + NUM_MICROBATCHES
    assert not any(x.is_deleted() for x in jax.tree_util.tree_leaves(inputs))


# ------------------------------------------------------------ the numbers


SCHEDULES = {
    "Std1F1B": (pp.Std1F1B(NUM_STAGES), NUM_STAGES),
    "GPipe": (pp.GPipe(NUM_STAGES), NUM_STAGES),
    "Interleaved1F1B": (pp.Interleaved1F1B(NUM_STAGES, 2), 2),
}


@pytest.mark.parametrize("packed", [False, True], ids=["unpacked", "packed"])
@pytest.mark.parametrize("schedule_name", SCHEDULES)
def test_steps_equal_plain_jit(lowered, inputs, expected, schedule_name, packed):
    schedule, mpmd_dim = SCHEDULES[schedule_name]
    program = _partition(lowered, schedule, packed=packed, mpmd_dim=mpmd_dim)
    assert any(ALIAS.search(e.mlir_module) for e in program.plan.executables.values())
    compiled = program.compile()
    first = compiled(*inputs)
    toolkit.assert_matches_reference(first, expected, toolkit.SEPARATE_PROGRAMS)
    # The second call (the same programs) reuses nothing the first one consumed.
    toolkit.assert_same_program(compiled(*inputs), first)
    assert not any(x.is_deleted() for x in jax.tree_util.tree_leaves(inputs))


# ------------------------------------------------------------ where nothing is consumed


def _narrowing_loss(params, microbatch):
    x, y = microbatch
    for w in params:
        x = pp.pipeline_enter_stage(jnp.tanh(x @ w))
    return jnp.mean((x - y) ** 2)


def _accumulate(params, xs, ys, start):
    """``treduce``'s loop written out, the gradients summed onto ``start``."""

    def body(m, carry):
        loss, grads = carry
        value, g = jax.value_and_grad(_narrowing_loss)(params, (xs[m], ys[m]))
        return loss + value, [a + b for a, b in zip(grads, g, strict=True)]

    loss, grads = jax.lax.fori_loop(0, xs.shape[0], body, (jnp.zeros(()), start))
    return [p - 0.1 * g for p, g in zip(params, grads, strict=True)], loss


def _treduce_step(params, xs, ys):
    loss, grads = pp.treduce(
        lambda mb: jax.value_and_grad(_narrowing_loss)(params, mb), (xs, ys), operation=pp.Add
    )
    return [p - 0.1 * g for p, g in zip(params, grads, strict=True)], loss


def test_a_callers_buffer_as_the_accumulators_start_is_not_consumed():
    """The loop's start value of w1's gradient rewired to the caller's w1 (the only
    6x4 argument): the first backward run of stage 1 reads the caller's buffer, so its
    executable aliases nothing there (the alias would hold for every run); the other
    accumulators are still aliased, the caller's arrays stay alive, and the step sums
    the gradients onto w1 as plain jit does."""
    params = [
        toolkit.normal((8, 6), seed=20, scale=1 / 3),
        toolkit.normal((6, 4), seed=21, scale=1 / 3),
    ]
    xs = toolkit.normal((NUM_MICROBATCHES, 2, 8), seed=22)
    ys = toolkit.normal((NUM_MICROBATCHES, 2, 4), seed=23)
    program = pp.partition(jax.jit(_treduce_step).lower(params, xs, ys), mesh=make_mesh(2))
    module = parse_module(program.ir())
    with module.context:
        main = ir.SymbolTable(module.operation)["main"]
        block = main.regions[0].blocks[0]
        loop = next(op.operation for op in block.operations if jaxpp.is_loop(op))
        w1 = block.arguments[1]
        (start,) = [k for k, v in enumerate(loop.operands) if v.type == w1.type]
        loop.operands[start] = w1
    built = build_plan(module, num_ranks=2, schedule=pp.Std1F1B(2))
    bwd1 = built.plan.executables["stage1_bwd"]
    w1_grad = bwd1.input_specs.index(rt.TensorSpec((6, 4), "float32"))
    assert w1_grad not in _aliases(bwd1.mlir_module)
    assert _aliases(built.plan.executables["stage0_bwd"].mlir_module)  # w0's gradient
    devices = [[d] for d in jax.devices()[:2]]
    run = compile_plan(built.plan, devices)
    ours = run(*params, xs, ys, *run.place_constants())
    start_values = [jnp.zeros((8, 6)), params[1]]
    theirs = jax.jit(_accumulate)(params, xs, ys, start_values)
    toolkit.assert_matches_reference(ours, [*theirs[0], theirs[1]], toolkit.SEPARATE_PROGRAMS)
    assert not any(x.is_deleted() for x in (*params, xs, ys))


# The plan-level rule on hand-made instruction lists: "acc" executable runs per
# microbatch, reading version m (input 0) and defining version m + 1 (output 0).
SPEC = rt.TensorSpec((4,), "float32")
SPECS = {"acc": ((SPEC, SPEC), (SPEC,)), "init": ((), (SPEC,)), "read": ((SPEC,), (SPEC,))}
CARRIED = {10: 0, 11: 0, 12: 0}  # versions 0, 1, 2 of loop state 0


def _no_shardings(name):
    inputs, outputs = SPECS[name]
    return [None] * len(inputs), [None] * len(outputs)


def _accumulating(*extra: rt.Instruction, at: int = 3) -> list[rt.Instruction]:
    instructions = [
        RunStage(0, "init", (), (10,)),
        RunStage(0, "acc", (10, 1), (11,)),
        RunStage(0, "acc", (11, 2), (12,)),
    ]
    return instructions[:at] + list(extra) + instructions[at:]


def _aliases_of(instructions, outputs=((0, 12),), donated=frozenset()):
    return donation_aliases(
        instructions, donated, SPECS, _no_shardings, carried=CARRIED, outputs=outputs
    )


def test_the_rule_aliases_every_version_read_last():
    assert _aliases_of(_accumulating()) == {"acc": {0: 0}}


@pytest.mark.parametrize(
    "why, instructions, outputs",
    [
        ("read by a later task", _accumulating(RunStage(0, "read", (11,), (20,))), ((0, 12),)),
        ("sent to another rank", _accumulating(Send(0, 1, 0, 10), at=1), ((0, 12),)),
        ("returned by the step", _accumulating(), ((0, 12), (0, 11))),
        ("the caller's buffer", [RunStage(0, "acc", (0, 1), (11,))], ()),
        (
            "read twice by the task",
            [RunStage(0, "init", (), (10,)), *[RunStage(0, "acc", (10, 10), (11,))]],
            (),
        ),
    ],
)
def test_the_rule_consumes_no_buffer_that_lives_on(why, instructions, outputs):
    carried = {**CARRIED, 0: 0}  # in the caller's case, input 0 is version 0
    aliases = donation_aliases(
        instructions, frozenset(), SPECS, _no_shardings, carried=carried, outputs=outputs
    )
    assert "acc" not in aliases, why


def test_a_donated_program_input_is_consumed_by_its_last_reader():
    instructions = [RunStage(0, "read", (0,), (20,))]
    assert _aliases_of(instructions, outputs=(), donated=frozenset({0})) == {"read": {0: 0}}
    assert _aliases_of(instructions, outputs=(), donated=frozenset()) == {}


# ------------------------------------------------------------ after the loop, the plan's record


def test_the_update_after_the_loop_takes_the_final_accumulators_over(lowered):
    """Unpacked, each rank's update after the loop writes the new parameters into the
    final gradient accumulators' buffers (read there last), never the caller's; every
    executable's ``aliases`` record is its module's ``tf.aliasing_output``."""
    plan = _partition(lowered, pp.Std1F1B(NUM_STAGES), packed=False).plan
    last_gradients = {
        value
        for inst in plan.instructions
        if inst.kind == run.KIND
        and any(task.microbatch == NUM_MICROBATCHES - 1 for task in inst.tasks)
        for value in inst.outputs
    }
    posts = [i for i in plan.instructions if i.kind == run.KIND and i.tasks[0].kind == jaxpp.POST]
    assert len(posts) == NUM_STAGES
    for inst in posts:
        aliases = plan.executables[inst.executable].aliases
        assert len(aliases) == 2  # the weight's and the bias's
        assert {inst.inputs[p] for p, _ in aliases} <= last_gradients
    for executable in plan.executables.values():
        assert dict(executable.aliases) == _aliases(executable.mlir_module)


SPEC16 = rt.TensorSpec((4,), "float32")  # 16 bytes
ARG16 = jax.ShapeDtypeStruct((4,), jnp.float32)
TEXTS = {
    "init": jax.jit(lambda: jnp.zeros(4, jnp.float32)).lower().as_text(),
    "acc": jax.jit(lambda x: x + 1, donate_argnums=0).lower(ARG16).as_text(),
    "read": jax.jit(lambda x: x * 2).lower(ARG16).as_text(),
}


def _two_step_plan(aliases: tuple[tuple[int, int], ...], *extra: rt.Instruction):
    """``init`` makes value 0, ``acc`` reads it and makes value 1 (in its buffer where
    ``aliases`` says so); value 1 is the program's output."""
    executables = {
        "init": rt.StageExecutable("init", 0, TEXTS["init"], (), (SPEC16,)),
        "acc": rt.StageExecutable("acc", 0, TEXTS["acc"], (SPEC16,), (SPEC16,), aliases),
        "read": rt.StageExecutable("read", 0, TEXTS["read"], (SPEC16,), (SPEC16,)),
    }
    instructions = (RunStage(0, "init", (), (0,)), RunStage(0, "acc", (0,), (1,)), *extra)
    return rt.ExecutionPlan(1, executables, (), (rt.OutputBinding(1, 0, SPEC16),), instructions)


def test_the_memory_model_counts_a_taken_over_buffer_once():
    from jaxpp_mlir.runtime.observation.memory import peak_bytes_per_rank

    assert peak_bytes_per_rank(_two_step_plan(())) == [32]  # input and output both live
    assert peak_bytes_per_rank(_two_step_plan(((0, 0),))) == [16]


def test_the_runtime_refuses_to_consume_a_value_read_later():
    """A plan whose run consumes a value another run reads after it is refused before
    anything runs (PJRT would otherwise hand the later run a deleted buffer)."""
    from jaxpp_mlir.runtime.errors import PlanError

    devices = [[jax.devices()[0]]]
    (out,) = compile_plan(_two_step_plan(((0, 0),)), devices)()
    np.testing.assert_array_equal(np.asarray(out), np.ones(4, np.float32))
    bad = _two_step_plan(((0, 0),), RunStage(0, "read", (0,), (2,)))
    with pytest.raises(PlanError, match=r"consumes input 0 \(value 0.*instruction 2 \(run 'read'"):
        compile_plan(bad, devices)
