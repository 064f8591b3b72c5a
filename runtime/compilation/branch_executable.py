"""A member of a union program, run as if it were compiled alone (``merge.py``).

``UnionRun`` holds one union program loaded on one rank's devices and what its runs
pass where a member has nothing to give: the branch index of each member, one array of
each plain slot's type, and the current array of each donated slot (donated by every
run of a member that does not use the slot and handed back by the run unchanged, as
the array to give next time). ``BranchExecutable`` is one member: its
``execute_sharded`` places the member's arguments in their slots, runs the union and
gives back the member's results in its own order, so the dispatch code runs it like
any executable. The runs of one rank are issued by one thread, in order (the executor).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from .. import _jax_compat as jc
from ..plan import TensorSpec
from .merge import Branch, MergedProgram


class UnionRun:
    """A union program loaded on ``devices`` (one device today) and its slot fillers."""

    def __init__(self, program: MergedProgram, exe: jc.LoadedExecutable, devices: Sequence[Any]):
        if len(devices) != 1:
            raise ValueError(f"a union program runs on one device, not {len(devices)}")
        self.program = program
        self.exe = exe
        self.device = devices[0]
        sharding = jax.sharding.SingleDeviceSharding(self.device)
        by_spec: dict[TensorSpec, jax.Array] = {}
        donated = {p for p, _ in program.donated}
        arguments: list[Any] = [None]
        for position, spec in enumerate(program.parameters[1:], start=1):
            if position in donated:
                arguments.append(self._zeros(spec))
            else:
                if spec not in by_spec:
                    by_spec[spec] = self._zeros(spec)
                arguments.append(by_spec[spec])
        # The arguments of the next run where its member gives none (position 0: its index).
        self.arguments = arguments
        self.handlers = [
            jc.result_handler(jax.core.ShapedArray(spec.shape, np.dtype(spec.dtype)), sharding)
            for spec in program.results
        ]

    def _zeros(self, spec: TensorSpec) -> jax.Array:
        return jax.device_put(np.zeros(spec.shape, np.dtype(spec.dtype)), self.device)

    def index(self, branch: Branch) -> jax.Array:
        return jax.device_put(np.int32(branch.index), self.device)


class BranchExecutable:
    """Member ``branch`` of the union program ``run`` runs (the ``Executable`` protocol)."""

    def __init__(self, run: UnionRun, branch: Branch):
        self._run = run
        self._branch = branch
        self._index = run.index(branch)
        # The union's result handlers for the slots this member does not fill; its own
        # slots take the caller's (by the identity of the caller's handler list).
        self._full_handlers: dict[int, tuple[Sequence[Any], list[Any]]] = {}
        self._alone: Any = None  # the member compiled alone, once ``replace_with`` gave it

    def replace_with(self, alone: Any) -> None:
        """Runs the member through ``alone`` (its program compiled alone) from now on.
        (Checked at each launch: the dispatch may hold this object's bound method, through
        a ``PendingExecutable``, so swapping the method itself would not reach it.)"""
        self._alone = alone

    @property
    def alone(self) -> Any:
        """The member's program compiled alone, once it replaced the union (else None)."""
        return self._alone

    @property
    def union(self) -> UnionRun:
        return self._run

    @property
    def branch(self) -> Branch:
        """Where the member's parameters and results sit in the union's."""
        return self._branch

    def execute_sharded(self, arguments: Sequence[jax.Array]) -> Any:
        alone = self._alone
        if alone is not None:
            return alone.execute_sharded(arguments)
        run = self._run
        union_arguments = run.arguments.copy()
        union_arguments[0] = self._index
        for position, argument in zip(self._branch.parameters, arguments, strict=True):
            union_arguments[position] = argument
        return _BranchResults(self, run.exe.execute_sharded(union_arguments))

    def handlers(self, handlers: Sequence[Any] | None) -> list[Any]:
        if handlers is None:
            return self._run.handlers
        found = self._full_handlers.get(id(handlers))
        if found is not None and found[0] is handlers:
            return found[1]
        full = list(self._run.handlers)
        for position, handler in zip(self._branch.results, handlers, strict=True):
            full[position] = handler
        self._full_handlers[id(handlers)] = (handlers, full)
        return full

    def finish(self, outputs: list[jax.Array]) -> list[jax.Array]:
        """The member's results of a union run's ``outputs``; the donated slots the member
        does not use get their arrays back for the next run."""
        arguments = self._run.arguments
        for parameter, result in self._branch.passed_through:
            arguments[parameter] = outputs[result]
        return [outputs[r] for r in self._branch.results]

    def get_parameter_shardings(self) -> None:
        return None  # one device: not partitioned

    def get_output_shardings(self) -> None:
        return None

    def local_devices(self) -> list[Any]:
        return self._run.exe.local_devices()

    def hlo_modules(self) -> list[Any]:
        """The union program's optimized modules (whose signature is the union's)."""
        return self._run.exe.hlo_modules()


class _BranchResults:
    """One run of a member: the union's results, read back as the member's."""

    __slots__ = ("_branch", "_results")

    def __init__(self, branch: BranchExecutable, results: Any):
        self._branch = branch
        self._results = results

    def consume_with_handlers(self, handlers: Sequence[Any] | None = None) -> list[jax.Array]:
        branch = self._branch
        return branch.finish(self._results.consume_with_handlers(branch.handlers(handlers)))
