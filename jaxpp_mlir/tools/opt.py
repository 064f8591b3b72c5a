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
import dataclasses
import importlib
import os
import re
import signal
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import IO, NamedTuple

from jax.extend.mlir import ir, passmanager

from jaxpp_mlir import diagnostics, ir_context
from jaxpp_mlir.diagnostics import Diagnostic
from jaxpp_mlir.errors import MlirParseError
from jaxpp_mlir.ir_context import make_context
from jaxpp_mlir.passes.base import ModulePass, registered_passes
from jaxpp_mlir.passes.pipeline import (
    PipelineElement,
    PipelineFailure,
    PipelineSyntaxError,
    parse_pipeline,
    run_pipeline,
)

PROG = "jaxpp-opt"
SPLIT_MARKER = "// -----"
BYTECODE_MAGIC = b"ML\xefR"

# Exit codes.
EXIT_OK = 0
EXIT_FAILURE = 1  # the input does not parse, a pass failed, or diagnostics did not verify
EXIT_USAGE = 2  # the command line is wrong (unknown pass or flag, bad option)
EXIT_INTERNAL = 3  # a bug in jaxpp-opt or in a pass
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE  # the reader of the output went away, as for `cat`

_REGISTRY_MODULE = "jaxpp_mlir.passes.registry"

_DESCRIPTION = """\
Runs jaxpp passes and MLIR passes over an MLIR module, like mlir-opt.

Writing the pipeline (three equivalent forms; pass options go in {key=value ...}):
  --pass-pipeline='builtin.module(jaxpp-xyz{key=value key2=value},canonicalize)'
  -p 'jaxpp-xyz{key=value},canonicalize'      (the same elements, no wrapper)
  --jaxpp-xyz='key=value key2=value' --canonicalize
                                              (one flag per pass, run in command-line order)
Elements are registered jaxpp passes (see --list-passes) or any textual pass the
MLIR bindings know (canonicalize, cse, symbol-dce, func.func(cse), ...). A
pipeline given with -p/--pass-pipeline cannot be mixed with pass flags.
"""

_EPILOG = """\
Diagnostics print as FILE:LINE:COL: error: MESSAGE, with the lines of the input
file (also with --split-input-file). Exit status: 0 on success, 1 when the input
does not parse, a pass fails or --verify-diagnostics finds a mismatch, 2 for a
wrong command line, 3 for an internal error (rerun with --debug for the Python
traceback), 141 without a word when the output is closed early (`| head`), as
for a tool killed by SIGPIPE.

Writing and registering a new pass: put one pass in jaxpp_mlir/passes/<name>.py
as a dataclass subclass of jaxpp_mlir.passes.base.ModulePass with a kebab-case
name (name = "jaxpp-<verb>-<object>"), a docstring whose first line is the
summary --list-passes shows, options as dataclass fields with
field(default=..., metadata={"help": ..., "min": 0}) ("min": a lower bound
checked when the pass is built), and run(self, module) that edits the
module in place and reports user errors with `raise diagnostics.error(op, msg)`
(warnings: diagnostics.warning(op, msg)); decorate the class with
@register_pass, import the module from jaxpp_mlir/passes/registry.py so that
jaxpp-opt sees it, and add its lit tests in tests/lit/<name>/ (a .mlir file
checked with filecheck, and one run with --split-input-file
--verify-diagnostics for its errors).
"""


class _UsageError(Exception):
    """The command line is wrong; exit with ``EXIT_USAGE``."""


class _InputError(Exception):
    """The input cannot be read or the output cannot be written; exit with ``EXIT_FAILURE``."""


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
    except _UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except _InputError as exc:
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


# ----------------------------------------------------------------------------
# Command line.


