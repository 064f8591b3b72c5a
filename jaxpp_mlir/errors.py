"""The exception types raised by jaxpp_mlir, all under ``JaxppError``."""

from __future__ import annotations


class JaxppError(Exception):
    """Base class of every error jaxpp_mlir raises on purpose."""


class MarkerError(JaxppError):
    """A stage marker is missing, misplaced or unsupported where it stands."""


class PartitionError(JaxppError):
    """A pass rejected the module; the message carries the located diagnostics."""

    def __init__(self, message: str, diagnostics: tuple[str, ...] = ()):
        super().__init__(message)
        self.diagnostics = diagnostics


class MlirParseError(JaxppError):
    """The MLIR text given to jaxpp_mlir does not parse."""


class MeshError(JaxppError):
    """The mesh cannot host the program (too few submeshes, bad axis name...)."""


class ScheduleError(JaxppError):
    """A schedule is malformed or cannot run (deadlock, broken dependency)."""


class CallError(JaxppError):
    """A compiled program was called with arguments it cannot take."""


class RuntimeFailure(JaxppError):
    """Execution failed at run time (a peer is lost, a wait timed out...)."""


class PartitionWarning(UserWarning):
    """A pass found something legal but surprising (``partition(..., strict=True)`` refuses it)."""
