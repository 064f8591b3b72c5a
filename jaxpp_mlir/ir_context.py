"""MLIR contexts and module import: the one place that makes a context or parses text."""

from __future__ import annotations

from jax.extend.mlir import ir

from jaxpp_mlir.errors import MlirParseError


def make_context() -> ir.Context:
    """A context with func, stablehlo, chlo, sdy and mpmd registered and jaxpp ops allowed."""
    from jaxpp_mlir import _jax_compat

    context = _jax_compat.make_ir_context()
    context.allow_unregistered_dialects = True
    return context


def parse_module(text: str | bytes, context: ir.Context | None = None) -> ir.Module:
    """Parses MLIR text or bytecode; malformed input raises ``MlirParseError``."""
    context = context or make_context()
    context.allow_unregistered_dialects = True
    try:
        return ir.Module.parse(text, context=context)
    except ir.MLIRError as exc:
        with context:
            details = "; ".join(
                f"line {_line_of(d.location)}: {d.message}" for d in exc.error_diagnostics
            )
        raise MlirParseError(f"malformed MLIR module: {details or exc}") from None


def copy_module(module: ir.Module) -> ir.Module:
    """An independent copy of ``module`` in the same context."""
    return ir.Module.parse(module.operation.get_asm(binary=True), context=module.context)


def _line_of(location: ir.Location) -> str:
    location = ir.Location.from_attr(location.attr)
    if isinstance(location, ir.FileLineColLoc):
        return f"{location.start_line}:{location.start_col}"
    return "?"
