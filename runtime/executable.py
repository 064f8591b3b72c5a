"""What the runtime needs from what it runs: the seams between compiled pieces.

``Executable``: one compiled stage or transfer (a PJRT loaded executable, or a
``multiprocess.collectives.TransferExecutable`` around one), run with one array
per argument, its layouts asked for by the slot resolver. ``PlanExecutable``:
a whole compiled plan, what a ``CompiledProgram`` calls: a ``CompiledPlan`` in
one process, a ``DistributedPlan`` across several, the Ray driver's
``RemoteExecutable`` (whose workers append the constants themselves).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import jax


class Results(Protocol):
    """The arrays of one run, made into ``jax.Array``s by ``handlers`` (one per output)."""

    def consume_with_handlers(self, handlers: Sequence[Any] | None = None) -> list[jax.Array]:
        """The outputs, in order."""
        ...


class Executable(Protocol):
    """One compiled stage or transfer over its rank's devices."""

    def execute_sharded(self, arguments: Sequence[jax.Array]) -> Results:
        """Runs once on ``arguments`` (one array per parameter)."""
        ...

    def get_parameter_shardings(self) -> Sequence[Any] | None:
        """Each parameter's HLO sharding proto (None: not partitioned)."""
        ...

    def get_output_shardings(self) -> Sequence[Any] | None:
        """Each result's HLO sharding proto (None: not partitioned)."""
        ...

    def hlo_modules(self) -> list[Any]:
        """The optimized HLO modules (the first one's program shape types the results)."""
        ...


class PlanExecutable(Protocol):
    """A plan compiled for its devices, called with the plan's flat inputs."""

    def __call__(self, *args: Any) -> list[Any]:
        """Runs one step; returns the outputs in ``plan.outputs`` order."""
        ...
