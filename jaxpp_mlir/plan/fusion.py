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
from collections.abc import Iterable
from typing import TYPE_CHECKING

from jax.extend.mlir import ir

from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.plan.stage_modules import Source
from jaxpp_mlir.runtime import plan as rt

from .emission import Fused
from .specs import tensor_spec

if TYPE_CHECKING:
    from .builder import PlanBuilder


def emit_fused(builder: PlanBuilder, parts: list[tuple[list[ir.Operation], int]]) -> None:
    """Runs the tasks of ``parts`` as one executable: receives, one run, then sends."""
    tasks = [next(op for op in unit if jaxpp.is_task(op)) for unit, _ in parts]
    rank = jaxpp.get_rank(tasks[0])
    for unit, microbatch in parts:
        for op in unit:
            if jaxpp.is_recv(op):
                builder.emit(op, microbatch)
    inputs, input_types, wiring, outputs = _wire(builder, tasks, parts, rank)
    source = Fused(
        tuple(jaxpp.task_callee(t) for t in tasks),
        tuple(map(tuple, wiring)),
        tuple(input_types),
    )
    name = builder.fused_name(source)
    if name not in builder.executables:
        builder.add_executable(
            name,
            rank,
            source,
            tuple(tensor_spec(t) for t in input_types),
            tuple(tensor_spec(v.type) for t in tasks for v in t.results),
        )
    labels = [
        builder.label(task, microbatch) for task, (_, microbatch) in zip(tasks, parts, strict=True)
    ]
    label = f"FusedTask({', '.join(labels)})"
    builder.instructions.append(rt.RunStage(rank, name, tuple(inputs), tuple(outputs), label))
    for unit, microbatch in parts:
        for op in unit:
            if jaxpp.is_send(op):
                builder.emit(op, microbatch)


def _wire(
    builder: PlanBuilder,
    tasks: list[ir.Operation],
    parts: list[tuple[list[ir.Operation], int]],
    rank: int,
) -> tuple[list[int], list[ir.Type], list[list[Source]], list[int]]:
    """The fused run's inputs (value ids and types), each part's operand sources, and
    the run's outputs (every part's results, in order)."""
    values = builder.values
    defined_by: dict[int, tuple[int, int]] = {}
    inputs: list[int] = []
    input_types: list[ir.Type] = []
    wiring: list[list[Source]] = []
    outputs: list[int] = []
    for part, (task, (_, microbatch)) in enumerate(zip(tasks, parts, strict=True)):
        sources: list[Source] = []
        for value in task.operands:
            value_id = values.use(value, rank, microbatch)
            if value_id in defined_by:
                sources.append(("part", *defined_by[value_id]))
            else:
                if value_id not in inputs:
                    inputs.append(value_id)
                    input_types.append(value.type)
                sources.append(("input", inputs.index(value_id)))
        wiring.append(sources)
        for index, value in enumerate(task.results):
            value_id = values.define(value, rank, microbatch)
            defined_by[value_id] = (part, index)
            outputs.append(value_id)
    return inputs, input_types, wiring, outputs


def prune_unread_outputs(builder: PlanBuilder, read_by_outputs: Iterable[int]) -> None:
    """Drops the results of fused runs that nothing reads outside the run.

    A fused run returns every part's results, so a whole step fused into one launch
    would keep every intermediate value (activations, each microbatch's accumulators)
    alive at once. A result stays if some run of its executable has it read by another
    instruction or by the plan's outputs (``read_by_outputs``): every run of one
    executable returns the same results.
    """
    read = set(read_by_outputs)
    for inst in builder.instructions:
        read.update(inst.reads())
    kept: dict[str, set[int]] = {}
    for inst in builder.instructions:
        if isinstance(inst, rt.RunStage) and isinstance(
            builder.executables[inst.executable].source, Fused
        ):
            positions = kept.setdefault(inst.executable, set())
            positions.update(i for i, value in enumerate(inst.outputs) if value in read)
    pruned: dict[str, tuple[int, ...]] = {}
    for name, positions in kept.items():
        pending = builder.executables[name]
        if len(positions) == len(pending.output_specs):
            continue
        # An executable must return something: a run nothing reads keeps its last result.
        keep = tuple(sorted(positions)) or (len(pending.output_specs) - 1,)
        pruned[name] = keep
        builder.executables[name] = dataclasses.replace(
            pending,
            source=dataclasses.replace(pending.source, kept=keep),
            output_specs=tuple(pending.output_specs[i] for i in keep),
        )
    builder.instructions = [
        dataclasses.replace(inst, outputs=tuple(inst.outputs[i] for i in pruned[inst.executable]))
        if isinstance(inst, rt.RunStage) and inst.executable in pruned
        else inst
        for inst in builder.instructions
    ]
