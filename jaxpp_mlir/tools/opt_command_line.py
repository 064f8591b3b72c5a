"""``jaxpp-opt``'s command line: the parser, per-pass flags, ``--list-passes``, the pipeline."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import re
import sys
from collections.abc import Callable
from typing import IO

from jax.interpreters.mlir import ir

from jaxpp_mlir._jax_compat import passmanager
from jaxpp_mlir.passes.base import ModulePass, registered_passes
from jaxpp_mlir.passes.pipeline import PipelineElement, PipelineSyntaxError, parse_pipeline
from jaxpp_mlir.tools.opt_base import PROG, SPLIT_MARKER, UsageError

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
@register_pass (jaxpp_mlir/passes/registry.py imports every file of the
package, so jaxpp-opt sees it), and add its lit tests in tests/lit/<name>/ (a .mlir file
checked with filecheck, and one run with --split-input-file
--verify-diagnostics for its errors).
"""


def load_registry() -> None:
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


def build_parser(passes: dict[str, type[ModulePass]]) -> argparse.ArgumentParser:
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
    parser.add_argument(
        "--timing",
        "--mlir-timing",
        action="store_true",
        help="print the wall time of every pass to stderr at the end (like -mlir-timing)",
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


def option_names(parser: argparse.ArgumentParser) -> set[str]:
    return {
        string.lstrip("-")
        for action in parser._actions  # argparse has no public accessor
        for string in action.option_strings
    }


def mlir_pass_error(context: ir.Context, text: str) -> str | None:
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


def extract_pass_flags(
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
            raise UsageError(f"unknown pass '{name}' (see {PROG} --list-passes)")
        elif mlir_pass_error(context, name) is None:
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


def list_passes(out: IO[str]) -> None:
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


def pipeline_factory(
    args: argparse.Namespace, flag_elements: list[str], context: ir.Context
) -> Callable[[], list[PipelineElement]]:
    """Checks the pipeline once; returns a function giving fresh pass instances per chunk."""
    if args.pipeline is not None and flag_elements:
        raise UsageError(
            "-p/--pass-pipeline cannot be combined with pass flags "
            f"({', '.join('--' + e.split('{')[0] for e in flag_elements)})"
        )
    text = args.pipeline if args.pipeline is not None else ",".join(flag_elements)
    try:
        elements = parse_pipeline(text)
    except PipelineSyntaxError as exc:
        raise UsageError(str(exc)) from None
    for element in elements:
        if element.jaxpp_pass is None:
            problem = mlir_pass_error(context, element.text)
            if problem is not None:
                raise UsageError(
                    f"bad pipeline element '{element.text}': {problem} (see {PROG} --list-passes)"
                )
    names = {e.name for e in elements}
    passes = registered_passes()
    for flag, wanted in (
        ("--print-ir-before", args.print_ir_before),
        ("--print-ir-after", args.print_ir_after),
    ):
        for name in (n for item in wanted for n in item.split(",") if n):
            if name not in names and name not in passes and mlir_pass_error(context, name):
                raise UsageError(f"{flag}: unknown pass '{name}'")

    def make() -> list[PipelineElement]:  # fresh pass instances for each chunk
        return parse_pipeline(text)

    return make
