"""Where the wait before the first step goes: each phase's wall time, at DEBUG.

``partition`` and ``compile`` time their phases (importing the input, building the
plan, compiling the stage programs, building the dispatch, placing constants) with
``timed(name)``; each ends as one DEBUG record of the ``jaxpp_mlir.phases`` logger,
``phase <name> took <ms> ms``, whose ``phase`` and ``seconds`` attributes carry the
figures (``benchmarks/first_step.py`` collects them). Passes are timed the same way
by the ``jaxpp_mlir.passes`` logger, each stage program's compilation by
``jaxpp_mlir.runtime.compilation.compile``. Off (the logger not enabled for DEBUG),
a phase costs one level check.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator

logger = logging.getLogger("jaxpp_mlir.phases")


@contextlib.contextmanager
def timed(phase: str) -> Iterator[None]:
    """Logs the wall time of the block as phase ``phase`` (at DEBUG, when enabled)."""
    if not logger.isEnabledFor(logging.DEBUG):
        yield
        return
    started = time.perf_counter()
    try:
        yield
    finally:
        seconds = time.perf_counter() - started
        logger.debug(
            "phase %s took %.1f ms",
            phase,
            seconds * 1e3,
            extra={"phase": phase, "seconds": seconds},
        )
