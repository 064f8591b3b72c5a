"""Union programs (``runtime/compilation/merge.py``, ``branch_executable.py``): several small
one-device stage programs compiled as one, each run as if compiled alone.

The member programs here compute on integers, so a member's results through the union
and compiled alone are equal exactly whatever XLA fuses; the pipelined models at the end
compare with plain ``jax.jit`` within the usual tolerance.
"""

import jax
import numpy as np
import pytest
import toolkit
from jaxpp_mlir.runtime.compilation import branch_executable, merge
from jaxpp_mlir.runtime.compilation import compile as runtime_compile
from jaxpp_mlir.runtime.plan import TensorSpec

import jaxpp_mlir as pp

V8 = TensorSpec((8,), "int32")
V4 = TensorSpec((4,), "int32")
M64 = TensorSpec((64, 64), "int32")

# a * b + 1 and the sum of a: two plain results of different types.
MUL_ADD = """
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%a: tensor<8xi32>, %b: tensor<8xi32>) -> (tensor<8xi32>, tensor<i32>) {
    %one = stablehlo.constant dense<1> : tensor<8xi32>
    %0 = stablehlo.multiply %a, %b : tensor<8xi32>
    %1 = stablehlo.add %0, %one : tensor<8xi32>
    %zero = stablehlo.constant dense<0> : tensor<i32>
    %2 = stablehlo.reduce(%a init: %zero) applies stablehlo.add across dimensions = [0]
      : (tensor<8xi32>, tensor<i32>) -> tensor<i32>
    return %1, %2 : tensor<8xi32>, tensor<i32>
  }
}
"""
# acc + helper(g): the accumulator donated to the result; a private function called.
ACCUMULATE = """
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func private @twice(%x: tensor<8xi32>) -> tensor<8xi32> {
    %0 = stablehlo.add %x, %x : tensor<8xi32>
    return %0 : tensor<8xi32>
  }
  func.func public @main(%g: tensor<8xi32>, %acc: tensor<8xi32> {tf.aliasing_output = 0 : i32})
      -> tensor<8xi32> {
    %0 = func.call @twice(%g) : (tensor<8xi32>) -> tensor<8xi32>
    %1 = stablehlo.add %acc, %0 : tensor<8xi32>
    return %1 : tensor<8xi32>
  }
}
"""
# The first 4 entries of a, negated: a parameter type of its own.
NEGATE_HEAD = """
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%a: tensor<8xi32>, %b: tensor<4xi32>) -> tensor<4xi32> {
    %0 = stablehlo.slice %a [0:4] : (tensor<8xi32>) -> tensor<4xi32>
    %1 = stablehlo.subtract %b, %0 : tensor<4xi32>
    return %1 : tensor<4xi32>
  }
}
"""
# Zeros of 64x64 (16 KiB): a plain result nobody else gives.
ZEROS = """
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main() -> tensor<64x64xi32> {
    %0 = stablehlo.constant dense<0> : tensor<64x64xi32>
    return %0 : tensor<64x64xi32>
  }
}
"""
CANDIDATES = {
    "mul_add": merge.Candidate("mul_add", MUL_ADD, (V8, V8), (V8, TensorSpec((), "int32")), ()),
    "accumulate": merge.Candidate("accumulate", ACCUMULATE, (V8, V8), (V8,), ((1, 0),)),
    "negate_head": merge.Candidate("negate_head", NEGATE_HEAD, (V8, V4), (V4,), ()),
}


def _ints(spec: TensorSpec, seed: int, device) -> jax.Array:
    values = np.random.default_rng(seed).integers(-50, 50, spec.shape, dtype=np.int32)
    return jax.device_put(values, device)


def _alone(candidate: merge.Candidate, device) -> jax.stages.Compiled:
    return runtime_compile.compile_stage(candidate.name, candidate.text, [device])


def _run(exe, arguments: list[jax.Array], device) -> list[np.ndarray]:
    sharding = jax.sharding.SingleDeviceSharding(device)
    handlers = None if isinstance(exe, branch_executable.BranchExecutable) else []
    if handlers is not None:  # a PJRT executable: one handler per result
        from jaxpp_mlir.runtime import _jax_compat as jc

        shape = jc.program_shape(exe).result_shape()
        shapes = shape.tuple_shapes() if shape.is_tuple() else [shape]
        handlers = [
            jc.result_handler(
                jax.core.ShapedArray(tuple(s.dimensions()), np.dtype(s.numpy_dtype())), sharding
            )
            for s in shapes
        ]
    return [np.asarray(r) for r in exe.execute_sharded(arguments).consume_with_handlers(handlers)]


