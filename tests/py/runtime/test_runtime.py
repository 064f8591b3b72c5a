"""Tests of the runtime executor on execution plans built by hand from plain jax stages."""

from __future__ import annotations

import dataclasses
import gc

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import toolkit
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from jaxpp_mlir.runtime import (
    CompiledPlan,
    ExecutionPlan,
    InputBinding,
    OutputBinding,
    Recv,
    RunStage,
    Send,
    StageExecutable,
    TaskRef,
    TensorSpec,
    compile_plan,
)
from jaxpp_mlir.runtime.compilation import compile as rt_compile
from jaxpp_mlir.runtime.execution.pending_executable import PendingExecutable

from jaxpp_mlir.errors import CallError, MeshError, RuntimeFailure, ScheduleError

# Compares numbers with plain jax.jit or between runs: CI runs it under capped ISAs too.
pytestmark = pytest.mark.numerics

F32 = "float32"


def spec(shape: tuple[int, ...], dtype: str = F32) -> TensorSpec:
    return TensorSpec(tuple(shape), dtype)


def sds(s: TensorSpec, sharding=None) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(s.shape, np.dtype(s.dtype), sharding=sharding)


def stage(name: str, rank: int, fn, *in_specs: TensorSpec, **jit_kwargs) -> StageExecutable:
    """A standalone stage module lowered by plain jax (public ``@main``)."""
    shardings = jit_kwargs.pop("in_shardings", (None,) * len(in_specs))
    args = [sds(s, sh) for s, sh in zip(in_specs, shardings, strict=True)]
    text = jax.jit(fn, **jit_kwargs).lower(*args).as_text()
    outs = jax.eval_shape(fn, *args)
    outs = outs if isinstance(outs, tuple) else (outs,)
    out_specs = tuple(spec(o.shape, np.dtype(o.dtype).name) for o in outs)
    return StageExecutable(name, rank, text, tuple(in_specs), out_specs)


# --------------------------------------------------------------------- chain
# Values: inputs 0..5, then stage results and received copies.
X, W0, W1, W2, B, SCALE = range(6)
H0, H0_R1, H1, JUNK, H1_R2, Y, LOSS, O0, LOSS_R0 = range(6, 15)


def s0(x, w0):
    return jnp.tanh(x @ w0)


def s0_tail(h0, b):
    return h0 + b


def s1(h0, w1):
    return h0 @ w1, h0 * 2.0  # the second result is never used


def s2(h1, w2, b, scale):
    y = jnp.tanh(h1 @ w2) * scale + b
    return y, jnp.sum(y * y)


def reference(x, w0, w1, w2, b, scale):
    h0 = s0(x, w0)
    y, loss = s2(s1(h0, w1)[0], w2, b, scale)
    return y, loss, s0_tail(h0, b), loss


def chain_plan() -> ExecutionPlan:
    """3 ranks: rank 0 -> rank 1 -> rank 2, the loss back to rank 0; b lives on ranks 0 and 2."""
    mat, vec, scalar = spec((4, 8)), spec((8,)), spec(())
    w = spec((8, 8))
    exes = {
        "s0": stage("s0", 0, s0, mat, w),
        "s0_tail": stage("s0_tail", 0, s0_tail, mat, vec),
        "s1": stage("s1", 1, s1, mat, w),
        "s2": stage("s2", 2, s2, mat, w, vec, scalar),
    }
    inputs = (
        InputBinding(X, mat, (0,)),
        InputBinding(W0, w, (0,)),
        InputBinding(W1, w, (1,)),
        InputBinding(W2, w, (2,)),
        InputBinding(B, vec, (0, 2)),
        InputBinding(SCALE, scalar, (2,)),
    )
    instructions = (
        RunStage(0, "s0", (X, W0), (H0,), (TaskRef(0, "fwd", 0),)),
        Send(0, 1, 0, H0),
        Recv(1, 0, 0, H0_R1, mat),
        RunStage(1, "s1", (H0_R1, W1), (H1, JUNK), (TaskRef(1, "fwd", 0),)),
        Send(1, 2, 1, H1),
        Recv(2, 1, 1, H1_R2, mat),
        RunStage(2, "s2", (H1_R2, W2, B, SCALE), (Y, LOSS), (TaskRef(2, "fwd", 0),)),
        RunStage(0, "s0_tail", (H0, B), (O0,), (TaskRef(0, "post", None),)),
        Send(2, 0, 2, LOSS),
        Recv(0, 2, 2, LOSS_R0, scalar),
    )
    outputs = (
        OutputBinding(Y, 2, mat),
        OutputBinding(LOSS, 2, scalar),
        OutputBinding(O0, 0, mat),
        OutputBinding(LOSS_R0, 0, scalar),
    )
    return ExecutionPlan(3, exes, inputs, outputs, instructions)