def _load_registry() -> None:
    """Imports the module that registers every jaxpp pass, if it exists yet."""
    try:
        importlib.import_module(_REGISTRY_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name != _REGISTRY_MODULE:
            _warn_registry(exc)
    except ImportError as exc:
        _warn_registry(exc)


def _warn_registry(exc: Exception) -> None:
    print(
        f"{PROG}: warning: cannot import {_REGISTRY_MODULE} ({exc}); "
        "only the passes registered so far are available",
        file=sys.stderr,
    )


def _build_parser(passes: dict[str, type[ModulePass]]) -> argparse.ArgumentParser:
    description = _DESCRIPTION
    if passes:
        lines = ["", "jaxpp passes (details: --list-passes):"]
        for name, pass_class in passes.items():
            flag = f"  --{name}" + ("[='key=value ...']" if pass_class.option_fields() else "")
            lines.append(flag)
            lines.append(f"        {pass_class.summary()}")
        description += "\n".join(lines) + "\n"
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=description,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument(
        "input", nargs="?", default="-", help="input file, MLIR text or bytecode ('-': stdin)"
    )
    parser.add_argument(
        "-o", dest="output", default="-", metavar="FILE", help="output file ('-': stdout)"
    )
    parser.add_argument(
        "-p",
        "--pass-pipeline",
        dest="pipeline",
        metavar="PIPELINE",
        help="the pipeline: 'builtin.module(a{k=v},b)' or 'a{k=v},b'",
    )
    parser.add_argument(
        "--list-passes",
        action="store_true",
        help="list the registered jaxpp passes with their options, and exit",
    )
    group = parser.add_argument_group("IR printing (to stderr)")
    group.add_argument(
        "--print-ir-before-all",
        "--mlir-print-ir-before-all",
        action="store_true",
        help="print the IR before every pass",
    )
    group.add_argument(
        "--print-ir-after-all",
        "--mlir-print-ir-after-all",
        action="store_true",
        help="print the IR after every pass",
    )
    group.add_argument(
        "--print-ir-before",
        "--mlir-print-ir-before",
        action="append",
        default=[],
        metavar="PASS",
        help="print the IR before each run of PASS (repeatable, or a comma list)",
    )
    group.add_argument(
        "--print-ir-after",
        "--mlir-print-ir-after",
        action="append",
        default=[],
        metavar="PASS",
        help="print the IR after each run of PASS (repeatable, or a comma list)",
    )
    group.add_argument(
        "--print-ir-after-failure",
        "--mlir-print-ir-after-failure",
        action="store_true",
        help="print the IR after a pass that failed",
    )
    group = parser.add_argument_group("output")
    group.add_argument(
        "--mlir-print-debuginfo",
        action="store_true",
        help="print locations (loc(...)) with the IR",
    )
    group.add_argument(
        "--mlir-print-op-generic", action="store_true", help="print ops in their generic form"
    )
    group.add_argument(
        "--emit-bytecode", action="store_true", help="write MLIR bytecode instead of text"
    )
    group = parser.add_argument_group("testing")
    group.add_argument(
        "--split-input-file",
        action="store_true",
        help=f"split the input on lines '{SPLIT_MARKER}' and process each chunk as its own "
        f"module; the outputs are joined by '{SPLIT_MARKER}'",
    )
    group.add_argument(
        "--verify-diagnostics",
        action="store_true",
        help="check the diagnostics against the '// expected-error {{...}}' comments "
        "(also expected-warning, expected-remark, expected-note; @+N, @-N, @above, "
        "@below, @unknown; expected-error-re for {{regex}} parts)",
    )
    group.add_argument(
        "--verify-each",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run the verifier after each pass (the input is always verified after parsing)",
    )
    group.add_argument(
        "--allow-unregistered-dialect",
        action="store_true",
        help="accepted for mlir-opt compatibility: unregistered ops are always allowed",
    )
    group.add_argument(
        "--debug",
        action="store_true",
        help="print the Python traceback of an internal error",
    )
    return parser


def _option_names(parser: argparse.ArgumentParser) -> set[str]:
    return {
        string.lstrip("-")
        for action in parser._actions  # argparse has no public accessor
        for string in action.option_strings
    }


def _mlir_pass_error(context: ir.Context, text: str) -> str | None:
    """None if ``text`` is a textual MLIR pipeline element the bindings know, else why not."""
    with context:
        try:
            passmanager.PassManager.parse(f"builtin.module({text})")
        except ValueError as exc:
            return _mlir_message(str(exc), text)
    return None


def _mlir_message(message: str, text: str) -> str:
    """Condenses the multi-line pipeline-parser message of MLIR into one line."""
    parts = []
    for line in message.splitlines():
        line = line.strip()
        if not line or set(line) <= {"^", " "} or line in (text, f"builtin.module({text})"):
            continue
        line = re.sub(r"^.*?error: ", "", line)
        line = re.sub(r"^<Pass-Options-Parser>: ", "", line)
        parts.append(line)
    return "; ".join(parts) or message.strip()


def _extract_pass_flags(
    argv: list[str], option_names: set[str], context: ir.Context
) -> tuple[list[str], list[str]]:
    """Pulls ``--<pass>[=options]`` flags out of ``argv``, in order.

    Returns the remaining arguments and the pipeline elements as text
    (``name`` or ``name{options}``).
    """
    passes = registered_passes()
    remaining, elements = [], []
    for index, arg in enumerate(argv):
        if arg == "--":
            remaining.extend(argv[index:])
            break
        if not arg.startswith("--") or len(arg) == 2:
            remaining.append(arg)
            continue
        name, has_value, value = arg[2:].partition("=")
        if name in option_names:
            remaining.append(arg)
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1].strip()  # quotes that no shell removed
        if value.startswith("{") and value.endswith("}"):
            value = value[1:-1]
        element = f"{name}{{{value}}}" if has_value and value else name
        if name in passes:
            elements.append(element)
        elif name.startswith("jaxpp-"):
            raise _UsageError(f"unknown pass '{name}' (see {PROG} --list-passes)")
        elif _mlir_pass_error(context, name) is None:
            elements.append(element)
        else:
            remaining.append(arg)  # argparse reports it as unrecognized
    return remaining, elements