def _one_union(candidates) -> merge.MergedProgram:
    """The one union of ``candidates``, however many results its members return beyond
    their own (the default limit splits unions by width: see the test of it)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(merge, "MAX_EXTRA_RESULTS", 100)
        (program,) = merge.plan_merges(candidates)
    return program


@pytest.fixture(scope="module")
def union():
    program = _one_union(list(CANDIDATES.values()))
    device = jax.devices()[1]
    exe = runtime_compile.compile_stage(program.name, program.text, [device])
    return program, branch_executable.UnionRun(program, exe, [device]), device


def test_every_member_runs_as_if_compiled_alone(union):
    program, run, device = union
    assert set(program.members) == {c.text for c in CANDIDATES.values()}
    assert program.name == "union(mul_add,accumulate,negate_head)"
    for seed, (name, candidate) in enumerate(CANDIDATES.items()):
        member = branch_executable.BranchExecutable(run, program.branches[candidate.text])
        for step in range(3):  # the donated slots handed back run after run
            arguments = [_ints(s, 10 * seed + step, device) for s in candidate.input_specs]
            expected = _run(_alone(candidate, device), list(arguments), device)
            arguments = [_ints(s, 10 * seed + step, device) for s in candidate.input_specs]
            got = _run(member, arguments, device)
            assert len(got) == len(candidate.output_specs), name
            for g, e, spec in zip(got, expected, candidate.output_specs, strict=True):
                assert g.shape == spec.shape and g.dtype == np.dtype(spec.dtype), name
                np.testing.assert_array_equal(g, e, err_msg=name)


def test_a_member_consumes_exactly_its_donated_arguments(union):
    program, run, device = union
    candidate = CANDIDATES["accumulate"]
    member = branch_executable.BranchExecutable(run, program.branches[candidate.text])
    g, acc = (_ints(V8, seed, device) for seed in (1, 2))
    expected = np.asarray(acc) + 2 * np.asarray(g)
    (result,) = member.execute_sharded([g, acc]).consume_with_handlers(None)
    np.testing.assert_array_equal(np.asarray(result), expected)
    assert acc.is_deleted() and not g.is_deleted()
    other = branch_executable.BranchExecutable(run, program.branches[MUL_ADD])
    a, b = (_ints(V8, seed, device) for seed in (3, 4))
    other.execute_sharded([a, b]).consume_with_handlers(None)
    assert not a.is_deleted() and not b.is_deleted() and not result.is_deleted()


def test_slots_are_shared_by_type_and_donated_slots_pass_through(union):
    program, _, _ = union
    # Parameters: the index, three plain 8-vectors (mul_add's two and accumulate's g
    # share two of them), one plain 4-vector, one donated 8-vector (accumulate's acc).
    assert program.parameters[0] == TensorSpec((), "int32")
    assert sorted(map(str, program.parameters[1:])) == sorted(
        ["int32[8]", "int32[8]", "int32[4]", "int32[8]"]
    )
    ((donated, returned),) = program.donated
    accumulate = program.branches[ACCUMULATE]
    assert accumulate.parameters[1] == donated and accumulate.results == (returned,)
    assert accumulate.passed_through == ()
    for text in (MUL_ADD, NEGATE_HEAD):
        assert program.branches[text].passed_through == ((donated, returned),)
        assert donated not in program.branches[text].parameters


def test_a_member_that_would_make_others_write_zeros_compiles_alone():
    zeros = merge.Candidate("zeros", ZEROS, (), (M64,), ())
    assert 64 * 64 * 4 <= merge.FILLER_LIMIT_BYTES < 256 * 128 * 4
    program = _one_union([*CANDIDATES.values(), zeros])
    assert ZEROS in program.members  # 16 KiB of zeros for the others: under the limit
    wide = ZEROS.replace("64x64", "256x128")  # 128 KiB of zeros each other member would write
    wide_zeros = merge.Candidate("wide_zeros", wide, (), (TensorSpec((256, 128), "int32"),), ())
    program = _one_union([*CANDIDATES.values(), wide_zeros])
    assert wide not in program.members and len(program.members) == 3


def test_members_that_would_return_many_results_not_their_own_go_to_other_unions():
    # In one union, negate_head would return 3 results beyond its own (mul_add's two and
    # accumulate's donated one): over the limit of 2, it compiles alone.
    assert merge.MAX_EXTRA_RESULTS == 2
    (program,) = merge.plan_merges(list(CANDIDATES.values()))
    assert set(program.members) == {MUL_ADD, ACCUMULATE}
    twin = merge.Candidate(
        "twin", NEGATE_HEAD.replace("subtract %b, %0", "subtract %0, %b"), (V8, V4), (V4,), ()
    )
    unions = merge.plan_merges([*CANDIDATES.values(), twin])
    assert sorted(len(u.members) for u in unions) == [2, 2]
    assert {NEGATE_HEAD, twin.text} in [set(u.members) for u in unions]


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            lambda t: t.replace(
                "%1 = stablehlo.add %0, %one : tensor<8xi32>",
                "%1 = stablehlo.custom_call @host_fn(%0) : (tensor<8xi32>) -> tensor<8xi32>",
            ),
            "it holds stablehlo.custom_call",
        ),
        (
            lambda t: t.replace("mhlo.num_partitions = 1", "mhlo.num_partitions = 1, mhlo.x = 1"),
            "its module has attributes ['mhlo.x']",
        ),
        (
            lambda t: t.replace(
                "%b: tensor<8xi32>)", '%b: tensor<8xi32> {mhlo.sharding = "{replicated}"})'
            ),
            "its parameter 1 carries attributes ['mhlo.sharding']",
        ),
    ],
)
def test_programs_a_union_cannot_hold_compile_alone(change, reason, caplog):
    changed = merge.Candidate(
        "mul_add", change(MUL_ADD), (V8, V8), (V8, TensorSpec((), "int32")), ()
    )
    with caplog.at_level("DEBUG", logger="jaxpp_mlir.runtime.compilation.merge"):
        program = _one_union([changed, *list(CANDIDATES.values())[1:], CANDIDATES["mul_add"]])
    assert changed.text not in program.members
    assert f"mul_add compiles alone: {reason}" in caplog.text


def test_a_program_whose_text_disagrees_with_the_plan_compiles_alone(caplog):
    wrong = merge.Candidate("mul_add", MUL_ADD, (V8, V4), (V8, TensorSpec((), "int32")), ())
    with caplog.at_level("DEBUG", logger="jaxpp_mlir.runtime.compilation.merge"):
        assert merge.plan_merges([wrong, CANDIDATES["negate_head"]]) == []
    assert "its parameter 1 is tensor<8xi32>, not the plan's int32[4]" in caplog.text


# -- pipelined steps ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def mlp():
    params = toolkit.mlp_params(4)
    batch = toolkit.mlp_batch(4)
    lowered = jax.jit(toolkit.mlp_train_step).lower(params, batch)
    program = pp.partition(lowered, mesh=toolkit.make_mesh(4), schedule=pp.Std1F1B(4))
    return program, params, batch, jax.jit(toolkit.mlp_train_step)(params, batch)


def _compiled(mlp, monkeypatch, mode: str) -> tuple:
    """The MLP compiled under ``JAXPP_MLIR_MERGE_PROGRAMS=mode``, and its union members."""
    monkeypatch.setenv("JAXPP_MLIR_MERGE_PROGRAMS", mode)
    compiled = mlp[0].compile()
    return compiled, _members(compiled)


def _members(compiled) -> dict[str, branch_executable.BranchExecutable]:
    return {
        name: exe
        for name, exe in compiled.executable.executables.items()
        if isinstance(exe, branch_executable.BranchExecutable)
    }


@pytest.mark.numerics
def test_a_pipelined_step_runs_its_stage_programs_from_unions(mlp, monkeypatch):
    program, params, batch, want = mlp
    compiled, members = _compiled(mlp, monkeypatch, "on")
    assert len(members) >= 4 and {n for n in members if n.startswith("stage")}
    unions = {e.union.program.text for e in members.values()}
    # Each union loaded once on each rank that runs one of its members.
    ranks_of = {
        t: {
            program.plan.executables[n].rank
            for n, e in members.items()
            if e.union.program.text == t
        }
        for t in unions
    }
    assert len({id(e.union.exe) for e in members.values()}) == sum(map(len, ranks_of.values()))
    for _ in range(2):  # the second step runs on the first's handed-back slots
        toolkit.assert_matches_reference(compiled(params, batch), want, toolkit.SEPARATE_PROGRAMS)


@pytest.mark.numerics
def test_by_default_every_program_compiles_alone(mlp, monkeypatch):
    monkeypatch.delenv("JAXPP_MLIR_MERGE_PROGRAMS", raising=False)
    program, params, batch, want = mlp
    compiled = program.compile()
    assert _members(compiled) == {}
    toolkit.assert_matches_reference(compiled(params, batch), want, toolkit.SEPARATE_PROGRAMS)


def test_ranks_of_several_devices_compile_alone(monkeypatch):
    monkeypatch.setenv("JAXPP_MLIR_MERGE_PROGRAMS", "on")
    params = toolkit.mlp_params(2)
    batch = toolkit.mlp_batch(2)
    lowered = jax.jit(toolkit.mlp_train_step).lower(params, batch)
    mesh = toolkit.mpmd_mesh({"stage": 2, "data": 2})
    compiled = pp.partition(lowered, mesh=mesh, schedule=pp.Std1F1B(2)).compile()
    assert _members(compiled) == {}


# -- first-steps: unions until the second call, then each program alone ------------------


def _sgd_steps(compiled, params, batch, steps: int) -> list:
    """``steps`` calls, the parameters fed back; every call's outputs."""
    outputs = []
    for _ in range(steps):
        out = compiled(params, batch)
        params = out[0]
        outputs.append(out)
    return outputs


