"""The exceptions the runtime raises, all under ``JaxppError``.

They live on the runtime side so that the runtime imports nothing of the
compiler; ``jaxpp_mlir.errors`` re-exports them next to the compiler's own.
"""

from __future__ import annotations


class JaxppError(Exception):
    """Base class of every error jaxpp_mlir raises on purpose."""


class MeshError(JaxppError, ValueError):
    """The mesh cannot host the program (too few submeshes, bad axis name...).

    A ``ValueError``: it is a configuration error, as JaxPP and JAX raise for one."""


class ScheduleError(JaxppError, ValueError):
    """A schedule is malformed or cannot run (deadlock, broken dependency).

    A ``ValueError``: a bad schedule argument is a configuration error, as in JaxPP."""


class PlanError(ScheduleError):
    """An execution plan is malformed (a value used before it is defined, a transfer
    without its peer, an order that would deadlock)."""


class CallError(JaxppError):
    """A compiled program was called with arguments it cannot take."""


class RuntimeFailure(JaxppError):
    """Execution failed at run time (a peer is lost, a wait timed out...)."""
