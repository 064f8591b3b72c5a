"""Tests of the ``jaxpp-opt`` driver, run in-process through ``main([...])``.

A test-only pass (registered by a fixture, removed afterwards) emits an error on
every ``"test.bad"`` op, a warning on every ``"test.warn"`` op and crashes on a
``"test.crash"`` op, so that diagnostics can be checked without depending on
the real passes. Other test-only passes break the IR (for the verifier run
after each pass) and declare an order (for ``ModulePass.check_order``).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest
from broken_passes import BreakIR
from jax.extend.mlir import ir

from jaxpp_mlir import diagnostics
from jaxpp_mlir.passes import base, registry  # noqa: F401  (registers the real passes)
from jaxpp_mlir.passes.base import Evidence, ModulePass, PassOptionError, registered_passes
from jaxpp_mlir.passes.check_shardings import CheckShardings
from jaxpp_mlir.passes.choose_stages import ChooseStages
from jaxpp_mlir.passes.inline_calls import InlineCalls
from jaxpp_mlir.passes.place_stages import PlaceStages
from jaxpp_mlir.tools import opt
from jaxpp_mlir.tools.opt import main

TEST_PASS = "jaxpp-test-flag-ops"


@dataclasses.dataclass(frozen=True)
class FlagOps(ModulePass):
    """Test only: error on each "test.bad" op, warning on each "test.warn" op.

    A "test.crash" op makes the pass raise a Python exception (an internal error),
    a "test.silent" op makes it fail without emitting an error (a bug too).
    """

    name = TEST_PASS
    max_warnings: int = dataclasses.field(default=3, metadata={"help": "most warnings emitted"})
    note: str = dataclasses.field(default="", metadata={"help": "text added to each warning"})

    def run(self, module: ir.Operation) -> None:
        warned = 0
        for op in _walk(module):
            if op.name == "test.crash":
                raise RuntimeError("the test pass crashed")
            if op.name == "test.warn" and warned < self.max_warnings:
                warned += 1
                diagnostics.warning(op, f"suspicious op{self.note}")
            if op.name == "test.bad":
                raise diagnostics.error(op, "this op is bad")
            if op.name == "test.silent":
                raise diagnostics.PassFailed("failed without emitting an error")


def _walk(op: ir.Operation) -> Iterator[ir.Operation]:
    for region in op.regions:
        for block in region:
            for child in block:
                yield child.operation
                yield from _walk(child.operation)


@pytest.fixture
def test_pass() -> Iterator[type[ModulePass]]:
    """Registers ``FlagOps`` for one test; the registry is restored afterwards."""
    with base.registered(FlagOps):
        yield FlagOps


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def write(tmp_path, text: str, name: str = "input.mlir") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


FINE = """\
func.func @fine(%a: i32) -> i32 {
  return %a : i32
}
"""

THREE_CHUNKS = """\
func.func @fine(%a: i32) -> i32 {
  return %a : i32
}

// -----

func.func @bad() {
  // expected-error @+1 {{this op is bad}}
  "test.bad"() : () -> ()
  return
}

// -----