def chain_args() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    shapes = [(4, 8), (8, 8), (8, 8), (8, 8), (8,)]
    return [rng.standard_normal(s).astype(np.float32) for s in shapes] + [np.float32(0.5)]


@pytest.fixture(scope="module")
def devices() -> list[jax.Device]:
    return jax.devices()


@pytest.fixture(scope="module")
def chain(devices) -> CompiledPlan:
    return compile_plan(chain_plan(), [[devices[0]], [devices[1]], [devices[2]]])


@pytest.fixture(scope="module")
def expected() -> list[np.ndarray]:
    return [np.asarray(a) for a in jax.jit(reference)(*chain_args())]


def test_chain_matches_jit(chain, expected):
    outs = chain(*chain_args())
    assert len(outs) == 4
    toolkit.assert_matches_reference(list(outs), expected, toolkit.SEPARATE_PROGRAMS)


def test_outputs_live_on_their_rank(chain, devices):
    outs = chain(*chain_args())
    owners = [2, 2, 0, 0]
    for out, rank in zip(outs, owners, strict=True):
        assert isinstance(out, jax.Array)
        assert out.devices() == {devices[rank]}
        assert out.committed


def test_input_on_two_ranks_and_device_arrays(chain, devices, expected):
    # b (input 4) is read on ranks 0 and 2; hand it over on rank 2 already, and x on device 5.
    args: list = list(chain_args())
    args[B] = jax.device_put(args[B], devices[2])
    args[X] = jax.device_put(args[X], devices[5])
    args[W0] = jnp.asarray(args[W0])  # uncommitted
    args[SCALE] = 0.5  # a python float for a float32 scalar
    outs = chain(*args)
    toolkit.assert_matches_reference(list(outs), expected, toolkit.SEPARATE_PROGRAMS)
    targets = {c.index: [t.devices for t in c.targets] for c in chain._inputs}
    assert targets[B] == [(devices[0],), (devices[2],)]


def test_plan_without_stages(devices):
    """Inputs passed straight through or moved to another rank come back committed."""
    mat = spec((4, 8))
    plan = ExecutionPlan(
        2,
        {},
        (InputBinding(0, mat, (0, 1)),),
        (OutputBinding(0, 1, mat), OutputBinding(1, 1, mat), OutputBinding(0, 0, mat)),
        (Send(0, 1, 7, 0), Recv(1, 0, 7, 1, mat)),
    )
    compiled = compile_plan(plan, [[devices[0]], [devices[1]]])
    x = jnp.arange(32, dtype=jnp.float32).reshape(4, 8)  # uncommitted, on device 0
    assert not x.committed
    outs = compiled(x)
    for out, rank in zip(outs, [1, 1, 0], strict=True):
        assert out.committed and out.devices() == {devices[rank]}
        np.testing.assert_array_equal(np.asarray(out), np.asarray(x))


def test_repr_and_executables(chain):
    text = repr(chain)
    assert "3 ranks" in text and "4 executables" in text and "10 instructions" in text
    assert "rank 1 on [cpu:1]: 1 run of s1" in text
    assert set(chain.executables) == {"s0", "s0_tail", "s1", "s2"}
    assert chain.executables["s2"].local_devices() == [jax.devices()[2]]


