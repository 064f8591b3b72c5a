"""MLIR contexts and module import: the one place that makes a context or parses text."""

from __future__ import annotations

import io
import re

import numpy as np
from jax.interpreters.mlir import ir

from jaxpp_mlir import partition_options
from jaxpp_mlir.errors import MlirParseError

# MLIR's parser and printer recurse once per nesting level; a few thousand nested
# regions overflow the C stack and kill the interpreter. Real modules nest a few dozen.
MAX_NESTING_DEPTH = 1000
_BYTECODE_MAGIC = b"ML\xefR"
# A test may set this to override JAXPP_MLIR_MAX_MLIR_BYTES.
MAX_INPUT_BYTES: int | None = None


def max_input_bytes() -> int:
    """The largest MLIR input accepted (``JAXPP_MLIR_MAX_MLIR_BYTES``, default 4 GiB)."""
    if MAX_INPUT_BYTES is not None:
        return MAX_INPUT_BYTES
    return int(partition_options.MAX_MLIR_BYTES.value())


_SCAN_CHUNK = 1 << 24
# String literals, comments and the arrow of function types hold no nesting.
_STRINGS_AND_COMMENTS = re.compile(rb'"[^"\\\n]*(?:\\.[^"\\\n]*)*"|//[^\n]*|->')


def make_context() -> ir.Context:
    """A context with func, stablehlo, chlo, sdy and mpmd registered and jaxpp ops allowed."""
    from jaxpp_mlir import _jax_compat

    context = _jax_compat.make_ir_context()
    context.allow_unregistered_dialects = True
    return context


def parse_module(
    text: str | bytes, context: ir.Context | None = None, *, check_depth: bool = True
) -> ir.Module:
    """Parses MLIR text or bytecode; malformed input raises ``MlirParseError``.

    Input larger than ``max_input_bytes()`` or nesting deeper than
    ``MAX_NESTING_DEPTH`` is refused before (text) or right after (bytecode)
    MLIR reads it, so that hostile input cannot overflow MLIR's recursion.
    ``check_depth=False`` skips the walk after reading bytecode, for bytecode
    written from a module JAX itself lowered.
    """
    check_parse_bounds(text)
    context = context or make_context()
    context.allow_unregistered_dialects = True
    try:
        module = ir.Module.parse(text, context=context)
    except ir.MLIRError as exc:
        with context:
            details = "; ".join(
                f"line {_line_of(d.location)}: {d.message}" for d in exc.error_diagnostics
            )
        raise MlirParseError(f"malformed MLIR module: {details or exc}") from None
    if check_depth:
        check_region_depth(module)
    return module


def check_parse_bounds(text: str | bytes) -> None:
    """Raises ``MlirParseError`` when ``text`` is too large, or is MLIR text whose
    brackets nest deeper than ``MAX_NESTING_DEPTH`` (strings and comments skipped)."""
    limit = max_input_bytes()
    if len(text) > limit:
        raise MlirParseError(
            f"MLIR input of {len(text)} bytes exceeds the limit of {limit} bytes "
            f"(set JAXPP_MLIR_MAX_MLIR_BYTES to raise it)"
        )
    data = text.encode(errors="replace") if isinstance(text, str) else text
    if data.startswith(_BYTECODE_MAGIC):
        return  # MLIR's bytecode reader does not recurse; check_region_depth follows
    depth, line = _max_nesting(data)
    if depth > MAX_NESTING_DEPTH:
        raise MlirParseError(
            f"MLIR text nests deeper than {MAX_NESTING_DEPTH} levels (line {line}); "
            f"refusing to parse it"
        )


def _max_nesting(data: bytes) -> tuple[int, int]:
    """The deepest bracket nesting of MLIR text and the first line reaching it."""
    code = _STRINGS_AND_COMMENTS.sub(b"", data)
    steps = np.zeros(256, dtype=np.int8)
    steps[list(b"{([<")] = 1
    steps[list(b"})]>")] = -1
    depth = 0
    for start in range(0, len(code), _SCAN_CHUNK):
        chunk = np.frombuffer(
            code, dtype=np.uint8, count=min(_SCAN_CHUNK, len(code) - start), offset=start
        )
        levels = depth + np.cumsum(steps[chunk], dtype=np.int64)
        if levels.size and levels.max() > MAX_NESTING_DEPTH:
            where = start + int(np.argmax(levels > MAX_NESTING_DEPTH))
            return int(levels.max()), code.count(b"\n", 0, where) + 1
        depth = int(levels[-1]) if levels.size else depth
    return depth, 0


def check_region_depth(module: ir.Module) -> None:
    """Raises ``MlirParseError`` when regions nest deeper than ``MAX_NESTING_DEPTH``
    (walked without recursion, before anything recursive touches the module)."""
    stack = [(module.operation, 0)]
    while stack:
        operation, depth = stack.pop()
        if depth > MAX_NESTING_DEPTH:
            raise MlirParseError(
                f"MLIR module nests regions deeper than {MAX_NESTING_DEPTH} levels; "
                f"refusing to process it"
            )
        for region in operation.regions:
            for block in region.blocks:
                stack.extend((op.operation, depth + 1) for op in block.operations)


def copy_module(module: ir.Module) -> ir.Module:
    """An independent copy of ``module`` in the same context."""
    return ir.Module.parse(module.operation.get_asm(binary=True), context=module.context)


def bytecode(module: ir.Module) -> bytes:
    """``module`` as MLIR bytecode, locations included: ``parse_module`` reads it
    several times faster than the same module as text, and to the same module."""
    buffer = io.BytesIO()
    module.operation.write_bytecode(buffer)
    return buffer.getvalue()


def _line_of(location: ir.Location) -> str:
    location = ir.Location.from_attr(location.attr)
    if isinstance(location, ir.FileLineColLoc):
        return f"{location.start_line}:{location.start_col}"
    return "?"