def _format_default(field: dataclasses.Field) -> str:
    if field.default is not dataclasses.MISSING:
        value = field.default
    elif field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
    else:
        return "required"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value) or "''"
    if value == "":
        return "''"
    return str(value)


def _format_type(field: dataclasses.Field) -> str:
    if isinstance(field.type, str):
        return field.type
    return getattr(field.type, "__name__", str(field.type))


def _list_passes(out: IO[str]) -> None:
    passes = registered_passes()
    if not passes:
        out.write("No jaxpp pass is registered.\n")
    else:
        out.write(f"Registered jaxpp passes ({len(passes)}):\n")
    for name, pass_class in passes.items():
        out.write(f"\n  {name}\n")
        out.write(f"    {pass_class.summary() or '(no summary)'}\n")
        fields = pass_class.option_fields()
        if not fields:
            out.write("    options: none\n")
            continue
        out.write("    options:\n")
        for field in fields:
            key = field.name.replace("_", "-")
            out.write(f"      {key}: {_format_type(field)} = {_format_default(field)}\n")
            help_text = field.metadata.get("help", "")
            if help_text:
                out.write(f"          {help_text}\n")
    out.write(
        "\nAny textual MLIR pass the bindings know (canonicalize, cse, symbol-dce, ...) "
        "can be used too.\n"
    )


# ----------------------------------------------------------------------------
# Input, chunks and expected diagnostics.


@dataclasses.dataclass(frozen=True)
class _Site:
    """A file position a diagnostic points at; ``filename`` as MLIR recorded it."""

    filename: str
    line: int
    col: int


def _site_of(location: ir.Location) -> _Site | None:
    """The file position of ``location`` (searching nested locations), None if unknown."""
    text = diagnostics.format_location(location)
    if text == "loc(unknown)":
        return None
    filename, line, col = text.rsplit(":", 2)
    return _Site(filename, int(line), int(col))


@dataclasses.dataclass
class _Expected:
    """One ``// expected-<kind> @<where> {{text}}`` comment."""

    kind: str
    line: int | None  # None: @unknown (a diagnostic without a file location)
    comment_line: int
    comment_col: int
    text: str
    regex: re.Pattern[str] | None = None
    matched: bool = False

    def matches(self, message: str) -> bool:
        if self.regex is not None:
            return self.regex.search(message) is not None
        return self.text in message


_EXPECTED_RE = re.compile(
    r"expected-(error|note|remark|warning)(-re)? *(@([+-][0-9]+|above|below|unknown))? *"
    r"\{\{(.*)\}\}$"
)


def _parse_expectations(lines: list[str], first: int, last: int) -> tuple[list[_Expected], list]:
    """Reads the expected-* comments of lines ``first..last`` (0-based, inclusive).

    Follows mlir-opt: ``@above`` means the last line above that holds no
    expectation, ``@below`` the next such line below. Returns the expectations
    and ``(line, col, message)`` for each malformed one.
    """
    expected: list[_Expected] = []
    problems: list[tuple[int, int, str]] = []
    last_plain_line = first
    pending_below: list[_Expected] = []
    for index in range(first, last + 1):
        match = _EXPECTED_RE.search(lines[index].rstrip())
        if match is None:
            for item in pending_below:
                item.line = index + 1
            pending_below.clear()
            last_plain_line = index
            continue
        kind, is_regex, _, where, text = match.groups()
        item = _Expected(kind, index + 1, index + 1, match.start() + 1, text)
        if is_regex:
            try:
                item.regex = _compile_expected_regex(text)
            except (ValueError, re.error) as exc:
                problems.append((index + 1, match.start() + 1, f"invalid regex: {exc}"))
                continue
        if where is None:
            pass
        elif where[0] in "+-":
            item.line = index + 1 + int(where)
        elif where == "unknown":
            item.line = None
        elif where == "above":
            item.line = last_plain_line + 1
        else:  # below: the next line without an expectation (the last line if none)
            item.line = last + 1
            pending_below.append(item)
        expected.append(item)
    return expected, problems


