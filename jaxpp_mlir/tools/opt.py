"""``jaxpp-opt``: run jaxpp and MLIR passes over an MLIR file, like ``mlir-opt``.

Reads a module (text or bytecode) from a file or stdin, runs a pipeline of
registered jaxpp passes and textual MLIR passes, and prints the result. It is
the driver of the lit tests: ``--split-input-file`` runs each ``// -----``
chunk as its own module, and ``--verify-diagnostics`` checks the errors,
warnings and remarks the passes emit against ``// expected-error {{...}}``
comments, as ``mlir-opt`` does.

Run it as ``jaxpp-opt`` or ``python -m jaxpp_mlir.tools.opt``.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import NamedTuple

from jax.interpreters.mlir import ir

from jaxpp_mlir import diagnostics, ir_context
from jaxpp_mlir.diagnostics import Diagnostic
from jaxpp_mlir.errors import MlirParseError
from jaxpp_mlir.ir_context import make_context
from jaxpp_mlir.passes.base import registered_passes
from jaxpp_mlir.passes.pipeline import (
    PipelineElement,
    PipelineFailure,
    PipelineSyntaxError,
    run_pipeline,
)
from jaxpp_mlir.tools.expected_diagnostics import (
    Chunk,
    Expected,
    Site,
    flatten,
    parse_expectations,
    site_of,
    split_chunks,
)
from jaxpp_mlir.tools.opt_base import (  # noqa: F401  (EXIT_USAGE and PROG: public here too)
    BYTECODE_MAGIC,
    EXIT_BROKEN_PIPE,
    EXIT_FAILURE,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_USAGE,
    PROG,
    SPLIT_MARKER,
    InputError,
    UsageError,
)
from jaxpp_mlir.tools.opt_command_line import (
    build_parser,
    extract_pass_flags,
    list_passes,
    load_registry,
    option_names,
    pipeline_factory,
)
from jaxpp_mlir.tools.timing import PassTimer


def main(argv: Sequence[str] | None = None) -> int:
    """Runs ``jaxpp-opt`` with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        return _run(argv)
    except SystemExit as exc:  # argparse: --help, or a command-line error already printed
        if exc.code is None:
            return EXIT_OK
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except InputError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except BrokenPipeError:  # `jaxpp-opt ... | head`: the reader went away; nobody to tell
        _discard_output()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if debug:
            traceback.print_exc()
        else:
            print(
                f"{PROG}: internal error: {exc!r} (rerun with --debug for the traceback)",
                file=sys.stderr,
            )
        return EXIT_INTERNAL


