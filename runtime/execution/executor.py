"""Executing an ``ExecutionPlan`` in one process: compile once, then dispatch.

``compile_plan`` compiles every distinct stage module once per submesh (see
``compile``) and resolves the plan into numbered slots (see ``slots``): a slot
holds one value on one rank, or one value in flight on a channel. Everything a
call needs is decided there, once: the executable of each run, the slots that
feed it, the result handlers of its outputs, the target shardings of transfers
and the slots that die after each instruction (a value's last use on its
rank). Each operation then becomes a small generated Python function with
those slots as constants (see ``dispatch``).

``CompiledPlan.__call__`` checks and places the arguments (see ``placement``),
then calls the operations in the plan's global order. Nothing blocks: PJRT executions and
copies are asynchronous, ordered by their buffers' readiness. Measured on the
2-core development machine (tiny stages): results wrapped by
``consume_with_handlers`` cost 5.0 us per execution against 7.4 us through
``disassemble_into_single_device_arrays``; a device-to-device batched copy
about 7-10 us against 22-40 us for ``jax.device_put``; the runtime's own Python
work for 8 runs, 6 transfers and 5 device arguments is about 5 us per call.
"""

from __future__ import annotations

import bisect
import types
from collections.abc import Mapping, Sequence
from typing import Any

import jax
from jax.sharding import Mesh, Sharding

from .. import records
from ..compilation import compile as _compile
from ..compilation.tier_up import TierUp
from ..errors import CallError, JaxppError, MeshError, PlanError, RuntimeFailure
from ..executable import Executable
from ..instructions import registry, run
from ..observation import phases
from ..observation import trace as _trace
from ..plan import ExecutionPlan
from . import codegen
from .arguments import input_checks, place_arguments
from .assembled import assemble_pieces, assembled_outputs
from .codegen import Op
from .constants import place_constants
from .dispatch import make_ops
from .pending_executable import PendingExecutable
from .replicated import assemble, replicated_outputs
from .slots import Step, resolve_slots


@records.frozen
class DispatchView:
    """A compiled plan's generated dispatch, read only (for the tracer and for tests).

    ``ops[i]`` is a generated operation over the slot list (``env``), its ``facts``
    saying what it does, and ``op_end[i]`` how many of ``plan.instructions`` are done
    after it; ``steps[k]`` is instruction k resolved to slots; ``slot_of`` maps
    ``(rank, value)`` to its slot; ``output_slots`` are the program outputs' slots.
    """

    plan: ExecutionPlan
    ops: tuple[Op, ...]
    op_end: tuple[int, ...]
    steps: tuple[Step, ...]
    slot_of: Mapping[tuple[int, int], int]
    num_slots: int
    output_slots: tuple[int, ...]