def _compile_expected_regex(text: str) -> re.Pattern[str]:
    """``foo {{[0-9]+}} bar``: literal text with regular expressions inside ``{{ }}``."""
    parts, pos = [], 0
    while True:
        start = text.find("{{", pos)
        if start < 0:
            parts.append(re.escape(text[pos:]))
            break
        end = text.find("}}", start + 2)
        if end < 0:
            raise ValueError("'{{' without its closing '}}'")
        parts.append(re.escape(text[pos:start]))
        parts.append(f"(?:{text[start + 2 : end]})")
        pos = end + 2
    return re.compile("".join(parts))


@dataclasses.dataclass
class _Chunk:
    """A piece of the input; ``text`` is padded with empty lines to keep line numbers."""

    text: str
    first: int  # 0-based index of its first line in the input
    last: int  # 0-based index of its last line


def _split_chunks(lines: list[str], split: bool) -> list[_Chunk]:
    if not split:
        return [_Chunk("".join(lines), 0, max(len(lines) - 1, 0))]
    chunks, start = [], 0
    for index, line in enumerate(lines + [SPLIT_MARKER]):
        if line.rstrip() == SPLIT_MARKER:
            text = "\n" * start + "".join(lines[start:index])
            chunks.append(_Chunk(text, start, max(index - 1, start)))
            start = index + 1
    return chunks


# ----------------------------------------------------------------------------
# Running.


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

    # -- printing ------------------------------------------------------------

    def _is_input(self, site: _Site) -> bool:
        return site.filename in ("-", "", self.display_name)

    def render(self, site: _Site | None, severity: str, message: str) -> str:
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
        for severity, location, message in _flatten(diagnostic):
            print(self.render(_site_of(location), severity, message), file=sys.stderr)

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

    def _before_pass(self, index: int, element: PipelineElement, module: ir.Module) -> None:
        if self.args.print_ir_before_all or element.name in self.print_before:
            self.dump("Before", element, module)

    def _after_pass(self, index: int, element: PipelineElement, module: ir.Module) -> None:
        if self.args.print_ir_after_all or element.name in self.print_after:
            self.dump("After", element, module)

    # -- running -------------------------------------------------------------

    def run_chunk(self, chunk: _Chunk) -> _Result:
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
            raise _UsageError(str(exc)) from None
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

    def verify(self, chunk: _Chunk, found: list[Diagnostic]) -> bool:
        """Checks ``found`` against the chunk's expected-* comments; prints each mismatch."""
        expected, problems = _parse_expectations(self.lines, chunk.first, chunk.last)
        ok = not problems
        for line, col, message in problems:
            print(self.render(_Site("-", line, col), "error", message), file=sys.stderr)
        for diagnostic in found:
            for severity, location, message in _flatten(diagnostic):
                if message.startswith("see current operation:"):
                    continue  # mlir-opt does not attach this note under --verify-diagnostics
                ok &= self._match(expected, severity, location, message)
        for item in expected:
            if not item.matched:
                ok = False
                site = _Site("-", item.comment_line, item.comment_col)
                message = f'expected {item.kind} "{item.text}" was not produced'
                print(self.render(site, "error", message), file=sys.stderr)
        return ok

    def _match(
        self, expected: list[_Expected], severity: str, location: ir.Location, message: str
    ) -> bool:
        site = _site_of(location)
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
            where = _Site("-", near_miss.comment_line, near_miss.comment_col)
            text = f"'{severity}' diagnostic emitted when expecting a '{near_miss.kind}'"
            print(self.render(where, "error", text), file=sys.stderr)
        else:
            text = f"unexpected {severity}: {message}"
            print(self.render(site, "error", text), file=sys.stderr)
        return False


def _flatten(diagnostic: Diagnostic) -> list[tuple[str, ir.Location, str]]:
    items = [(diagnostic.severity, diagnostic.location, diagnostic.message)]
    for note in diagnostic.notes:
        items.extend(_flatten(note))
    return items