def _discard_output() -> None:
    """Points stdout and stderr at /dev/null, so that the interpreter's final flush of
    what is still buffered for a closed pipe neither fails nor prints a warning."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        for stream in (sys.stdout, sys.stderr):
            try:
                os.dup2(devnull, stream.fileno())
            except (OSError, ValueError):  # not a real file (a test's capture)
                pass
    finally:
        os.close(devnull)


class _Result(NamedTuple):
    """What processing one module gave."""

    output: str | bytes | None  # None: it failed (does not parse, or a pass failed)
    diagnostics: list[Diagnostic]  # located errors, warnings and remarks, not printed yet
    internal_error: bool = False  # a bug in a pass, already reported


class _Tool:
    """One run of ``jaxpp-opt`` over one input."""

    def __init__(
        self,
        args: argparse.Namespace,
        context: ir.Context,
        make_elements: Callable[[], list[PipelineElement]],
        display_name: str,
        lines: list[str],
    ):
        self.args = args
        self.context = context
        self.make_elements = make_elements
        self.display_name = display_name
        self.lines = lines
        self.print_before = {n for item in args.print_ir_before for n in item.split(",") if n}
        self.print_after = {n for item in args.print_ir_after for n in item.split(",") if n}
        self.timer = PassTimer() if args.timing else None

    # -- printing ------------------------------------------------------------

    def _is_input(self, site: Site) -> bool:
        return site.filename in ("-", "", self.display_name)

    def render(self, site: Site | None, severity: str, message: str) -> str:
        """``FILE:LINE:COL: severity: message``, then the input line and a caret."""
        if site is None:
            return f"loc(unknown): {severity}: {message}"
        ours = self._is_input(site)
        filename = self.display_name if ours else site.filename
        text = f"{filename}:{site.line}:{site.col}: {severity}: {message}"
        if ours and 1 <= site.line <= len(self.lines):
            source = self.lines[site.line - 1].rstrip("\r\n")
            text += f"\n{source}\n{' ' * max(site.col - 1, 0)}^"
        return text

    def print_diagnostic(self, diagnostic: Diagnostic) -> None:
        for severity, location, message in flatten(diagnostic):
            print(self.render(site_of(location), severity, message), file=sys.stderr)

    def module_text(self, module: ir.Module) -> str:
        text = module.operation.get_asm(
            enable_debug_info=self.args.mlir_print_debuginfo,
            print_generic_op_form=self.args.mlir_print_op_generic,
        )
        if self.args.mlir_print_debuginfo:  # parsed from memory, MLIR recorded the file as "-"
            text = text.replace('loc("-":', f"loc({_mlir_string(self.display_name)}:")
        return text

    def dump(self, when: str, element: PipelineElement, module: ir.Module) -> None:
        name = element.name
        header = f"// -----// IR Dump {when} {name} ({name}) //----- //"
        sys.stderr.write(f"{header}\n{self.module_text(module)}\n")
        sys.stderr.flush()

    def report_timing(self) -> None:
        if self.timer is not None:
            self.timer.report(sys.stderr)

    def _before_pass(self, index: int, element: PipelineElement, module: ir.Module) -> None:
        if self.args.print_ir_before_all or element.name in self.print_before:
            self.dump("Before", element, module)
        if self.timer is not None:
            self.timer.start()

    def _after_pass(self, index: int, element: PipelineElement, module: ir.Module) -> None:
        if self.timer is not None:
            self.timer.stop(element.name)
        if self.args.print_ir_after_all or element.name in self.print_after:
            self.dump("After", element, module)

    # -- running -------------------------------------------------------------

    def run_chunk(self, chunk: Chunk) -> _Result:
        """Parses and transforms one chunk (a module)."""
        _check_bounds(chunk.text)
        try:
            module = ir.Module.parse(chunk.text, context=self.context)
        except ir.MLIRError as exc:
            return _Result(None, [diagnostics.from_mlir(d) for d in exc.error_diagnostics])
        _check_depth(module)
        return self.transform(module)

    def run_bytecode(self, data: bytes) -> _Result:
        _check_bounds(data)
        try:
            module = ir.Module.parse(data, context=self.context)
        except ir.MLIRError as exc:
            return _Result(None, [diagnostics.from_mlir(d) for d in exc.error_diagnostics])
        _check_depth(module)
        return self.transform(module)

    def transform(self, module: ir.Module) -> _Result:
        try:
            emitted = run_pipeline(
                module,
                self.make_elements(),
                verify_each=self.args.verify_each,
                before_pass=self._before_pass,
                after_pass=self._after_pass,
            )
        except PipelineFailure as failure:
            if self.args.print_ir_after_failure:
                name = failure.pass_name
                header = f"// -----// IR Dump After {name} Failed ({name}) //----- //"
                sys.stderr.write(f"{header}\n{self.module_text(module)}\n")
            if failure.internal_error is not None:
                self.report_internal_error(failure)
                return _Result(None, [], internal_error=True)
            if not any(d.severity == diagnostics.ERROR for d in failure.diagnostics):
                for diagnostic in failure.diagnostics:
                    self.print_diagnostic(diagnostic)
                print(
                    f"{PROG}: error: pass '{failure.pass_name}' failed without reporting "
                    "an error (a bug in the pass: it must emit one, see diagnostics.error)",
                    file=sys.stderr,
                )
                return _Result(None, [], internal_error=True)
            return _Result(None, list(failure.diagnostics))
        except PipelineSyntaxError as exc:
            raise UsageError(str(exc)) from None
        if self.args.emit_bytecode:
            return _Result(module.operation.get_asm(binary=True), emitted)
        return _Result(self.module_text(module), emitted)

    def report_internal_error(self, failure: PipelineFailure) -> None:
        for diagnostic in failure.diagnostics:
            self.print_diagnostic(diagnostic)
        error = failure.internal_error
        assert error is not None
        if self.args.debug:
            traceback.print_exception(type(error), error, error.__traceback__, file=sys.stderr)
        else:
            print(
                f"{PROG}: internal error in pass '{failure.pass_name}': {error!r}; this is a bug "
                "in the pass, not in the input (rerun with --debug for the traceback)",
                file=sys.stderr,
            )

    def verify(self, chunk: Chunk, found: list[Diagnostic]) -> bool:
        """Checks ``found`` against the chunk's expected-* comments; prints each mismatch."""
        expected, problems = parse_expectations(self.lines, chunk.first, chunk.last)
        ok = not problems
        for line, col, message in problems:
            print(self.render(Site("-", line, col), "error", message), file=sys.stderr)
        for diagnostic in found:
            for severity, location, message in flatten(diagnostic):
                if message.startswith("see current operation:"):
                    continue  # mlir-opt does not attach this note under --verify-diagnostics
                ok &= self._match(expected, severity, location, message)
        for item in expected:
            if not item.matched:
                ok = False
                site = Site("-", item.comment_line, item.comment_col)
                message = f'expected {item.kind} "{item.text}" was not produced'
                print(self.render(site, "error", message), file=sys.stderr)
        return ok

    def _match(
        self, expected: list[Expected], severity: str, location: ir.Location, message: str
    ) -> bool:
        site = site_of(location)
        if site is None:
            candidates = [e for e in expected if e.line is None]
        elif self._is_input(site):
            candidates = [e for e in expected if e.line == site.line]
        else:
            candidates = []
        near_miss = None
        for item in candidates:
            if item.matches(message):
                if item.kind == severity:
                    item.matched = True
                    return True
                near_miss = item
        if near_miss is not None:
            where = Site("-", near_miss.comment_line, near_miss.comment_col)
            text = f"'{severity}' diagnostic emitted when expecting a '{near_miss.kind}'"
            print(self.render(where, "error", text), file=sys.stderr)
        else:
            text = f"unexpected {severity}: {message}"
            print(self.render(site, "error", text), file=sys.stderr)
        return False


