"""What ``partition`` tells the ``logging`` and ``warnings`` modules.

- ``jaxpp_mlir.partition`` at INFO: one summary line per partitioned program
  (stages, ranks, tasks, transfers and the bytes they move per step);
- ``jaxpp_mlir.passes`` at DEBUG: each pass's wall time, through the
  pipeline's ``before_pass``/``after_pass`` hooks;
- the warnings passes emit become Python warnings (``PassWarning``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from jax.interpreters.mlir import ir

from jaxpp_mlir import diagnostics, pass_warnings
from jaxpp_mlir.errors import PartitionWarning
from jaxpp_mlir.passes.pipeline import PipelineElement
from jaxpp_mlir.runtime.instructions import receive, registry, run
from jaxpp_mlir.runtime.liveness import received_bytes
from jaxpp_mlir.runtime.plan import ExecutionPlan

summary_logger = logging.getLogger("jaxpp_mlir.partition")
pass_logger = logging.getLogger("jaxpp_mlir.passes")


#: A warning a pass emitted (its text carries the source location).
PassWarning = PartitionWarning


class PassTimer:
    """``before_pass``/``after_pass`` hooks that log each pass's wall time at DEBUG."""

    def __init__(self) -> None:
        self._started = 0.0

    def before_pass(self, index: int, element: PipelineElement, module: ir.Module) -> None:
        self._started = time.perf_counter()

    def after_pass(self, index: int, element: PipelineElement, module: ir.Module) -> None:
        elapsed = time.perf_counter() - self._started
        pass_logger.debug("pass %s took %.1f ms", element, elapsed * 1e3)


def surface_warnings(found: Iterable[diagnostics.Diagnostic], *, strict: bool = False) -> None:
    """Each pass warning as a ``PartitionWarning`` at its source line (an error if
    ``strict``); remarks go to the log at INFO."""
    found = list(found)
    for diagnostic in found:
        if diagnostic.severity != diagnostics.WARNING:
            pass_logger.info("%s", diagnostic.render())
    pass_warnings.report(found, strict=strict)


def plan_summary(plan: ExecutionPlan, num_stages: int) -> str:
    """One line: stages, ranks, tasks, transfers and the bytes transfers move per step."""
    counts = registry.count(plan.instructions)
    moved = sum(received_bytes(plan, inst) for inst in plan.instructions)
    return (
        f"partitioned into {num_stages} stages on {plan.num_ranks} ranks: "
        f"{counts[run.KIND]} tasks, {counts[receive.KIND]} transfers moving {moved} bytes "
        "per step"
    )


def log_summary(plan: ExecutionPlan, num_stages: int) -> None:
    if summary_logger.isEnabledFor(logging.INFO):
        summary_logger.info("%s", plan_summary(plan, num_stages))
