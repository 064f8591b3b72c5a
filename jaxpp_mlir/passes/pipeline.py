"""Parsing and running pass pipelines that mix jaxpp passes and MLIR passes.

A pipeline is written as MLIR writes it,
``builtin.module(jaxpp-outline-stages,canonicalize)``, or as a bare comma list
(``jaxpp-inline-calls,cse``). Each element is a registered jaxpp pass (run as a
Python pass, options in ``{key=value ...}``) or any textual MLIR pass the
bindings know (``canonicalize``, ``cse``, ``func.func(...)``...).

Each element runs in its own ``PassManager`` so that the IR can be observed
(printed, dumped) between any two passes; the verifier runs after every pass
unless ``verify_each`` is off, except after a jaxpp pass that returned
``UNCHANGED`` (the IR it leaves is the IR verified before it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from jax.interpreters.mlir import ir

from jaxpp_mlir import diagnostics
from jaxpp_mlir._jax_compat import passmanager
from jaxpp_mlir.passes.base import ModulePass, PassOptionError, PassRun, get_pass_class


class PipelineSyntaxError(ValueError):
    """The pipeline text does not parse or names an unknown pass."""


@dataclasses.dataclass
class PipelineElement:
    """One step: a jaxpp pass instance, or a textual MLIR pipeline element."""

    name: str
    jaxpp_pass: ModulePass | None = None
    text: str = ""

    def __str__(self) -> str:
        if self.jaxpp_pass is not None:
            return self.name + self.jaxpp_pass.options_text()
        return self.text


class PipelineFailure(Exception):
    """A pass failed; ``diagnostics`` holds what it reported, located, and ``category``
    the kind of error it said it was (``diagnostics.PassFailed``)."""

    def __init__(
        self,
        pass_name: str,
        diagnostics_: list[diagnostics.Diagnostic],
        internal_error: Exception | None = None,
        category: type[Exception] | None = None,
        *,
        invalid_ir: bool = False,
    ):
        self.pass_name = pass_name
        self.diagnostics = diagnostics_
        self.internal_error = internal_error
        self.category = category
        self.invalid_ir = invalid_ir  # the pass ran, and MLIR's verifier refused its IR
        text = "; ".join(d.render() for d in diagnostics_) or "no diagnostic"
        super().__init__(f"pass '{pass_name}' failed: {text}")


Hook = Callable[[int, PipelineElement, ir.Module], None]


def parse_pipeline(text: str) -> list[PipelineElement]:
    """Parses ``builtin.module(a{k=v},b)`` or ``a,b`` into pipeline elements."""
    body = text.strip()
    if body.startswith("builtin.module(") and body.endswith(")"):
        body = body[len("builtin.module(") : -1]
    elif body.startswith("builtin.module"):
        raise PipelineSyntaxError(f"pipeline '{text}': unbalanced parentheses")
    elements = []
    for item in _split_top_level(body, ","):
        item = item.strip()
        if not item:
            continue
        elements.append(_parse_element(item))
    return elements


def make_element(pass_: ModulePass) -> PipelineElement:
    return PipelineElement(name=pass_.name, jaxpp_pass=pass_)


def run_pipeline(
    module: ir.Module,
    elements: list[PipelineElement],
    *,
    verify_each: bool = True,
    before_pass: Hook | None = None,
    after_pass: Hook | None = None,
    completed: set[str] | None = None,
) -> list[diagnostics.Diagnostic]:
    """Runs ``elements`` in order on ``module`` in place.

    Returns the warnings and remarks the passes emitted; raises
    ``PipelineFailure`` with the located diagnostics when a pass fails.
    ``completed`` (default: a new set) holds the names of the jaxpp passes that ran on
    ``module`` so far, and receives those this run completes: a caller running several
    pipelines on one module passes the same set to each.
    """
    completed = set() if completed is None else completed
    collected: list[diagnostics.Diagnostic] = []
    diagnostics.take_pending()
    for index, element in enumerate(elements):
        if before_pass is not None:
            before_pass(index, element, module)
        with module.context:
            pm = passmanager.PassManager("builtin.module")
            pass_run = (
                PassRun(element.jaxpp_pass, completed) if element.jaxpp_pass is not None else None
            )
            if pass_run is not None:
                pm.add(pass_run, name=element.name, argument=element.name)
            else:
                try:
                    pm.add(element.text)
                except ValueError as exc:
                    raise PipelineSyntaxError(_first_line(str(exc))) from None
            # A jaxpp pass is verified after it runs, only if it says it changed the IR.
            pm.enable_verifier(verify_each and pass_run is None)
            ran = False
            try:
                pm.run(module.operation)
                ran = True
                if verify_each and pass_run is not None and pass_run.changed:
                    module.operation.verify()
            except ir.MLIRError as exc:
                collected.extend(diagnostics.take_pending())
                found = [diagnostics.from_mlir(d) for d in exc.error_diagnostics]
                internal = pass_run.internal_error if pass_run is not None else None
                category = pass_run.failure_category if pass_run is not None else None
                raise PipelineFailure(
                    element.name, collected + found, internal, category, invalid_ir=ran
                ) from None
        collected.extend(diagnostics.take_pending())
        if pass_run is not None:
            completed.add(element.name)
        if after_pass is not None:
            after_pass(index, element, module)
    return collected


def _parse_element(item: str) -> PipelineElement:
    name, _, rest = item.partition("{")
    name = name.strip()
    if "(" in name:  # a nested textual pipeline such as func.func(cse)
        return PipelineElement(name=name.split("(")[0], text=item)
    pass_class = get_pass_class(name)
    if pass_class is None:
        if name.startswith("jaxpp-"):
            raise PipelineSyntaxError(f"unknown pass '{name}' (see jaxpp-opt --list-passes)")
        return PipelineElement(name=name, text=item)
    options: dict[str, str] = {}
    if rest:
        if not rest.rstrip().endswith("}"):
            raise PipelineSyntaxError(f"pass '{name}': options must be closed by '}}'")
        for option in _split_top_level(rest.rstrip()[:-1], " "):
            if not option.strip():
                continue
            key, eq, value = option.partition("=")
            if not eq:
                value = "true"
            key, value = key.strip(), value.strip().strip("'\"")
            same = [k for k in options if k.replace("_", "-") == key.replace("_", "-")]
            if same:
                raise PipelineSyntaxError(
                    f"pass '{name}': option '{key}' is given twice ({same[0]}="
                    f"{options[same[0]]} and {key}={value}): give each option once, as MLIR "
                    "requires"
                )
            options[key] = value
    try:
        return PipelineElement(name=name, jaxpp_pass=pass_class.from_options(options))
    except PassOptionError as exc:
        raise PipelineSyntaxError(str(exc)) from None


def _split_top_level(text: str, separator: str) -> list[str]:
    parts, depth, current, quote = [], 0, [], ""
    for char in text:
        if quote:
            current.append(char)
            if char == quote:
                quote = ""
            continue
        if char in "'\"":
            quote = char
        elif char in "({[":
            depth += 1
        elif char in ")}]":
            depth -= 1
            if depth < 0:
                raise PipelineSyntaxError(f"pipeline '{text}': unbalanced brackets")
        if char == separator and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth != 0 or quote:
        raise PipelineSyntaxError(f"pipeline '{text}': unbalanced brackets or quotes")
    parts.append("".join(current))
    return parts


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text