def _mlir_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def _check_bounds(text: str | bytes) -> None:
    """Refuses input too large or nested too deep for MLIR's recursive parser."""
    try:
        ir_context.check_parse_bounds(text)
    except MlirParseError as exc:
        raise InputError(str(exc)) from None


def _check_depth(module: ir.Module) -> None:
    try:
        ir_context.check_region_depth(module)
    except MlirParseError as exc:
        raise InputError(str(exc)) from None


def _read_input(path: str) -> tuple[str, bytes]:
    """(display name, contents) of the input file, or of stdin for '-'."""
    if path == "-":
        return "<stdin>", sys.stdin.buffer.read()
    try:
        with open(path, "rb") as handle:
            return path, handle.read()
    except OSError as exc:
        raise InputError(f"cannot read '{path}': {exc.strerror or exc}") from None


def _write_output(path: str, data: str | bytes) -> None:
    if path == "-":
        if isinstance(data, bytes):
            sys.stdout.flush()
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        else:
            sys.stdout.write(data)
            sys.stdout.flush()
        return
    try:
        if isinstance(data, bytes):
            with open(path, "wb") as handle:
                handle.write(data)
        else:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(data)
    except OSError as exc:
        raise InputError(f"cannot write '{path}': {exc.strerror or exc}") from None


def _run(argv: list[str]) -> int:
    load_registry()
    passes = registered_passes()
    parser = build_parser(passes)
    context = make_context()
    remaining, flag_elements = extract_pass_flags(argv, option_names(parser), context)
    args = parser.parse_args(remaining)
    if args.list_passes:
        list_passes(sys.stdout)
        return EXIT_OK
    make_elements = pipeline_factory(args, flag_elements, context)
    display_name, data = _read_input(args.input)

    if data.startswith(BYTECODE_MAGIC):
        if args.split_input_file or args.verify_diagnostics:
            raise UsageError(
                "--split-input-file and --verify-diagnostics need a textual input, not bytecode"
            )
        tool = _Tool(args, context, make_elements, display_name, [])
        with context:
            result = tool.run_bytecode(data)
            for diagnostic in result.diagnostics:
                tool.print_diagnostic(diagnostic)
        tool.report_timing()
        if result.internal_error:
            return EXIT_INTERNAL
        if result.output is None:
            return EXIT_FAILURE
        _write_output(args.output, result.output)
        return EXIT_OK

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"'{display_name}' is neither UTF-8 text nor MLIR bytecode ({exc})"
        ) from None
    if args.emit_bytecode and args.split_input_file:
        raise UsageError("--emit-bytecode cannot be combined with --split-input-file")
    lines = text.splitlines(keepends=True)
    tool = _Tool(args, context, make_elements, display_name, lines)
    outputs: list[str | bytes] = []
    ok, internal_error = True, False
    with context:
        for chunk in split_chunks(lines, args.split_input_file):
            result = tool.run_chunk(chunk)
            internal_error |= result.internal_error
            if args.verify_diagnostics:
                ok &= tool.verify(chunk, result.diagnostics)
            else:
                for diagnostic in result.diagnostics:
                    tool.print_diagnostic(diagnostic)
                ok &= result.output is not None
            outputs.append(result.output if result.output is not None else "")
    tool.report_timing()
    if internal_error:
        return EXIT_INTERNAL
    if len(outputs) == 1 and isinstance(outputs[0], bytes):
        joined: str | bytes = outputs[0]
    else:
        joined = f"{SPLIT_MARKER}\n".join(str(o) for o in outputs)
    if args.output == "-" or ok:  # a file is written only on success, like mlir-opt
        _write_output(args.output, joined)
    return EXIT_OK if ok else EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