def _mlir_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def _check_bounds(text: str | bytes) -> None:
    """Refuses input too large or nested too deep for MLIR's recursive parser."""
    try:
        ir_context.check_parse_bounds(text)
    except MlirParseError as exc:
        raise _InputError(str(exc)) from None


def _check_depth(module: ir.Module) -> None:
    try:
        ir_context.check_region_depth(module)
    except MlirParseError as exc:
        raise _InputError(str(exc)) from None


def _read_input(path: str) -> tuple[str, bytes]:
    """(display name, contents) of the input file, or of stdin for '-'."""
    if path == "-":
        return "<stdin>", sys.stdin.buffer.read()
    try:
        with open(path, "rb") as handle:
            return path, handle.read()
    except OSError as exc:
        raise _InputError(f"cannot read '{path}': {exc.strerror or exc}") from None


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
        raise _InputError(f"cannot write '{path}': {exc.strerror or exc}") from None


def _pipeline_factory(
    args: argparse.Namespace, flag_elements: list[str], context: ir.Context
) -> Callable[[], list[PipelineElement]]:
    """Checks the pipeline once; returns a function giving fresh pass instances per chunk."""
    if args.pipeline is not None and flag_elements:
        raise _UsageError(
            "-p/--pass-pipeline cannot be combined with pass flags "
            f"({', '.join('--' + e.split('{')[0] for e in flag_elements)})"
        )
    text = args.pipeline if args.pipeline is not None else ",".join(flag_elements)
    try:
        elements = parse_pipeline(text)
    except PipelineSyntaxError as exc:
        raise _UsageError(str(exc)) from None
    for element in elements:
        if element.jaxpp_pass is None:
            problem = _mlir_pass_error(context, element.text)
            if problem is not None:
                raise _UsageError(
                    f"bad pipeline element '{element.text}': {problem} (see {PROG} --list-passes)"
                )
    names = {e.name for e in elements}
    passes = registered_passes()
    for flag, wanted in (
        ("--print-ir-before", args.print_ir_before),
        ("--print-ir-after", args.print_ir_after),
    ):
        for name in (n for item in wanted for n in item.split(",") if n):
            if name not in names and name not in passes and _mlir_pass_error(context, name):
                raise _UsageError(f"{flag}: unknown pass '{name}'")

    def make() -> list[PipelineElement]:  # fresh pass instances for each chunk
        return parse_pipeline(text)

    return make


def _run(argv: list[str]) -> int:
    _load_registry()
    passes = registered_passes()
    parser = _build_parser(passes)
    context = make_context()
    remaining, flag_elements = _extract_pass_flags(argv, _option_names(parser), context)
    args = parser.parse_args(remaining)
    if args.list_passes:
        _list_passes(sys.stdout)
        return EXIT_OK
    make_elements = _pipeline_factory(args, flag_elements, context)
    display_name, data = _read_input(args.input)

    if data.startswith(BYTECODE_MAGIC):
        if args.split_input_file or args.verify_diagnostics:
            raise _UsageError(
                "--split-input-file and --verify-diagnostics need a textual input, not bytecode"
            )
        tool = _Tool(args, context, make_elements, display_name, [])
        with context:
            result = tool.run_bytecode(data)
            for diagnostic in result.diagnostics:
                tool.print_diagnostic(diagnostic)
        if result.internal_error:
            return EXIT_INTERNAL
        if result.output is None:
            return EXIT_FAILURE
        _write_output(args.output, result.output)
        return EXIT_OK

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _InputError(
            f"'{display_name}' is neither UTF-8 text nor MLIR bytecode ({exc})"
        ) from None
    if args.emit_bytecode and args.split_input_file:
        raise _UsageError("--emit-bytecode cannot be combined with --split-input-file")
    lines = text.splitlines(keepends=True)
    tool = _Tool(args, context, make_elements, display_name, lines)
    outputs: list[str | bytes] = []
    ok, internal_error = True, False
    with context:
        for chunk in _split_chunks(lines, args.split_input_file):
            result = tool.run_chunk(chunk)
            internal_error |= result.internal_error
            if args.verify_diagnostics:
                ok &= tool.verify(chunk, result.diagnostics)
            else:
                for diagnostic in result.diagnostics:
                    tool.print_diagnostic(diagnostic)
                ok &= result.output is not None
            outputs.append(result.output if result.output is not None else "")
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