class _NeverRuns:
    def execute_sharded(self, arguments):
        raise AssertionError("a union program ran after its members switched to their own")


@pytest.mark.numerics
def test_first_steps_run_on_unions_then_each_program_alone(mlp, monkeypatch):
    _, params, batch, _ = mlp
    compiled, members = _compiled(mlp, monkeypatch, "first-steps")
    tier_up = compiled.executable.tier_up
    assert members and tier_up is not None
    first = compiled(params, batch)
    assert not tier_up.done.is_set() and all(m.alone is None for m in members.values())
    second = compiled(first[0], batch)  # starts compiling each program alone
    assert tier_up.done.wait(120), "the background compile did not finish in 120 s"
    assert all(m.alone is not None for m in members.values())
    for member in members.values():  # from now on no union may run
        member.union.exe = _NeverRuns()
    later = _sgd_steps(compiled, second[0], batch, 2)
    # Against plain jax.jit, step after step: the union runs and the lone programs alike.
    want_params, want = params, []
    for _ in range(4):
        step = jax.jit(toolkit.mlp_train_step)(want_params, batch)
        want_params = step[0]
        want.append(step)
    for got, expected in zip([first, second, *later], want, strict=True):
        toolkit.assert_matches_reference(got, expected, toolkit.SEVERAL_STEPS)


