"""Emitting the plan's executables: each stage or fused module's text, exactly once.

While the plan is built, an executable is only a ``ModuleSource``: the stage
function it runs (``Standalone``) or the stage functions a fused run calls and
how their values are wired (``Fused``). Once the plan knows every executable
and the buffers donation lets each reuse, ``emit_modules`` prints each module.
"""

from __future__ import annotations

from collections.abc import Mapping

from jax.interpreters.mlir import ir

from jaxpp_mlir.plan.stage_modules import (
    Source,
    StageFunctions,
    boundary_shardings,
    fused_boundary_shardings,
    fused_module,
    standalone_module,
)
from jaxpp_mlir.runtime import records

Shardings = tuple[list[ir.Attribute | None], list[ir.Attribute | None]]


@records.frozen
class Standalone:
    """An executable that runs stage function ``callee`` alone."""

    callee: str


@records.frozen
class Fused:
    """An executable that runs ``callees`` in order: part ``j``'s operands come from
    ``wiring[j]``; the module's inputs have ``input_types``; it returns the parts'
    results at positions ``kept`` (all of them when ``None``)."""

    callees: tuple[str, ...]
    wiring: tuple[tuple[Source, ...], ...]
    input_types: tuple[ir.Type, ...]
    kept: tuple[int, ...] | None = None


ModuleSource = Standalone | Fused


def module_shardings(functions: StageFunctions, source: ModuleSource) -> Shardings:
    """The ``sdy.sharding`` of each input and output of the executable ``source`` makes."""
    if isinstance(source, Fused):
        return fused_boundary_shardings(
            functions, source.callees, source.wiring, len(source.input_types), source.kept
        )
    return boundary_shardings(functions, source.callee)


def emit_module(
    functions: StageFunctions, source: ModuleSource, aliases: dict[int, int] | None = None
) -> str:
    """The standalone StableHLO text of ``source``; ``aliases`` maps an input to the
    output that may reuse its buffer."""
    if isinstance(source, Fused):
        return fused_module(
            functions, source.callees, source.wiring, source.input_types, aliases, source.kept
        )
    return standalone_module(functions, source.callee, aliases)


def emit_modules(
    functions: StageFunctions,
    sources: Mapping[str, ModuleSource],
    aliases: Mapping[str, dict[int, int]],
) -> dict[str, str]:
    """Every executable's module text, by name (each made once; a standalone module
    whose function is structurally equivalent to one printed before has its text)."""
    return {
        name: emit_module(functions, source, aliases.get(name)) for name, source in sources.items()
    }