class CompiledPlan:
    """An ``ExecutionPlan`` compiled for concrete devices; call it with the flat inputs.

    Attributes:
      plan: the plan it executes.
      rank_devices: rank r's devices, in partition order.
      executables: executable name -> PJRT loaded executable (names that share a
        module text and a submesh share one executable).
      last_uses: ``(rank, value)`` -> index of the instruction after which the
        runtime drops its reference (``len(plan.instructions)`` for outputs).
    """

    def __init__(
        self,
        plan: ExecutionPlan,
        rank_devices: tuple[tuple[jax.Device, ...], ...],
        executables: Mapping[str, Executable],
        num_compiled: int,
        rank_meshes: Sequence[Mesh] | None = None,
        mpmd_axis: str | None = None,
    ):
        self.plan = plan
        self.rank_devices = rank_devices
        self.rank_meshes = rank_meshes  # given: arrays get NamedShardings on these
        self.mpmd_axis = mpmd_axis  # the rank_meshes' axis that stacks ranks, if known
        self.executables = executables
        self.num_compiled = num_compiled
        # JAXPP_MLIR_MERGE_PROGRAMS=first-steps: started by the second call (tier_up.py).
        self.tier_up: TierUp | None = None
        self._calls = 0
        self._build()

    def bind(
        self, executables: Mapping[str, Executable], num_compiled: int, tier_up: TierUp | None
    ) -> None:
        """The compiled executables, in place of the ``PendingExecutable`` stand-ins the
        dispatch was generated around (if any); ``tier_up`` starts on the second call."""
        for name, exe in self.executables.items():
            if isinstance(exe, PendingExecutable):
                exe.bind(executables[name])
        self.executables, self.num_compiled, self.tier_up = executables, num_compiled, tier_up

    # ------------------------------------------------------------------ build
    def _build(self) -> None:
        plan = self.plan
        resolved = resolve_slots(plan, self.rank_devices, self.executables, self.rank_meshes)
        slots, where = resolved.slots, resolved.where
        self._ops, self._op_end = make_ops(plan, resolved, self.executables)
        self._num_slots = len(slots)
        self._output_slots = resolved.output_slots
        self._steps = tuple(resolved.steps)
        self._slot_of = types.MappingProxyType(where)
        self._inputs = input_checks(plan, resolved)
        self._replicated = replicated_outputs(plan, resolved, self.rank_devices, self.rank_meshes)
        self._assembled = assembled_outputs(plan, resolved, self.rank_meshes, self.mpmd_axis)
        # After resolution: a value read in another layout too dies after its copy is made.
        self.last_uses: Mapping[tuple[int, int], int] = {
            key: slots[s].last_use if slots[s].last_use >= 0 else slots[s].defined_at
            for key, s in where.items()
        }

    @property
    def dispatch(self) -> DispatchView:
        """The generated operations and slots this plan dispatches, read only."""
        return DispatchView(
            self.plan,
            tuple(self._ops),
            tuple(self._op_end),
            self._steps,
            self._slot_of,
            self._num_slots,
            self._output_slots,
        )

    # ------------------------------------------------------------------- call
    def input_shardings(self, position: int) -> tuple[Sharding, ...]:
        """The shardings argument ``position`` is read with, one per rank reading it;
        an array passed with one of them is used without a copy."""
        return tuple(target.sharding for target in self._inputs[position].targets)

    def place_constants(self) -> list[Any]:
        """The plan's constants, placed: the arguments after the caller's."""
        return place_constants(self.plan, self.rank_devices, self.input_shardings)

    def __call__(self, *args: Any) -> list[jax.Array]:
        """Runs the plan on flat ``args``; returns the outputs in ``plan.outputs`` order."""
        self._calls += 1
        if self._calls == 2 and self.tier_up is not None:
            self.tier_up.start()  # the first step ran on union programs: now each alone
        return self._run(args, [None] * self._num_slots)

    def _run(self, args: Sequence[Any], env: list, stop: int | None = None) -> list[jax.Array]:
        """Places ``args`` into ``env`` and dispatches; ``stop`` ends after that many
        instructions (for tests, which then inspect ``env``)."""
        if len(args) != len(self._inputs):
            raise CallError(
                f"the program takes {len(self._inputs)} arguments, but {len(args)} were given"
            )
        try:
            place_arguments(args, self._inputs, env)
        except JaxppError:
            raise
        except Exception as e:  # a copy of an input that another call donated meanwhile
            self._raise_if_an_input_was_deleted(args, e)
            raise
        ops = self._ops
        if stop is not None:
            ops = ops[: bisect.bisect_right(self._op_end, stop)]
        tracer = _trace.ACTIVE  # tracing hook: None (off) leaves the dispatch as is
        if tracer is not None:
            ops = tracer.wrap(self, ops)
        op: Any = None
        try:
            for op in ops:
                op(env)
        except JaxppError:
            raise
        except Exception as e:
            self._raise_if_an_input_was_deleted(args, e)
            raise RuntimeFailure(f"{op.what} failed: {e}") from e
        outputs = [env[s] for s in self._output_slots]
        if self._replicated and stop is None:
            assemble(env, outputs, self._replicated)
        if self._assembled and stop is None:
            assemble_pieces(env, outputs, self._assembled)
        return outputs

    def _raise_if_an_input_was_deleted(self, args: Sequence[Any], error: Exception) -> None:
        """A failed dispatch whose input was deleted after it was placed (another call,
        say of another thread, donated it meanwhile): a ``CallError`` naming the input."""
        for check, x in zip(self._inputs, args, strict=True):
            if isinstance(x, jax.Array) and x.is_deleted():
                raise CallError(
                    f"{check.what} was deleted while this call ran: another call (another "
                    f"thread?) donated or deleted it; a donated array is used by one call only"
                ) from error

    def dispatch_source(self) -> str:
        """The generated code of every operation, in dispatch order (for debugging)."""
        return "\n".join(codegen.source(op) for op in self._ops)

    # ------------------------------------------------------------------- show
    def __repr__(self) -> str:
        plan = self.plan
        lines = [
            f"CompiledPlan({plan.num_ranks} ranks, {len(plan.executables)} executables "
            f"({self.num_compiled} compiled), {len(plan.instructions)} instructions, "
            f"{len(plan.inputs)} inputs, {len(plan.outputs)} outputs)"
        ]
        for rank, devices in enumerate(self.rank_devices):
            names = sorted(n for n, s in plan.executables.items() if s.rank == rank)
            runs = registry.count(plan.rank_program(rank))[run.KIND]
            device_text = ", ".join(f"{d.platform}:{d.id}" for d in devices)
            lines.append(
                f"  rank {rank} on [{device_text}]: {runs} run{'s' * (runs != 1)} of "
                f"{', '.join(names) or '-'}"
            )
        return "\n".join(lines)