func.func @warned() {
  "test.warn"() : () -> ()  // expected-warning {{suspicious op}}
  return
}
"""


# ----------------------------------------------------------------------------
# --list-passes and --help


def test_list_passes_lists_every_registered_pass(capsys, test_pass):
    status, out, err = run(capsys, "--list-passes")
    assert status == 0, err
    listed = [line.strip() for line in out.splitlines() if line.startswith("  jaxpp-")]
    assert listed == list(registered_passes())
    assert TEST_PASS in listed
    for pass_class in registered_passes().values():
        assert pass_class.summary() in out
        for field in pass_class.option_fields():
            assert f"{field.name.replace('_', '-')}: " in out


def test_list_passes_shows_option_type_default_and_help(capsys, test_pass):
    status, out, _ = run(capsys, "--list-passes")
    assert status == 0
    assert "max-warnings: int = 3" in out
    assert "most warnings emitted" in out
    assert "note: str = ''" in out


def test_help_documents_pipeline_forms_and_new_passes(capsys, test_pass):
    status, out, _ = run(capsys, "--help")
    assert status == 0
    for text in ("--pass-pipeline", "-p ", "--list-passes", "--split-input-file", "@register_pass"):
        assert text in out
    assert f"--{TEST_PASS}[='key=value ...']" in out


def _opt_process(*argv: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "jaxpp_mlir.tools.opt", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )


@pytest.mark.parametrize("argv", [["INPUT"], ["--list-passes"]], ids=["module", "list"])
def test_closed_stdout_exits_quietly(tmp_path, argv):
    """``jaxpp-opt ... | head -1``: the reader went away; no traceback, no internal error."""
    path = write(tmp_path, FINE)
    process = _opt_process(*[path if a == "INPUT" else a for a in argv])
    process.stdout.close()  # before the tool writes: its first write meets a closed pipe
    err = process.stderr.read().decode()
    status = process.wait(timeout=300)
    assert err == ""
    assert status == opt.EXIT_BROKEN_PIPE == 128 + signal.SIGPIPE


def test_runs_as_python_module():
    result = subprocess.run(
        [sys.executable, "-m", "jaxpp_mlir.tools.opt", "--help"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "usage: jaxpp-opt" in result.stdout


# ----------------------------------------------------------------------------
# Pipelines


@pytest.mark.parametrize(
    "pipeline",
    [
        ["--pass-pipeline", f"builtin.module({TEST_PASS}{{max-warnings=1}},cse)"],
        ["-p", f"{TEST_PASS}{{max-warnings=1}},cse"],
        [f"--{TEST_PASS}=max-warnings=1", "--cse"],
        [f"--{TEST_PASS}='max-warnings=1'"],
    ],
    ids=["pass-pipeline", "short", "flags", "quoted-flag"],
)
def test_pipeline_forms_pass_options(capsys, tmp_path, test_pass, pipeline):
    path = write(
        tmp_path,
        'func.func @f() {\n  "test.warn"() : () -> ()\n  "test.warn"() : () -> ()\n  return\n}\n',
    )
    status, out, err = run(capsys, path, *pipeline)
    assert status == 0, err
    assert err.count("warning: suspicious op") == 1  # max-warnings=1 reached the pass
    assert f"{path}:2:3: warning: suspicious op" in err
    assert '"test.warn"() : () -> ()' in out


def test_error_prints_location_with_real_file_name(capsys, tmp_path, test_pass):
    path = write(tmp_path, 'func.func @f() {\n  "test.bad"() : () -> ()\n  return\n}\n')
    status, out, err = run(capsys, path, "-p", TEST_PASS)
    assert status == 1
    assert out == ""
    assert err.startswith(f"{path}:2:3: error: this op is bad\n")
    assert '  "test.bad"() : () -> ()\n  ^' in err  # the input line and a caret


def test_output_file(capsys, tmp_path):
    path = write(tmp_path, FINE)
    output = tmp_path / "out.mlir"
    status, out, err = run(capsys, path, "-p", "cse", "-o", str(output))
    assert status == 0, err
    assert out == ""
    assert "func.func @fine" in output.read_text()


# ----------------------------------------------------------------------------
# User errors: a clear message, a non-zero status, no traceback


@pytest.mark.parametrize(
    "argv, message, status",
    [
        (["-p", "jaxpp-no-such-pass"], "unknown pass 'jaxpp-no-such-pass'", 2),
        (["--jaxpp-no-such-pass"], "unknown pass 'jaxpp-no-such-pass'", 2),
        (["-p", "no-such-pass"], "'no-such-pass' does not refer to a registered pass", 2),
        (["-p", f"{TEST_PASS}{{no-such-option=1}}"], "has no option 'no-such-option'", 2),
        ([f"--{TEST_PASS}=max-warnings=many"], "option 'max-warnings' expects int", 2),
        (["-p", "canonicalize{no-such-option=1}"], "no such option no-such-option", 2),
        (["-p", "builtin.module(cse"], "unbalanced", 2),
        (["-p", "cse", "--canonicalize"], "cannot be combined with pass flags", 2),
        (["--no-such-flag"], "unrecognized arguments: --no-such-flag", 2),
        (["--print-ir-after=no-such-pass"], "--print-ir-after: unknown pass 'no-such-pass'", 2),
        (
            ["-p", "jaxpp-inline-calls{max-depth=-3}"],
            "pass 'jaxpp-inline-calls': option 'max-depth' must be at least 1, got -3",
            2,
        ),
        (
            ["--jaxpp-check-shardings=submesh-size=-1"],
            "pass 'jaxpp-check-shardings': option 'submesh-size' must be at least 0, got -1",
            2,
        ),
        (
            ["-p", "jaxpp-place-stages{mpmd-dim=-2}"],
            "pass 'jaxpp-place-stages': option 'mpmd-dim' must be at least 0, got -2",
            2,
        ),
        (
            ["-p", "jaxpp-choose-stages{stage-split=1,0}"],
            "pass 'jaxpp-choose-stages': option 'stage-split' entries must be at least 1, got 0",
            2,
        ),
    ],
)
def test_command_line_errors(capsys, tmp_path, test_pass, argv, message, status):
    got, out, err = run(capsys, write(tmp_path, FINE), *argv)
    assert got == status
    assert message in err
    assert "Traceback" not in out + err


@pytest.mark.parametrize(
    "make",
    [
        lambda: InlineCalls(max_depth=0),
        lambda: CheckShardings(submesh_size=-1),
        lambda: PlaceStages(mpmd_dim=-1),
        lambda: ChooseStages(stage_split=(2, -3)),
    ],
    ids=["max-depth", "submesh-size", "mpmd-dim", "stage-split"],
)
def test_option_bounds_hold_for_passes_built_in_python(make):
    """``partition`` builds passes directly: the same bounds apply there."""
    with pytest.raises(PassOptionError, match="must be at least"):
        make()


def test_option_bounds_accept_the_bound():
    assert InlineCalls(max_depth=1).max_depth == 1
    assert PlaceStages(mpmd_dim=0).mpmd_dim == 0
    assert ChooseStages(stage_split=(1, 1)).stage_split == (1, 1)


def test_malformed_input(capsys, tmp_path):
    path = write(tmp_path, "func.func @f(%a: i32) -> i32 {\n  %0 = arith.addi %a, : i32\n}\n")
    status, out, err = run(capsys, path)
    assert status == 1
    assert f"{path}:2:22: error: expected SSA operand" in err
    assert "Traceback" not in out + err


def test_unreadable_and_non_text_input(capsys, tmp_path):
    status, out, err = run(capsys, str(tmp_path / "missing.mlir"))
    assert status == 1
    assert "jaxpp-opt: error: cannot read" in err and "No such file or directory" in err
    binary = tmp_path / "binary.mlir"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    status, out, err = run(capsys, str(binary))
    assert status == 1
    assert "neither UTF-8 text nor MLIR bytecode" in err
    assert "Traceback" not in out + err


def test_internal_error_has_traceback_only_with_debug(capsys, tmp_path, test_pass):
    path = write(tmp_path, 'func.func @f() {\n  "test.crash"() : () -> ()\n  return\n}\n')
    status, out, err = run(capsys, path, "-p", TEST_PASS)
    assert status == opt.EXIT_INTERNAL
    assert "internal error in pass 'jaxpp-test-flag-ops'" in err
    assert "the test pass crashed" in err
    assert "--debug" in err
    assert "Traceback" not in err
    status, out, err = run(capsys, path, "-p", TEST_PASS, "--debug")
    assert status == opt.EXIT_INTERNAL
    assert "Traceback" in err and "RuntimeError: the test pass crashed" in err


# ----------------------------------------------------------------------------
# --split-input-file and --verify-diagnostics


def test_split_input_file_verify_diagnostics(capsys, tmp_path, test_pass):
    path = write(tmp_path, THREE_CHUNKS)
    status, out, err = run(
        capsys, path, "--split-input-file", "--verify-diagnostics", "-p", TEST_PASS
    )
    assert status == 0, err
    assert err == ""
    chunks = out.split("// -----\n")
    assert len(chunks) == 3
    assert "func.func @fine" in chunks[0]
    assert chunks[1] == ""  # the failing chunk prints nothing
    assert "func.func @warned" in chunks[2]


def test_split_input_file_reports_lines_of_the_whole_file(capsys, tmp_path, test_pass):
    path = write(tmp_path, THREE_CHUNKS)
    status, out, err = run(capsys, path, "--split-input-file", "-p", TEST_PASS)
    assert status == 1  # chunk 2 fails; without --verify-diagnostics that is an error
    assert f"{path}:9:3: error: this op is bad" in err
    assert f"{path}:16:3: warning: suspicious op" in err
    assert "func.func @fine" in out and "func.func @warned" in out


def test_verify_diagnostics_missing_error(capsys, tmp_path, test_pass):
    text = THREE_CHUNKS.replace('  "test.bad"() : () -> ()\n', '  "test.fine"() : () -> ()\n')
    path = write(tmp_path, text)
    status, out, err = run(
        capsys, path, "--split-input-file", "--verify-diagnostics", "-p", TEST_PASS
    )
    assert status == 1
    assert f'{path}:8:6: error: expected error "this op is bad" was not produced' in err
    assert "Traceback" not in err


def test_verify_diagnostics_unexpected_error(capsys, tmp_path, test_pass):
    text = THREE_CHUNKS.replace(
        "func.func @fine(%a: i32) -> i32 {\n",
        'func.func @fine(%a: i32) -> i32 {\n  "test.bad"() : () -> ()\n',
    )
    path = write(tmp_path, text)
    status, out, err = run(
        capsys, path, "--split-input-file", "--verify-diagnostics", "-p", TEST_PASS
    )
    assert status == 1
    assert f"{path}:2:3: error: unexpected error: this op is bad" in err


def test_verify_diagnostics_wrong_kind_and_wrong_line(capsys, tmp_path, test_pass):
    text = THREE_CHUNKS.replace("expected-warning {{", "expected-remark {{").replace(
        "expected-error @+1", "expected-error @+2"
    )
    path = write(tmp_path, text)
    status, out, err = run(
        capsys, path, "--split-input-file", "--verify-diagnostics", "-p", TEST_PASS
    )
    assert status == 1
    assert f"{path}:9:3: error: unexpected error: this op is bad" in err
    assert f'{path}:8:6: error: expected error "this op is bad" was not produced' in err
    assert "error: 'warning' diagnostic emitted when expecting a 'remark'" in err
    assert 'expected remark "suspicious op" was not produced' in err


@pytest.mark.parametrize(
    "designator, comment_first",
    [("@+1", True), ("@below", True), ("@-1", False), ("@above", False)],
)
def test_verify_diagnostics_designators(capsys, tmp_path, test_pass, designator, comment_first):
    op = '  "test.bad"() : () -> ()\n'
    comment = f"  // expected-error {designator} {{{{this op is bad}}}}\n"
    body = comment + op if comment_first else op + comment
    path = write(tmp_path, f"func.func @f() {{\n{body}  return\n}}\n")
    status, out, err = run(capsys, path, "--verify-diagnostics", "-p", TEST_PASS)
    assert status == 0, err


# ----------------------------------------------------------------------------
# IR printing


def test_print_ir_after_all_goes_to_stderr(capsys, tmp_path, test_pass):
    path = write(tmp_path, FINE)
    status, out, err = run(capsys, path, "-p", f"cse,{TEST_PASS}", "--print-ir-after-all")
    assert status == 0, err
    assert "IR Dump" not in out
    headers = [line for line in err.splitlines() if line.startswith("// -----// IR Dump")]
    assert headers == [
        "// -----// IR Dump After cse (cse) //----- //",
        f"// -----// IR Dump After {TEST_PASS} ({TEST_PASS}) //----- //",
    ]


def test_print_ir_before_and_after_one_pass(capsys, tmp_path, test_pass):
    path = write(tmp_path, FINE)
    status, out, err = run(
        capsys,
        path,
        "-p",
        f"cse,{TEST_PASS}",
        f"--print-ir-before={TEST_PASS}",
        "--print-ir-after",
        "cse",
    )
    assert status == 0, err
    headers = [line for line in err.splitlines() if line.startswith("// -----// IR Dump")]
    assert headers == [
        "// -----// IR Dump After cse (cse) //----- //",
        f"// -----// IR Dump Before {TEST_PASS} ({TEST_PASS}) //----- //",
    ]


def test_print_ir_after_failure(capsys, tmp_path, test_pass):
    path = write(tmp_path, 'func.func @f() {\n  "test.bad"() : () -> ()\n  return\n}\n')
    status, out, err = run(capsys, path, "-p", f"cse,{TEST_PASS}", "--print-ir-after-failure")
    assert status == 1
    header = f"// -----// IR Dump After {TEST_PASS} Failed ({TEST_PASS}) //----- //"
    assert header in err
    assert '"test.bad"() : () -> ()' in err.split(header)[1]
    assert "IR Dump After cse" not in err


def test_pass_failing_without_an_error_is_reported(capsys, tmp_path, test_pass):
    path = write(tmp_path, 'func.func @f() {\n  "test.silent"() : () -> ()\n  return\n}\n')
    status, out, err = run(capsys, path, "-p", TEST_PASS)
    assert status == opt.EXIT_INTERNAL
    assert f"pass '{TEST_PASS}' failed without reporting an error" in err


# ----------------------------------------------------------------------------
# Verification after each pass


BREAK_PASS = BreakIR.name


@pytest.fixture
def break_pass() -> Iterator[type[ModulePass]]:
    with base.registered(BreakIR):
        yield BreakIR


def test_verifier_after_each_pass_catches_invalid_ir(capsys, tmp_path, break_pass):
    path = write(tmp_path, FINE)
    status, out, err = run(capsys, path, "-p", f"{BREAK_PASS},cse")
    assert status == opt.EXIT_FAILURE
    assert out == ""
    assert (
        f"{path}:1:1: error: 'func.func' op entry block must have 2 arguments to match "
        "function signature" in err
    )
    assert "Traceback" not in err


@dataclasses.dataclass(frozen=True)
class BreakIRUnchanged(BreakIR):
    """Test only: breaks the IR as BreakIR does, but claims it changed nothing."""

    name = "jaxpp-test-break-ir-unchanged"

    def run(self, module: ir.Operation) -> base.Unchanged:
        super().run(module)
        return base.UNCHANGED


def test_the_verifier_is_skipped_after_a_pass_that_changed_nothing(capsys, tmp_path, test_pass):
    """UNCHANGED is the pass's word that the IR is the one verified before it: the
    verifier does not run after it (MLIR skips it after a pass that preserved all
    analyses alike). A pass must not say so when it changed the IR: the next pass that
    may change it (here the test pass, which returns None) is then the one that fails."""
    path = write(tmp_path, FINE)
    with base.registered(BreakIRUnchanged):
        status, out, err = run(capsys, path, "-p", BreakIRUnchanged.name)
        assert status == 0, err
        assert "function_type = (i32, i32) -> i32" in out  # unverified, as with --no-verify-each
        status, out, err = run(capsys, path, "-p", f"{BreakIRUnchanged.name},{TEST_PASS}")
    assert status == opt.EXIT_FAILURE
    assert "entry block must have 2 arguments to match function signature" in err


def test_no_verify_each_lets_invalid_ir_through(capsys, tmp_path, break_pass):
    path = write(tmp_path, FINE)
    status, out, err = run(capsys, path, "-p", BREAK_PASS, "--no-verify-each")
    assert status == 0, err
    assert "error" not in err
    assert "function_type = (i32, i32) -> i32" in out  # printed in generic form, unverified


# ----------------------------------------------------------------------------
# Pass order (ModulePass.check_order), on test-only passes


@dataclasses.dataclass(frozen=True)
class MakeTodo(ModulePass):
    """Test only: erases every "test.todo" op.

    A ``test.todo`` op is work it leaves for the pass that ``requires`` it; a
    ``test.done`` op stands for the evidence that it already ran.
    """

    name = "jaxpp-test-first"
    must_precede = ("jaxpp-test-second",)

    @classmethod
    def unfinished(cls, module: ir.Operation) -> Evidence | None:
        found = [op for op in _walk(module) if op.name == "test.todo"]
        return Evidence(found[0], "a test.todo is left") if found else None

    @classmethod
    def finished(cls, module: ir.Operation) -> Evidence | None:
        found = [op for op in _walk(module) if op.name == "test.done"]
        return Evidence(found[0], "test.done is there") if found else None

    def run(self, module: ir.Operation) -> None:
        for op in [op for op in _walk(module) if op.name == "test.todo"]:
            op.erase()


@dataclasses.dataclass(frozen=True)
class Second(ModulePass):
    """Test only: marks the module with "test.second"; a "test.second" op shows it ran."""

    name = "jaxpp-test-second"
    requires = ("jaxpp-test-first",)

    @classmethod
    def finished(cls, module: ir.Operation) -> Evidence | None:
        found = [op for op in _walk(module) if op.name == "test.second"]
        return Evidence(found[0], "test.second is there") if found else None

    def run(self, module: ir.Operation) -> None:
        pass


@pytest.fixture
def order_passes() -> Iterator[None]:
    with base.registered(MakeTodo, Second):
        yield


def _body(*ops: str) -> str:
    lines = "".join(f'  "{op}"() : () -> ()\n' for op in ops)
    return f"func.func @f() {{\n{lines}  return\n}}\n"


@pytest.mark.parametrize(
    "ops, pipeline, message",
    [
        (
            ["test.fine", "test.todo"],
            "jaxpp-test-second",
            "3:3: error: jaxpp-test-second: a test.todo is left: run jaxpp-test-first first",
        ),
        (
            ["test.done"],
            "jaxpp-test-first",
            "2:3: error: jaxpp-test-first: test.done is there: run jaxpp-test-first only once",
        ),
        (
            ["test.second"],
            "jaxpp-test-first",
            "2:3: error: jaxpp-test-first: test.second is there: "
            "run jaxpp-test-first before jaxpp-test-second",
        ),
    ],
    ids=["required-by", "twice", "must-precede"],
)
def test_pass_order_is_checked(capsys, tmp_path, order_passes, ops, pipeline, message):
    path = write(tmp_path, _body(*ops))
    status, out, err = run(capsys, path, "-p", pipeline)
    assert status == opt.EXIT_FAILURE
    assert err.startswith(f"{path}:{message}\n"), err


@dataclasses.dataclass(frozen=True)
class LeaveTodo(MakeTodo):
    """Test only: MakeTodo that leaves its test.todo ops (its ``unfinished`` still finds
    them after it ran)."""

    def run(self, module: ir.Operation) -> None:
        pass


def test_a_required_pass_that_ran_in_the_pipeline_is_not_looked_for_again(capsys, tmp_path):
    """``requires`` asks for a pass's work to be done; a pass that ran earlier in the same
    pipeline run did it (its postcondition), so its ``unfinished`` is not asked again."""
    path = write(tmp_path, _body("test.fine", "test.todo"))
    with base.registered(LeaveTodo, Second):
        status, out, err = run(capsys, path, "-p", "jaxpp-test-first,jaxpp-test-second")
        assert status == 0, err
        assert "test.todo" in out
        status, out, err = run(capsys, path, "-p", "jaxpp-test-second")
    assert status == opt.EXIT_FAILURE
    assert "jaxpp-test-second: a test.todo is left: run jaxpp-test-first first" in err


def test_pass_order_in_order_runs(capsys, tmp_path, order_passes):
    path = write(tmp_path, _body("test.fine", "test.todo"))
    status, out, err = run(capsys, path, "-p", "jaxpp-test-first,jaxpp-test-second")
    assert status == 0, err
    assert "test.todo" not in out and "test.fine" in out
