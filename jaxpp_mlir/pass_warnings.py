"""Turning the warnings passes emit into Python warnings, or errors under ``strict``."""

from __future__ import annotations

import warnings

from jaxpp_mlir import diagnostics
from jaxpp_mlir.errors import PartitionError, PartitionWarning


def report(found: list[diagnostics.Diagnostic], *, strict: bool) -> None:
    """Warns once per warning diagnostic, at its source line; raises all of them if ``strict``."""
    found = [d for d in found if d.severity == diagnostics.WARNING]
    if not found:
        return
    if strict:
        rendered = tuple(d.render() for d in found)
        raise PartitionError(
            "\n".join(rendered) + "\n(partition(..., strict=True) turns warnings into errors)",
            rendered,
        )
    for diagnostic in found:
        filename, line = _file_and_line(diagnostic)
        warnings.warn_explicit(diagnostic.render(), PartitionWarning, filename, line)


def _file_and_line(diagnostic: diagnostics.Diagnostic) -> tuple[str, int]:
    where = diagnostics.format_location(diagnostic.location)
    parts = where.rsplit(":", 2)
    if len(parts) == 3 and parts[1].isdigit():
        return parts[0], int(parts[1])
    return "<jaxpp_mlir>", 0