def compile_plan(
    plan: ExecutionPlan,
    rank_devices: Sequence[Sequence[jax.Device]],
    *,
    rank_meshes: Sequence[Mesh] | None = None,
    mpmd_axis: str | None = None,
) -> CompiledPlan:
    """Compiles every executable of ``plan`` for the submesh of its rank.

    ``rank_devices[r]`` lists rank r's devices in partition order. A module text
    shared by several executables of one rank compiles once. With ``rank_meshes``
    (rank r's submesh, its devices those of ``rank_devices[r]``), values carry
    ``NamedSharding``s on them; with ``mpmd_axis`` too (the axis of size 1 in each
    submesh that stacks them into the whole mesh), an output made of equal pieces on
    distinct ranks is one array sharded along that axis (``assembled``).
    """
    devices = tuple(tuple(d) for d in rank_devices)
    if len(devices) != plan.num_ranks:
        raise MeshError(
            f"the plan runs on {plan.num_ranks} ranks, but devices were given for "
            f"{len(devices)} ranks"
        )
    for rank, ds in enumerate(devices):
        if not ds:
            raise MeshError(f"rank {rank} has no devices")
    for name, stage in plan.executables.items():
        if not 0 <= stage.rank < len(devices):
            raise PlanError(
                f"executable {name!r} is for rank {stage.rank}, but the plan has "
                f"{len(devices)} ranks"
            )
    with phases.timed("compile: stage programs"):
        pending = _compile.start_plan_executables(plan, devices, list(plan.executables))
        # One device per rank: the dispatch is generated while the stage programs compile
        # (elsewhere resolving layouts reads the compiled programs).
        early = all(len(ds) == 1 for ds in devices)
        if early:
            stand_ins = {name: PendingExecutable(name) for name in plan.executables}
            try:
                with phases.timed("compile: dispatch (while compiling)"):
                    compiled = CompiledPlan(plan, devices, stand_ins, 0, rank_meshes, mpmd_axis)
            except Exception:
                pending.result()  # where a program disagrees with the plan, that is the cause
                raise
            except BaseException as e:  # an interrupt: the compiles not started are dropped
                pending.abandon(e)
                raise
        executables, num_compiled = pending.result()
    if not early:
        with phases.timed("compile: dispatch"):
            compiled = CompiledPlan(
                plan, devices, executables, num_compiled, rank_meshes, mpmd_axis
            )
    compiled.bind(executables, num_compiled, pending.tier_up)
    return compiled
