"""The exception types raised by jaxpp_mlir, all under ``JaxppError``.

The runtime's own (``CallError``, ``RuntimeFailure``, ``PlanError``...) are
defined in ``jaxpp_mlir.runtime.errors`` and re-exported here.
"""

from __future__ import annotations

from jaxpp_mlir.runtime.errors import (
    CallError,
    JaxppError,
    MeshError,
    PlanError,
    RuntimeFailure,
    ScheduleError,
)

__all__ = [
    "CallError",
    "CheckpointError",
    "JaxppError",
    "MarkerError",
    "MeshError",
    "MlirParseError",
    "PartitionError",
    "PartitionScheduleError",
    "PlanError",
    "RuntimeFailure",
    "ScheduleError",
]


class CheckpointError(JaxppError, ValueError):
    """A checkpoint that cannot be written, read, or matched to the tree it restores into."""


class MarkerError(JaxppError):
    """A stage marker is missing, misplaced or unsupported where it stands."""


class PartitionError(JaxppError):
    """A pass rejected the module; the message carries the located diagnostics."""

    def __init__(self, message: str, diagnostics: tuple[str, ...] = ()):
        super().__init__(message)
        self.diagnostics = diagnostics


class PartitionScheduleError(PartitionError, ScheduleError):
    """A pass refused the schedule or the stage split (jaxpp-choose-stages): located like
    a ``PartitionError``, and a ``ScheduleError`` like the schedule's own checks."""


class MlirParseError(JaxppError):
    """The MLIR text given to jaxpp_mlir does not parse."""


class PartitionWarning(UserWarning):
    """A pass found something legal but surprising (``partition(..., strict=True)`` refuses it)."""