def test_second_call_does_not_compile(chain, expected):
    before = rt_compile.compile_count
    exes = dict(chain.executables)
    for _ in range(3):
        outs = chain(*chain_args())
    toolkit.assert_matches_reference(outs[0], expected[0], toolkit.SEPARATE_PROGRAMS)
    assert rt_compile.compile_count == before
    assert all(chain.executables[n] is e for n, e in exes.items())


def test_compile_counts_distinct_modules(devices):
    plan = chain_plan()
    # s1 again under a second name on rank 1: same text, same devices, one compilation.
    exes = dict(plan.executables)
    exes["s1_again"] = dataclasses.replace(exes["s1"], name="s1_again")
    instructions = (
        plan.instructions[:4]
        + (RunStage(1, "s1_again", (H0_R1, W1), (100, 101)),)
        + plan.instructions[4:]
    )
    plan = dataclasses.replace(plan, executables=exes, instructions=instructions)
    before = rt_compile.compile_count
    compiled = compile_plan(plan, [[devices[3]], [devices[4]], [devices[5]]])
    assert rt_compile.compile_count - before == 4 == compiled.num_compiled
    assert compiled.executables["s1_again"] is compiled.executables["s1"]
    outs = compiled(*chain_args())
    assert outs[0].devices() == {devices[5]}


def test_values_freed_after_last_use(chain):
    n = len(chain.plan.instructions)
    lu = chain.last_uses
    assert lu[(0, H0)] == 7  # sent at 1, read again by s0_tail at 7
    assert lu[(1, H1)] == 4  # its send
    assert lu[(1, JUNK)] == 3  # never read: dies where it is born
    assert lu[(2, H1_R2)] == 6
    assert lu[(0, B)] == 7 and lu[(2, B)] == 6
    assert lu[(2, LOSS)] == n and lu[(0, LOSS_R0)] == n

    slot = chain.dispatch.slot_of
    # Stop after the send of h1 (5 instructions): rank 1 has dropped h1 and the junk,
    # the channel holds h1, rank 0 still holds h0 for its tail.
    env: list = [None] * chain.dispatch.num_slots
    chain._run(chain_args(), env, stop=5)
    assert env[slot[(1, H1)]] is None and env[slot[(1, JUNK)]] is None
    assert env[slot[(1, H0_R1)]] is None and env[slot[(1, W1)]] is None
    assert env[slot[(0, H0)]] is not None
    # Left: h0 and b on rank 0; w2, b and scale on rank 2; h1 on its channel.
    assert sum(v is not None for v in env) == 6
    # A full run leaves only the outputs.
    env = [None] * chain.dispatch.num_slots
    chain._run(chain_args(), env)
    live = {i for i, v in enumerate(env) if v is not None}
    assert live == set(chain.dispatch.output_slots)


def test_no_leaked_arrays(chain):
    args = [jnp.asarray(a) for a in chain_args()]
    chain(*args)  # warm up
    gc.collect()
    before = len(jax.live_arrays())
    outs = chain(*args)
    jax.block_until_ready(outs)
    assert len(jax.live_arrays()) == before + len(outs)
    del outs
    gc.collect()
    assert len(jax.live_arrays()) == before


# -------------------------------------------------------------- call errors
def test_wrong_arg_count(chain):
    with pytest.raises(CallError, match="takes 6 arguments, but 5 were given"):
        chain(*chain_args()[:5])


@pytest.mark.parametrize(
    ("index", "bad", "message"),
    [
        (
            1,
            np.zeros((8, 4), np.float32),
            r"argument 1 has shape \(8, 4\) and dtype float32, "
            r"but the program expects shape \(8, 8\) and dtype float32",
        ),
        (
            2,
            np.zeros((8, 8), np.int32),
            r"argument 2 has shape \(8, 8\) and dtype int32, "
            r"but the program expects shape \(8, 8\) and dtype float32",
        ),
        (4, jnp.zeros((8,), jnp.float16), r"argument 4 has shape \(8,\) and dtype float16"),
        (0, [[1.0] * 8] * 4, r"argument 0 is a list; expected an array of shape \(4, 8\)"),
        (5, True, r"argument 5 is a python bool, but the program expects shape \(\) and dtype f"),
        (3, 1.0, r"argument 3 is a python float, but the program expects shape \(8, 8\)"),
    ],
)
def test_bad_argument(chain, index, bad, message):
    args: list = list(chain_args())
    args[index] = bad
    with pytest.raises(CallError, match=message):
        chain(*args)


