"""Union programs for the first steps, each program compiled alone for the rest.

With ``JAXPP_MLIR_MERGE_PROGRAMS=first-steps`` a plan's small one-device programs are
compiled as union programs (``merge.py``: each shared kernel built once, the first step
sooner), and from the plan's second call on, on a background thread, each member's own
program is compiled as it would be without unions; each member then runs through its own
executable (``BranchExecutable.replace_with``), whose launches cost what they cost without
unions. Nothing waits for the background compile: a member runs through its union until
its own program is ready, and for good if that compile fails (logged as a warning).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import jax

from ..plan import ExecutionPlan

_logger = logging.getLogger("jaxpp_mlir.runtime.compilation.tier_up")
THREAD_NAME = "jaxpp-tier-up"


class TierUp:
    """The union members of a compiled plan, each to be replaced by its program alone."""

    def __init__(
        self,
        plan: ExecutionPlan,
        rank_devices: Sequence[Sequence[jax.Device]],
        members: Mapping[str, Any],
    ):
        self._plan, self._rank_devices, self._members = plan, rank_devices, dict(members)
        self.done = threading.Event()  # set once every member runs alone (or it failed)
        self._started = False

    def start(self) -> None:
        """Starts compiling the members alone on a daemon thread (once)."""
        if self._started:
            return
        self._started = True
        threading.Thread(target=self._compile, name=THREAD_NAME, daemon=True).start()

    def _compile(self) -> None:
        from . import compile as _compile  # the compile module imports this one

        names = list(self._members)
        try:
            alone, _ = _compile.start_plan_executables(
                self._plan, self._rank_devices, names, merge=False, progress=False
            ).result()
        except Exception as e:  # noqa: BLE001 - the unions keep running the members
            _logger.warning(
                "compiling %d union members alone failed; they keep running through their "
                "union programs: %s",
                len(names),
                e,
            )
        else:
            for name, member in self._members.items():
                member.replace_with(alone[name])
            _logger.info(
                "%d stage programs now run compiled alone, not as union members", len(names)
            )
        finally:
            self.done.set()