def test_a_failed_background_compile_leaves_the_unions_running(mlp, monkeypatch, caplog):
    monkeypatch.setenv("JAXPP_MLIR_MERGE_PROGRAMS", "first-steps")
    program, params, batch, want = mlp
    compiled = program.compile()

    def failing(*args, **kwargs):
        raise RuntimeError("no compiler today")

    monkeypatch.setattr(runtime_compile, "start_plan_executables", failing)
    with caplog.at_level("WARNING", logger="jaxpp_mlir.runtime.compilation.tier_up"):
        compiled(params, batch)
        compiled(params, batch)
        assert compiled.executable.tier_up.done.wait(60)
    assert "keep running through their union programs: no compiler today" in caplog.text
    assert all(m.alone is None for m in _members(compiled).values())
    toolkit.assert_matches_reference(compiled(params, batch), want, toolkit.SEPARATE_PROGRAMS)


def test_first_steps_without_a_second_call_site_compile_each_program_alone(mlp, monkeypatch):
    """The distributed setup compiles through ``compile_plan_executables``, which nothing
    calls a second time to replace unions: there ``first-steps`` compiles no unions."""
    monkeypatch.setenv("JAXPP_MLIR_MERGE_PROGRAMS", "first-steps")
    program, *_ = mlp
    devices = [program.mesh.rank_devices(r) for r in range(program.num_ranks)]
    executables, _ = runtime_compile.compile_plan_executables(
        program.plan, devices, list(program.plan.executables)
    )
    assert not any(isinstance(e, branch_executable.BranchExecutable) for e in executables.values())