def test_tracer_argument(chain):
    with pytest.raises(CallError, match="argument 0 is a tracer"):
        jax.jit(lambda x: chain(x, *chain_args()[1:]))(chain_args()[0])


def test_deleted_argument(chain, devices):
    args: list = list(chain_args())
    args[W0] = jax.device_put(args[W0], devices[0])
    args[W0].delete()
    with pytest.raises(CallError, match="argument 1 is a deleted"):
        chain(*args)


class FailingExecutable:
    """Wraps a loaded executable; running it raises like a failing device would."""

    def __init__(self, exe):
        self.exe = exe

    def __getattr__(self, name):
        return getattr(self.exe, name)

    def execute_sharded(self, arrays):
        raise RuntimeError("INTERNAL: device lost")


def test_execution_failure_names_instruction(chain):
    exes = dict(chain.executables)
    exes["s1"] = FailingExecutable(exes["s1"])
    broken = CompiledPlan(chain.plan, chain.rank_devices, exes, chain.num_compiled)
    with pytest.raises(RuntimeFailure, match=r"run 's1' \(fwd_1__0\) on rank 1 failed: INTERNAL"):
        broken(*chain_args())


# The runtime modules that build IR, through jax's own bindings: the transfer programs, and
# the union programs that compile several stage programs as one.
BUILDS_IR = {("multiprocess", "collectives.py"), ("compilation", "merge.py")}
JAX_MLIR_BINDINGS = ("jax.extend.mlir", "jax.extend.mlir.dialects", "jax.interpreters.mlir")


