"""The corpus of bad and hostile inputs: each case, and what it must give.

A case is a function run by ``corpus_runner.py`` in a child process. What it
must give (``expect``):

- ``error``: it raises exception type ``kind`` whose message contains ``message``;
- ``exit``: it runs a command-line tool and returns ``"exit CODE: STDERR"``;
  ``kind`` is the code, ``message`` a part of stderr;
- ``correct``: it returns normally (the function itself compares its result
  with plain ``jax.jit`` and raises if they differ).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    expect: str  # "error" | "exit" | "correct"
    kind: str  # exception type name or exit code
    message: str | tuple[str, ...]  # every one of them is part of the message
    run: Callable[[], Any]

    @property
    def pinned(self) -> tuple[str, ...]:
        return self.message if isinstance(self.message, tuple) else (self.message,)


def case_table() -> tuple[dict[str, Case], Callable[..., Callable[[Callable], Callable]]]:
    """A table of cases by name, and the decorator that adds a function to it as a case."""
    cases: dict[str, Case] = {}

    def case(name: str, expect: str, kind: str = "", message: str | tuple[str, ...] = ""):
        def register(fn: Callable[[], Any]) -> Callable[[], Any]:
            assert name not in cases, name
            cases[name] = Case(name, expect, kind, message, fn)
            return fn

        return register

    return cases, case


CASES, case = case_table()


# ------------------------------------------------------------------ helpers (lazy jax)

WIDTH = 4


def _jax():
    import jax

    return jax


def _pp():
    import jaxpp_mlir

    return jaxpp_mlir


def mesh(num_ranks: int, data: int = 1):
    jax, pp = _jax(), _pp()
    devices = np.array(jax.devices()[: num_ranks * data]).reshape(num_ranks, data)
    axes = ("stage", "data") if data > 1 else ("stage",)
    devices = devices if data > 1 else devices.reshape(-1)
    return pp.MpmdMesh(jax.sharding.Mesh(devices, axes), "stage")


def loss_fn(params, microbatch):
    import jax.numpy as jnp

    pp = _pp()
    x, y = microbatch
    for w in params:
        x = pp.pipeline_enter_stage(jnp.tanh(x @ w))
    return jnp.mean((x - y) ** 2)


def gradient_step(params, batch):
    jax, pp = _jax(), _pp()
    losses, grads = pp.treduce(
        lambda mb: jax.value_and_grad(loss_fn)(params, mb), batch, operation=(pp.Concat(), pp.Add)
    )
    return grads, losses


def make_inputs(num_microbatches: int = 2, rows: int = 2, fill: float | None = None):
    rng = np.random.default_rng(0)
    params = [rng.standard_normal((WIDTH, WIDTH)).astype(np.float32) for _ in range(2)]
    shape = (num_microbatches, rows, WIDTH)
    batch = tuple(rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    if fill is not None:
        batch[0][0, 0, 0] = fill
    return params, batch


@functools.cache
def compiled_step():
    jax, pp = _jax(), _pp()
    lowered = jax.jit(gradient_step).lower(*make_inputs())
    return pp.partition(lowered, mesh=mesh(2), schedule=pp.Std1F1B(2)).compile()


@functools.cache
def lowered_text() -> str:
    return str(_jax().jit(gradient_step).lower(*make_inputs()).compiler_ir("stablehlo"))


def same_as_jit(fn, *args, mesh_=None, schedule=None):
    """Partitions and runs ``fn`` on ``args``; raises unless it equals ``jax.jit``."""
    jax, pp = _jax(), _pp()
    lowered = jax.jit(fn).lower(*args)
    program = pp.partition(lowered, mesh=mesh_ or mesh(2), schedule=schedule or pp.Std1F1B(2))
    got = program.compile()(*args)
    expected = jax.jit(fn)(*args)
    import numerics

    numerics.assert_matches_reference(got, expected, numerics.SEPARATE_PROGRAMS)
    return "same as jax.jit"


def partition_text(text: str | bytes):
    pp = _pp()
    return pp.partition(text, mesh=mesh(2), schedule=pp.Std1F1B(2))


def deep_bytecode(depth: int) -> bytes:
    """Bytecode of ``depth`` nested modules (made with MLIR's parser, unguarded)."""
    from jax.extend.mlir import ir

    from jaxpp_mlir import ir_context

    text = "module {" * depth + "}" * depth
    module = ir.Module.parse(text, context=ir_context.make_context())
    buffer = io.BytesIO()
    module.operation.write_bytecode(buffer)
    return buffer.getvalue()


def run_tool(*command: str, stdin: bytes | None = None) -> str:
    result = subprocess.run(
        [sys.executable, *command], input=stdin, capture_output=True, timeout=60
    )
    return f"exit {result.returncode}: {result.stderr.decode(errors='replace')}"


def launch(*args: str) -> str:
    return run_tool("-m", "jaxpp_mlir.launch", *args)


def opt(*args: str, text: str | bytes | None = None) -> str:
    """``jaxpp-opt`` run in this process (a crash would end the batch, not pytest)."""
    from jaxpp_mlir.tools import opt as opt_tool

    with tempfile.TemporaryDirectory() as tmp:
        argv = list(args)
        if text is not None:
            path = os.path.join(tmp, "input.mlir")
            with open(path, "wb") as handle:
                handle.write(text.encode() if isinstance(text, str) else text)
            argv.insert(0, path)
        err, out = io.StringIO(), io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            code = opt_tool.main(argv)
    return f"exit {code}: {err.getvalue()}"


SCRIPT = os.path.abspath(__file__)


# ------------------------------------------------------------------ MLIR input to partition()

DEEP = "nests deeper than 1000 levels"


@case("deep_nested_modules", "error", "MlirParseError", DEEP)
def _():
    partition_text("module {" * 5000 + "}" * 5000)


@case("deep_nested_attribute_lists", "error", "MlirParseError", DEEP)
def _():
    partition_text('"x.op"() {a = ' + "[" * 20000 + "]" * 20000 + "} : () -> ()")


@case("deep_nested_types", "error", "MlirParseError", DEEP)
def _():
    partition_text('"x.op"() : () -> ' + "tuple<" * 20000 + "i32" + ">" * 20000)


@case("deep_nested_dictionaries", "error", "MlirParseError", DEEP)
def _():
    partition_text('"x.op"() {a = ' + "{b = " * 20000 + "unit" + "}" * 20000 + "} : () -> ()")


@case("deep_nesting_on_a_later_line", "error", "MlirParseError", "(line 3)")
def _():
    partition_text("// a comment {{{{\n\n" + "module {" * 3000 + "}" * 3000)


@case(
    "deep_nested_regions_as_bytecode", "error", "MlirParseError", "nests regions deeper than 1000"
)
def _():
    partition_text(deep_bytecode(1200))


@case("oversized_input", "error", "MlirParseError", "exceeds the limit of 1000 bytes")
def _():
    from jaxpp_mlir import ir_context

    ir_context.MAX_INPUT_BYTES = 1000
    try:
        partition_text("module {}" + " " * 2000)
    finally:
        ir_context.MAX_INPUT_BYTES = None


@case("braces_inside_strings_are_not_nesting", "error", "MlirParseError", "malformed MLIR module")
def _():
    # 5000 braces in a string literal (no nesting), then a syntax error.
    partition_text('"x.op"() {a = "' + "{" * 5000 + '"} : () -> ()\n%')


@case("empty_text", "error", "PartitionError", "the module has no 'func.func @main' to partition")
def _():
    partition_text("")


@case("binary_garbage", "error", "MlirParseError", "malformed MLIR module")
def _():
    partition_text(bytes(range(256)) * 8)


@case("truncated_module", "error", "MlirParseError", "malformed MLIR module")
def _():
    partition_text(lowered_text()[: len(lowered_text()) // 2])


@case("bytecode_magic_then_garbage", "error", "MlirParseError", "malformed MLIR module")
def _():
    partition_text(b"ML\xefR" + b"\x00\xff" * 100)


@case("nul_bytes_in_text", "error", "PartitionError", "the module has no 'func.func @main'")
def _():
    partition_text("module {\x00\x00}")


@case("unbalanced_closing_braces", "error", "MlirParseError", "malformed MLIR module")
def _():
    partition_text("}" * 100000 + "{" * 100)


@case("partition_of_an_int", "error", "TypeError", "partition() takes a jax.stages.Lowered")
def _():
    _pp().partition(42, mesh=mesh(2))


@case("partition_of_none", "error", "TypeError", "got NoneType")
def _():
    _pp().partition(None, mesh=mesh(2))


@case(
    "module_without_markers",
    "error",
    "PartitionError",
    "no stage markers found in the step (_lambda): mark the end of every stage",
)
def _():
    jax = _jax()
    lowered = jax.jit(lambda x: x * 2).lower(np.ones((2, 2), np.float32))
    partition_text(str(lowered.compiler_ir("stablehlo")))


# ------------------------------------------------------------------ jaxpp-opt


@case("opt_deep_nesting", "exit", "1", "jaxpp-opt: error: MLIR text " + DEEP)
def _():
    return opt(text="module {" * 5000 + "}" * 5000)


@case("opt_deep_bytecode", "exit", "1", "jaxpp-opt: error: MLIR module nests regions deeper")
def _():
    return opt(text=deep_bytecode(1200))


@case("opt_missing_file", "exit", "1", "cannot read '/nonexistent/x.mlir'")
def _():
    return opt("/nonexistent/x.mlir")


@case("opt_binary_garbage", "exit", "1", "is neither UTF-8 text nor MLIR bytecode")
def _():
    return opt(text=bytes(range(256)) * 8)


@case("opt_unknown_pass", "exit", "2", "unknown pass 'jaxpp-no-such-pass'")
def _():
    return opt("--pass-pipeline=builtin.module(jaxpp-no-such-pass)", text="module {}")


@case("opt_unknown_flag", "exit", "2", "unrecognized arguments")
def _():
    return opt("--no-such-flag", text="module {}")


# ------------------------------------------------------------------ the launcher

USAGE = "usage: python -m jaxpp_mlir.launch"


def _launcher_case(name: str, args: tuple[str, ...], message: str) -> None:
    case(f"launch_{name}", "exit", "2", message)(lambda: launch(*args))


for _name, _args, _message in [
    ("devices_per_proc_0", ("--nproc", "2", "--devices-per-proc", "0"),
     "argument --devices-per-proc: 0 is out of range (1 to 4096)"),
    ("devices_per_proc_negative", ("--nproc", "2", "--devices-per-proc", "-3"),
     "argument --devices-per-proc: -3 is out of range"),
    ("devices_per_proc_text", ("--nproc", "2", "--devices-per-proc", "four"),
     "argument --devices-per-proc: 'four' is not an integer"),
    ("nproc_0", ("--nproc", "0"), "argument --nproc: 0 is out of range (1 to 1024)"),
    ("nproc_huge", ("--nproc", "100000"), "argument --nproc: 100000 is out of range"),
    ("nproc_missing", (), "the following arguments are required: --nproc"),
    ("port_0", ("--nproc", "2", "--port", "0"), "argument --port: port 0 is out of range"),
    ("port_too_large", ("--nproc", "2", "--port", "70000"), "port 70000 is out of range"),
    ("grace_negative", ("--nproc", "2", "--grace", "-1"), "argument --grace: -1 is negative"),
    ("grace_nan", ("--nproc", "2", "--grace", "nan"), "'nan' is not a finite number"),
    ("timeout_zero", ("--nproc", "2", "--timeout", "0"), "argument --timeout: 0 is not positive"),
    ("timeout_inf", ("--nproc", "2", "--timeout", "inf"), "'inf' is not a finite number"),
    ("script_missing", ("--nproc", "2", "/nonexistent/script.py"),
     "script '/nonexistent/script.py' is not a file"),
    ("script_is_a_directory", ("--nproc", "2", "/"), "script '/' is not a file"),
]:  # fmt: skip
    _launcher_case(
        _name,
        (*_args, SCRIPT)
        if _name not in ("script_missing", "script_is_a_directory", "nproc_missing")
        else _args,
        _message,
    )


# ------------------------------------------------------------------ schedules


@case("schedule_zero_stages", "error", "ScheduleError", "num_stages must be >= 1, got 0")
def _():
    _pp().GPipe(0)


@case("schedule_negative_stages", "error", "ScheduleError", "must be >= 1, got -1")
def _():
    _pp().Std1F1B(-1)


@case("schedule_bool_stages", "error", "ScheduleError", "num_stages must be an int, got True")
def _():
    _pp().Std1F1B(True)


@case("schedule_more_ranks_than_stages", "error", "ScheduleError", "exceeds num_stages")
def _():
    _pp().Interleaved1F1B(2, 4)


@case(
    "schedule_stages_not_a_multiple_of_ranks",
    "error",
    "ScheduleError",
    "num_stages (3) must be a multiple of mpmd_dim (2)",
)
def _():
    _pp().Interleaved1F1B(3, 2)


@case("schedule_huge_microbatch_count", "error", "ScheduleError", "exceed the limit of 100000")
def _():
    _pp().GPipe(2).validate(10**9)


@case("schedule_zero_microbatches", "error", "ScheduleError", "num_microbatches must be >= 1")
def _():
    _pp().GPipe(2).validate(0)


@case("task_negative_stage", "error", "ScheduleError", "Task stage must be a non-negative int")
def _():
    _pp().Task(-1, "fwd", 0)


@case("task_unknown_kind", "error", "ScheduleError", "Task kind must be one of")
def _():
    _pp().Task(0, "sideways", 0)


@case("fused_task_empty", "error", "ScheduleError", "FusedTask needs at least one Task")
def _():
    _pp().FusedTask(())


@case("fused_task_duplicate", "error", "ScheduleError", "FusedTask holds the same task twice")
def _():
    t = _pp().Task(0, "fwd", 0)
    _pp().FusedTask((t, t))


def _custom(rows, num_stages=2, **kwargs):
    return _pp().CustomSchedule(rows, num_stages, **kwargs)


def _t(text: str):
    kind, stage, mb = text.split(".")
    kinds = {"F": "fwd", "B": "bwd", "I": "bwd_i", "W": "bwd_w"}
    return _pp().Task(int(stage), kinds[kind], int(mb))


def _rows(*rows: str):
    return [[_t(x) for x in row.split()] for row in rows]


@case("custom_schedule_no_ranks", "error", "ScheduleError", "needs at least one rank's task list")
def _():
    _custom([])


@case("custom_schedule_missing_backward", "error", "ScheduleError", "incomplete schedule")
def _():
    _custom(_rows("F.0.0 B.0.0", "F.1.0")).validate(1)


@case("custom_schedule_deadlock", "error", "ScheduleError", "deadlock: every unfinished rank")
def _():
    # bwd_0 waits for bwd_1 (rank 1), which waits for bwd_2, later on rank 0.
    _custom(_rows("F.0.0 B.0.0 F.2.0 B.2.0", "F.1.0 B.1.0"), 3, stage_rank=[0, 1, 0]).validate(1)


@case("custom_schedule_task_on_wrong_rank", "error", "ScheduleError", "is placed on rank 1, not 0")
def _():
    _custom(_rows("F.0.0 F.1.0 B.1.0 B.0.0", "")).validate(1)


@case("custom_schedule_stage_rank_out_of_range", "error", "ScheduleError", "only 2 ranks")
def _():
    _custom(_rows("F.0.0 B.0.0", "F.1.0 B.1.0"), stage_rank=[0, 5])


@case("custom_schedule_not_a_task", "error", "ScheduleError", "expected Task or FusedTask")
def _():
    _custom([["fwd_0__0"], []])


@case("custom_schedule_order_broken_on_a_rank", "error", "ScheduleError", "broken dependency order")
def _():
    _custom(_rows("B.0.0 F.0.0", "F.1.0 B.1.0")).validate(1)


@case("custom_schedule_both_backward_forms", "error", "ScheduleError", "has both a bwd and a split")
def _():
    _custom(_rows("F.0.0 B.0.0 I.0.0 W.0.0", "F.1.0 B.1.0")).validate(1)


@case("simulate_negative_cost", "error", "ScheduleError", "is negative")
def _():
    _pp().GPipe(2).simulate(2, costs={"fwd": -1.0})


@case("simulate_unknown_cost_kind", "error", "ScheduleError", "unknown task kind in costs")
def _():
    _pp().GPipe(2).simulate(2, costs={"forward": 1.0})


# ------------------------------------------------------------------ meshes


@case("mesh_without_the_mpmd_axis", "error", "MeshError", "have no mpmd axis 'nope'")
def _():
    jax = _jax()
    _pp().MpmdMesh(jax.sharding.Mesh(np.array(jax.devices()[:2]), ("stage",)), "nope")


@case(
    "mesh_smaller_than_the_schedule",
    "error",
    "PartitionScheduleError",
    "needs 2 ranks but the mesh has 1",
)
def _():
    jax, pp = _jax(), _pp()
    pp.partition(jax.jit(gradient_step).lower(*make_inputs()), mesh=mesh(1), schedule=pp.Std1F1B(2))


@case("schedule_stage_count_differs_from_markers", "error", "PartitionScheduleError",
      "has 4 stages but the program has 2")  # fmt: skip
def _():
    jax, pp = _jax(), _pp()
    lowered = jax.jit(gradient_step).lower(*make_inputs())
    pp.partition(lowered, mesh=mesh(4), schedule=pp.Std1F1B(4))


@case("mesh_with_a_size_1_data_axis", "correct")
def _():
    return same_as_jit(gradient_step, *make_inputs(), mesh_=mesh(2, data=1))


# ------------------------------------------------------------------ calling a compiled step


@case("call_with_another_pytree", "error", "CallError", "do not have the structure")
def _():
    params, batch = make_inputs()
    compiled_step()({"w": params}, batch)


@case("call_with_another_dtype", "error", "CallError", "dtype int32, but the program expects")
def _():
    params, batch = make_inputs()
    compiled_step()([p.astype(np.int32) for p in params], batch)


@case("call_with_another_shape", "error", "CallError", "has shape (3, 4)")
def _():
    params, batch = make_inputs()
    compiled_step()([p[:3] for p in params], batch)


@case("call_with_a_deep_pytree", "error", "CallError", "nest too deeply to be flattened")
def _():
    params, batch = make_inputs()
    deep: Any = params
    for _ in range(200000):
        deep = [deep]
    compiled_step()(deep, batch)


@case("call_with_a_string", "error", "CallError", "is a str")
def _():
    params, batch = make_inputs()
    compiled_step()(["w", params[1]], batch)


@case("call_with_a_deleted_array", "error", "CallError", "is a deleted (or donated) array")
def _():
    jax = _jax()
    params, batch = make_inputs()
    dead = jax.device_put(params[0])
    dead.delete()
    compiled_step()([dead, params[1]], batch)


@case("call_inside_jax_jit", "error", "CallError", "is a tracer")
def _():
    jax = _jax()
    params, batch = make_inputs()
    jax.jit(lambda p: compiled_step()(p, batch))(params)


@case("call_with_a_donated_array_again", "error", "CallError", "is a deleted (or donated) array")
def _():
    jax, pp = _jax(), _pp()
    params, batch = make_inputs()
    step = jax.jit(gradient_step, donate_argnums=0)
    program = pp.partition(step.lower(params, batch), mesh=mesh(2), schedule=pp.Std1F1B(2))
    compiled = program.compile()
    on_device = [jax.device_put(p, jax.devices()[0]) for p in params]
    compiled(on_device, batch)
    compiled(on_device, batch)


@case("nan_input", "correct")
def _():
    return same_as_jit(gradient_step, *make_inputs(fill=np.nan))


@case("inf_input", "correct")
def _():
    return same_as_jit(gradient_step, *make_inputs(fill=np.inf))


@case("zero_size_microbatches", "correct")
def _():
    return same_as_jit(gradient_step, *make_inputs(rows=0))


@case("one_microbatch", "correct")
def _():
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = same_as_jit(gradient_step, *make_inputs(num_microbatches=1))
    # Correct, and partition says the set-up leaves ranks idle (PartitionWarning).
    assert any("1 microbatch for 2 stages" in str(w.message) for w in caught), caught
    return result


def _forward_only(combine):
    pp = _pp()

    def step(params, batch):
        def body(mb):
            x = mb
            for w in params:
                x = pp.pipeline_enter_stage(combine(x, w))
            return x.astype(np.int32).sum()

        return pp.treduce(body, batch, operation=pp.Add)

    return step


@case("int_only_stages", "correct")
def _():
    params = [np.full((WIDTH,), 2, np.int32), np.full((WIDTH,), 3, np.int32)]
    batch = np.arange(2 * 3 * WIDTH, dtype=np.int32).reshape(2, 3, WIDTH)
    return same_as_jit(
        _forward_only(lambda x, w: x * w + 1), params, batch, schedule=_pp().GPipe(2)
    )


@case("bool_only_stages", "correct")
def _():
    import jax.numpy as jnp

    params = [np.array([True, False, True, False]), np.array([False, False, True, True])]
    batch = np.arange(2 * 3 * WIDTH).reshape(2, 3, WIDTH) % 3 == 0
    return same_as_jit(_forward_only(jnp.logical_xor), params, batch, schedule=_pp().GPipe(2))


@case("uint8_stages", "correct")
def _():
    params = [np.full((WIDTH,), 7, np.uint8), np.full((WIDTH,), 9, np.uint8)]
    batch = np.arange(2 * 3 * WIDTH, dtype=np.uint8).reshape(2, 3, WIDTH)
    return same_as_jit(_forward_only(lambda x, w: x * w), params, batch, schedule=_pp().GPipe(2))


# ------------------------------------------------------------------ markers


@case(
    "schedule_without_a_treduce_loop",
    "error",
    "PartitionScheduleError",
    "a schedule orders the microbatches of a treduce loop, but the step has none",
)
def _():
    jax, pp = _jax(), _pp()
    f = jax.vmap(lambda x: pp.pipeline_enter_stage(x * 2) + 1)
    pp.partition(jax.jit(f).lower(np.ones((3, 2), np.float32)), mesh=mesh(2), schedule=pp.GPipe(2))


@case(
    "marker_inside_cond",
    "error",
    "PartitionError",
    ("corpus_cases.py:", "stage marker inside 'stablehlo.case' is not supported"),
)
def _():
    jax, pp = _jax(), _pp()

    def f(x):
        return jax.lax.cond(x.sum() > 0, lambda v: pp.pipeline_enter_stage(v * 2), lambda v: v, x)

    pp.partition(jax.jit(f).lower(np.ones((2,), np.float32)), mesh=mesh(2), schedule=pp.GPipe(2))


@case("treduce_of_a_non_array", "error", "TypeError", "is not a valid JAX array type")
def _():
    jax, pp = _jax(), _pp()
    jax.jit(lambda: pp.treduce(lambda mb: mb, "batch", operation=pp.Add)).lower()
