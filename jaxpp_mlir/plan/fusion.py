"""Fusion: the tasks of one ``FusedTask`` run as one executable.

Its receives come first, then one run of a module that calls the parts in
order (a value one part gives another stays inside the executable), then the
sends. One executable exists per way of wiring the parts: a schedule may fuse
the same tasks with different values shared between them (within a
microbatch or across two). Once the whole plan is built, a fused executable
returns only the results some other instruction or the plan's outputs read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence

from jax.interpreters.mlir import ir

from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.plan.stage_modules import PartInput, PartResult, Source
from jaxpp_mlir.runtime import plan as rt
from jaxpp_mlir.runtime import records
from jaxpp_mlir.runtime.instructions import run
from jaxpp_mlir.runtime.instructions.run import RunStage

from .emission import Fused
from .instructions import PendingExecutable, instruction, task_ref
from .specs import tensor_spec
from .values import ValueNumbering


@records.frozen
class FusedRun:
    """One run of fused tasks, before its executable is named: the receives, the run's
    inputs, outputs and tasks, the sends, and the executable it needs."""

    executable: PendingExecutable
    receives: tuple[rt.Instruction, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    tasks: tuple[rt.TaskRef, ...]
    sends: tuple[rt.Instruction, ...]

    def instructions(self, name: str) -> list[rt.Instruction]:
        """Its instructions, the run calling executable ``name``."""
        fused = RunStage(self.executable.rank, name, self.inputs, self.outputs, self.tasks)
        return [*self.receives, fused, *self.sends]


class FusedNames:
    """Executable names of fused runs: one per way of wiring the same callees."""

    def __init__(self) -> None:
        self._names: dict[tuple, str] = {}  # (callees, wiring, input types) -> name

    def name(self, source: Fused) -> str:
        key = (source.callees, source.wiring, tuple(map(str, source.input_types)))
        if key not in self._names:
            base = "fused__" + "__".join(source.callees)
            taken = sum(1 for other in self._names if other[0] == key[0])
            self._names[key] = base if not taken else f"{base}__v{taken + 1}"
        return self._names[key]


def fused_run(parts: list[tuple[list[ir.Operation], int]], values: ValueNumbering) -> FusedRun:
    """The tasks of ``parts`` (each a task unit and its microbatch) as one run."""
    tasks = [next(op for op in unit if jaxpp.is_task(op)) for unit, _ in parts]
    rank = jaxpp.get_rank(tasks[0])
    receives = _transfers(parts, values, jaxpp.is_recv)
    inputs, input_types, wiring, outputs = _wire(values, tasks, parts, rank)
    source = Fused(
        tuple(jaxpp.task_callee(t) for t in tasks),
        tuple(map(tuple, wiring)),
        tuple(input_types),
    )
    executable = PendingExecutable(
        rank,
        source,
        tuple(tensor_spec(t) for t in input_types),
        tuple(tensor_spec(v.type) for t in tasks for v in t.results),
    )
    refs = tuple(task_ref(task, mb) for task, (_, mb) in zip(tasks, parts, strict=True))
    sends = _transfers(parts, values, jaxpp.is_send)
    return FusedRun(executable, receives, tuple(inputs), tuple(outputs), refs, sends)


def _transfers(
    parts: list[tuple[list[ir.Operation], int]],
    values: ValueNumbering,
    kind: Callable[[ir.Operation], bool],
) -> tuple[rt.Instruction, ...]:
    """The receives (or sends) of ``parts``, in order."""
    return tuple(
        instruction(op, values, microbatch) for unit, microbatch in parts for op in unit if kind(op)
    )


def _wire(
    values: ValueNumbering,
    tasks: list[ir.Operation],
    parts: list[tuple[list[ir.Operation], int]],
    rank: int,
) -> tuple[list[int], list[ir.Type], list[list[Source]], list[int]]:
    """The fused run's inputs (value ids and types), each part's operand sources, and
    the run's outputs (every part's results, in order)."""
    defined_by: dict[int, PartResult] = {}
    inputs: list[int] = []
    input_types: list[ir.Type] = []
    wiring: list[list[Source]] = []
    outputs: list[int] = []
    for part, (task, (_, microbatch)) in enumerate(zip(tasks, parts, strict=True)):
        sources: list[Source] = []
        for value in task.operands:
            value_id = values.use(value, rank, microbatch)
            if value_id in defined_by:
                sources.append(defined_by[value_id])
            else:
                if value_id not in inputs:
                    inputs.append(value_id)
                    input_types.append(value.type)
                sources.append(PartInput(inputs.index(value_id)))
        wiring.append(sources)
        for index, value in enumerate(task.results):
            value_id = values.define(value, rank, microbatch)
            defined_by[value_id] = PartResult(part, index)
            outputs.append(value_id)
    return inputs, input_types, wiring, outputs


def prune_unread_outputs(
    instructions: Sequence[rt.Instruction],
    executables: Mapping[str, PendingExecutable],
    read_by_outputs: Iterable[int],
) -> tuple[list[rt.Instruction], dict[str, PendingExecutable]]:
    """The instructions and executables with the results of fused runs that nothing reads
    outside the run dropped.

    A fused run returns every part's results, so a whole step fused into one launch
    would keep every intermediate value (activations, each microbatch's accumulators)
    alive at once. A result stays if some run of its executable has it read by another
    instruction or by the plan's outputs (``read_by_outputs``): every run of one
    executable returns the same results.
    """
    if not any(isinstance(e.source, Fused) for e in executables.values()):
        return list(instructions), dict(executables)
    read = set(read_by_outputs)
    for inst in instructions:
        read.update(inst.reads())
    kept: dict[str, set[int]] = {}
    for inst in instructions:
        if inst.kind == run.KIND and isinstance(executables[inst.executable].source, Fused):
            positions = kept.setdefault(inst.executable, set())
            positions.update(i for i, value in enumerate(inst.outputs) if value in read)
    pruned: dict[str, tuple[int, ...]] = {}
    result = dict(executables)
    for name, positions in kept.items():
        pending = executables[name]
        if len(positions) == len(pending.output_specs):
            continue
        # An executable must return something: a run nothing reads keeps its last result.
        keep = tuple(sorted(positions)) or (len(pending.output_specs) - 1,)
        pruned[name] = keep
        result[name] = dataclasses.replace(
            pending,
            source=dataclasses.replace(pending.source, kept=keep),
            output_specs=tuple(pending.output_specs[i] for i in keep),
        )
    new_instructions = [
        dataclasses.replace(inst, outputs=tuple(inst.outputs[i] for i in pruned[inst.executable]))
        if inst.kind == run.KIND and inst.executable in pruned
        else inst
        for inst in instructions
    ]
    return new_instructions, result