def test_runtime_imports_no_passes():
    """The runtime depends on the plan's plain data, jax and the error types only; only
    the transfer and union programs are built as IR, with jax's MLIR bindings."""
    import ast
    import pathlib

    import jaxpp_mlir.runtime as runtime

    builders = []
    for path in pathlib.Path(runtime.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert not name.startswith("jaxpp_mlir") or name == "jaxpp_mlir.errors", path
                if "mlir" in name.replace("jaxpp_mlir", ""):
                    assert name in JAX_MLIR_BINDINGS and path.parts[-2:] in BUILDS_IR, (path, name)
                    builders.append(path.parts[-2:])
    assert set(builders) == BUILDS_IR


# -------------------------------------------------------------- plan errors
def test_wrong_rank_count(devices):
    with pytest.raises(MeshError, match="3 ranks, but devices were given for 2"):
        compile_plan(chain_plan(), [[devices[0]], [devices[1]]])


def test_recv_without_send(devices):
    plan = chain_plan()
    bad = dataclasses.replace(plan, instructions=plan.instructions[:1] + plan.instructions[2:])
    with pytest.raises(ScheduleError, match="waits on channel 0, but no send on it precedes it"):
        compile_plan(bad, [[devices[0]], [devices[1]], [devices[2]]])


def test_compile_failure_names_executable(devices):
    plan = chain_plan()
    exes = dict(plan.executables)
    exes["s1"] = dataclasses.replace(exes["s1"], mlir_module="module { func.func @main( }")
    with pytest.raises(RuntimeFailure, match="compiling executable 's1'"):
        compile_plan(dataclasses.replace(plan, executables=exes), [[d] for d in devices[:3]])


def test_dispatch_is_generated_while_the_programs_compile(devices, monkeypatch):
    """One device per rank: the dispatch code is built before the compiles are waited for,
    around stand-ins that the compiled executables then replace."""
    events = []
    start = rt_compile.start_plan_executables

    def started(*args, **kwargs):
        pending = start(*args, **kwargs)
        events.append("compiles started")
        result = pending.result

        def waited():
            events.append("compiles waited for")
            return result()

        pending.result = waited
        return pending

    build = CompiledPlan._build

    def built(self):
        events.append("dispatch built")
        build(self)

    monkeypatch.setattr(rt_compile, "start_plan_executables", started)
    monkeypatch.setattr(CompiledPlan, "_build", built)
    compiled = compile_plan(chain_plan(), [[d] for d in devices[:3]])
    assert events == ["compiles started", "dispatch built", "compiles waited for"]
    assert not any(isinstance(e, PendingExecutable) for e in compiled.executables.values())
    out = compiled(*chain_args())
    assert len(out) == len(chain_plan().outputs)


def test_a_stand_in_run_before_its_compile_names_it():
    stand_in = PendingExecutable("s1")
    with pytest.raises(RuntimeFailure, match="executable 's1' ran before its compile finished"):
        stand_in.execute_sharded([])
    with pytest.raises(RuntimeFailure, match="'s1' ran before"):
        stand_in.hlo_modules()


def test_spec_mismatch_with_module(devices):
    plan = chain_plan()
    exes = dict(plan.executables)
    exes["s0_tail"] = dataclasses.replace(exes["s0_tail"], output_specs=(spec((4, 8), "int32"),))
    with pytest.raises(RuntimeFailure, match="executable 's0_tail' output 0 is float32"):
        compile_plan(dataclasses.replace(plan, executables=exes), [[d] for d in devices[:3]])


# ------------------------------------------------------ several devices per rank
def test_two_device_ranks(devices):
    """Rank 0 (devices 0, 1) computes row-sharded; rank 1 (devices 2, 3) takes it
    row-sharded (batched copy) and replicated (a resharding move)."""
    mesh = Mesh(np.array(devices[:2]), ("x",))
    rows, rep = NamedSharding(mesh, PartitionSpec("x")), NamedSharding(mesh, PartitionSpec())
    mat, w = spec((4, 8)), spec((8, 8))

    def f1(h, r, w1):
        return jnp.tanh(h @ w1) + r[0]

    exes = {
        "a": stage("a", 0, s0, mat, w, in_shardings=(rows, rep), out_shardings=rows),
        "b": stage("b", 1, f1, mat, mat, w, in_shardings=(rows, rep, rep), out_shardings=rows),
    }
    plan = ExecutionPlan(
        2,
        exes,
        (InputBinding(0, mat, (0,)), InputBinding(1, w, (0,)), InputBinding(2, w, (1,))),
        (OutputBinding(6, 1, mat),),
        (
            RunStage(0, "a", (0, 1), (3,)),
            Send(0, 1, 0, 3),
            Send(0, 1, 1, 3),
            Recv(1, 0, 0, 4, mat),
            Recv(1, 0, 1, 5, mat),
            RunStage(1, "b", (4, 5, 2), (6,)),
        ),
    )
    compiled = compile_plan(plan, [devices[0:2], devices[2:4]])
    kinds = [op.kind for op in compiled.dispatch.ops]
    assert kinds == ["run", "send", "send", "reshard", "copy", "run"]
    x, w0, w1 = chain_args()[:3]
    (out,) = compiled(x, w0, w1)
    assert out.devices() == set(devices[2:4])
    h = s0(x, w0)
    want = np.asarray(f1(h, h, w1))
    toolkit.assert_matches_reference(out, want, toolkit.SEPARATE_PROGRAMS)
    # Device arrays laid out as needed (shard copy), elsewhere (resharding), non-contiguous.
    x_rows = jax.device_put(x, NamedSharding(mesh, PartitionSpec("x")))
    w1_one = jax.device_put(w1, devices[6])
    w0_t = np.asfortranarray(w0).T.T  # not C-contiguous
    assert not w0_t.flags.c_contiguous
    for args in [(x_rows, w0_t, w1_one), (jax.device_put(x, devices[7]), w0, w1)]:
        (again,) = compiled(*args)
        toolkit.assert_same_program(again, out)  # the same stage programs
