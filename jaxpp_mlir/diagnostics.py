"""Located diagnostics for passes.

A pass reports a user error with ``raise error(op, "message")``: the message is
emitted as an MLIR diagnostic at the op's location (``file:line:col`` of the
input, or the JAX source location carried in ``loc(...)``), and the returned
``PassFailed`` unwinds the pass, which then signals failure to the pass
manager. ``partition()`` turns the collected diagnostics into a
``PartitionError`` (of the ``category`` the error names, where it names one: a
refused schedule is also a ``ScheduleError``); ``jaxpp-opt`` prints them as
``mlir-opt`` does.

Warnings and remarks do not stop a pass. The Python bindings can only emit
errors, so warnings and remarks are collected here and read by the pipeline
runner after each pass.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from jax.interpreters.mlir import ir

from jaxpp_mlir.runtime import records

ERROR = "error"
WARNING = "warning"
REMARK = "remark"
NOTE = "note"


class PassFailed(Exception):
    """Raised inside a pass after its error diagnostic was emitted; ``category`` is the
    kind of ``JaxppError`` it is besides a ``PartitionError`` (None: just that)."""

    def __init__(self, message: str, category: type[Exception] | None = None):
        super().__init__(message)
        self.category = category


@records.frozen
class Diagnostic:
    severity: str
    location: ir.Location
    message: str
    notes: tuple[Diagnostic, ...] = ()  # attached notes (an MLIR verifier adds some)

    def render(self, filename: str | None = None) -> str:
        return f"{format_location(self.location, filename)}: {self.severity}: {self.message}"


_pending: list[Diagnostic] = []


def error(
    where: ir.Operation | ir.OpView | ir.Location,
    message: str,
    category: type[Exception] | None = None,
) -> PassFailed:
    """Emits ``message`` as an error at ``where``; returns the exception to raise
    (``category``: see ``PassFailed``)."""
    location = _location_of(where)
    location.emit_error(message)
    return PassFailed(message, category)


def warning(where: ir.Operation | ir.OpView | ir.Location, message: str) -> None:
    _pending.append(Diagnostic(WARNING, _location_of(where), message))


def remark(where: ir.Operation | ir.OpView | ir.Location, message: str) -> None:
    _pending.append(Diagnostic(REMARK, _location_of(where), message))


def from_mlir(info: ir.DiagnosticInfo) -> Diagnostic:
    """Converts a diagnostic carried by ``ir.MLIRError`` into a ``Diagnostic``, with its notes."""
    severity = _SEVERITIES.get(info.severity.name, ERROR)
    notes = tuple(from_mlir(note) for note in info.notes)
    return Diagnostic(severity, info.location, info.message, notes)


_SEVERITIES = {"ERROR": ERROR, "WARNING": WARNING, "REMARK": REMARK, "NOTE": NOTE}


def take_pending() -> list[Diagnostic]:
    """Returns and clears the warnings and remarks emitted since the last call."""
    taken = list(_pending)
    _pending.clear()
    return taken


def format_location(location: ir.Location, filename: str | None = None) -> str:
    """``file:line:col`` for the innermost file location inside ``location``.

    Name, call-site and fused locations (what JAX lowering produces) are
    searched for the first file location; ``filename`` replaces the ``-`` that
    MLIR records for a buffer parsed from memory.
    """
    with location.context:
        file_loc = _find_file_location(location)
    if file_loc is None:
        return "loc(unknown)"
    name = file_loc.filename
    if name in ("-", "") and filename:
        name = filename
    return f"{name}:{file_loc.start_line}:{file_loc.start_col}"


def _find_file_location(location: ir.Location) -> ir.FileLineColLoc | None:
    """The innermost file location that is not a frame of jaxpp_mlir itself (else the
    innermost one); the call-site chain is read only as far as that location."""
    first = None
    for file_loc in _file_locations(location):
        if not file_loc.filename.startswith(_PACKAGE_DIR):
            return file_loc
        if first is None:
            first = file_loc
    return first


def _file_locations(location: ir.Location) -> Iterator[ir.FileLineColLoc]:
    location = ir.Location.from_attr(location.attr)  # the typed subclass
    if isinstance(location, ir.FileLineColLoc):
        yield location
    elif isinstance(location, ir.NameLoc):
        yield from _file_locations(location.child_loc)
    elif isinstance(location, ir.CallSiteLoc):
        yield from _file_locations(location.callee)
        yield from _file_locations(location.caller)
    elif isinstance(location, ir.FusedLoc):
        for inner in location.locations:
            yield from _file_locations(inner)


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def step_call_location(function: ir.Operation, what: str) -> ir.Location:
    """A location for ``what`` (an argument or a result of the step, which has no op of
    its own): the user's line that lowered the step (``jax.jit(step).lower(...)``), where
    JAX locates the step's ``func.return``, named ``what``."""
    blocks = function.regions[0].blocks
    terminator = blocks[0].operations[len(blocks[0].operations) - 1] if len(blocks) else None
    location = terminator.location if terminator is not None else function.location
    return ir.Location.name(what, childLoc=location, context=function.context)


def _location_of(where: ir.Operation | ir.OpView | ir.Location) -> ir.Location:
    if isinstance(where, ir.Location):
        return where
    return where.location
