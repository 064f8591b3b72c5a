"""Schedule expansion: the loop body's tasks, per microbatch, in the schedule's order.

Each scheduled task becomes one ``RunStage`` with its receives before it and
its sends after it (the grouping ``jaxpp-insert-transfers`` records in
``jaxpp.for_task``); the global dispatch order follows the schedule's
simulated start times. A loop body task is read from MLIR once, as a
microbatch-independent template, then instantiated per microbatch.
``expand_loop`` returns the loop's instructions and the executables they run;
the builder adds them to the plan.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from jax.extend.mlir import ir

from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.errors import PartitionError, ScheduleError
from jaxpp_mlir.runtime import plan as rt
from jaxpp_mlir.schedules import FusedTask, Schedule, ScheduleItem

from . import fusion
from .instructions import PendingExecutable, standalone_executable
from .refs import Ref
from .specs import TensorSpecs, tensor_spec
from .values import Reads, ValueNumbering

TaskKey = tuple[int, str]  # (stage, kind)


@dataclasses.dataclass(frozen=True)
class RunTemplate:
    rank: int
    executable: str
    inputs: Reads
    outputs: tuple[int, ...]  # body-local indices
    label: str  # "fwd_2" (the microbatch is appended)


@dataclasses.dataclass(frozen=True)
class SendTemplate:
    rank: int
    peer: int
    channel: int  # the IR's channel (numbered per microbatch when expanded)
    value: Ref


@dataclasses.dataclass(frozen=True)
class RecvTemplate:
    rank: int
    peer: int
    channel: int
    value: int  # body-local index
    spec: rt.TensorSpec


Template = RunTemplate | SendTemplate | RecvTemplate


@dataclasses.dataclass(frozen=True)
class Expansion:
    """A loop's instructions for every microbatch, and the executables they run (by name,
    in the order first run)."""

    instructions: list[rt.Instruction]
    executables: dict[str, PendingExecutable]
    task_of: dict[str, TaskKey]  # each loop task's callee -> its (stage, kind), in body order


def template(
    values: ValueNumbering,
    op: ir.Operation,
    specs: Callable[[ir.Type], rt.TensorSpec] = tensor_spec,
) -> Template:
    """A loop body op as a microbatch-independent instruction (MLIR is read once)."""
    rank = jaxpp.get_rank(op)
    if jaxpp.is_task(op):
        return RunTemplate(
            rank,
            jaxpp.task_callee(op),
            values.reads(op.operands, rank),
            tuple(values.local[v] for v in op.results),
            f"{jaxpp.get_kind(op)}_{jaxpp.get_stage(op)}",
        )
    if jaxpp.is_send(op):
        return SendTemplate(
            rank, jaxpp.get_peer(op), jaxpp.get_channel(op), values.ref(op.operands[0], rank)
        )
    result = op.results[0]
    return RecvTemplate(
        rank,
        jaxpp.get_peer(op),
        jaxpp.get_channel(op),
        values.local[result],
        specs(result.type),
    )


def expand(
    values: ValueNumbering,
    templates: list[Template],
    microbatch: int | None,
    instructions: list[rt.Instruction],
) -> None:
    """Appends the instructions of ``templates`` for ``microbatch`` to ``instructions``."""
    append = instructions.append
    suffix = f"__{microbatch or 0}"
    for item in templates:
        rank = item.rank
        kind = type(item)
        if kind is RunTemplate:
            inputs = values.resolve_all(item.inputs, rank, microbatch)
            outputs = values.define_slots(item.outputs, rank, microbatch)
            append(rt.RunStage(rank, item.executable, inputs, outputs, item.label + suffix))
            continue
        channel = values.channel(item.channel, microbatch)
        if kind is SendTemplate:
            value = values.resolve(item.value, rank, microbatch)
            append(rt.Send(rank, item.peer, channel, value))
        else:
            (value,) = values.define_slots((item.value,), rank, microbatch)
            append(rt.Recv(rank, item.peer, channel, value, item.spec))


def expand_loop(
    loop: ir.Operation,
    values: ValueNumbering,
    schedule: Schedule | None,
    specs: TensorSpecs,
) -> Expansion:
    """The loop's instructions for every microbatch, in the schedule's order, numbered in
    ``values`` (``specs``: the plan's spec of each type)."""
    body_ops = values.enter_loop(loop)
    num_microbatches = jaxpp.get_int_attr(loop, jaxpp.LOOP_NUM_MICROBATCHES_ATTR)
    units = task_units(body_ops)
    if schedule is None:
        raise ScheduleError("a program with a microbatch loop needs a schedule")
    instructions: list[rt.Instruction] = []
    executables: dict[str, PendingExecutable] = {}
    fused_names = fusion.FusedNames()
    templates: dict[TaskKey, list[Template]] = {}
    scheduled: set[TaskKey] = set()
    tasks = {key: next(op for op in unit if jaxpp.is_task(op)) for key, unit in units.items()}
    task_of: dict[str, TaskKey] = {}
    for key, task in tasks.items():
        task_of.setdefault(jaxpp.task_callee(task), key)
    for item in dispatch_order(schedule, num_microbatches):
        selected = _select(item, units, scheduled)
        if len(selected) > 1 and isinstance(item, FusedTask):
            run = fusion.fused_run([(units[key], mb) for key, mb in selected], values)
            name = fused_names.name(run.executable.source)
            executables.setdefault(name, run.executable)
            instructions += run.instructions(name)
            continue
        for key, microbatch in selected:
            if key not in templates:
                templates[key] = [template(values, op, specs) for op in units[key]]
                callee = jaxpp.task_callee(tasks[key])
                if callee not in executables:
                    executables[callee] = standalone_executable(tasks[key], specs)
            expand(values, templates[key], microbatch, instructions)
    missing = sorted(set(units) - scheduled)
    if missing:
        stage, kind = missing[0]
        raise ScheduleError(
            f"the program has a {kind} task for stage {stage} that the schedule "
            f"{schedule!r} never runs (does the schedule split the backward?)"
        )
    values.bind_loop_results(loop, num_microbatches - 1)
    return Expansion(instructions, executables, task_of)


def _select(
    item: ScheduleItem, units: dict[TaskKey, list[ir.Operation]], scheduled: set[TaskKey]
) -> list[tuple[TaskKey, int]]:
    """The program's tasks that schedule item ``item`` runs, with their microbatches.

    A task the program lacks (no backward in an inference loop) is skipped; a
    program task the schedule lacks is an error, later. A whole backward runs
    as its two halves when the program's backward is split.
    """
    parts = item.tasks if isinstance(item, FusedTask) else (item,)
    selected = []
    for task in parts:
        kinds = [task.kind]
        if task.kind == jaxpp.BACKWARD and (task.stage, task.kind) not in units:
            kinds = [jaxpp.BACKWARD_INPUT, jaxpp.BACKWARD_WEIGHT]
        for kind in kinds:
            scheduled.add((task.stage, kind))
            if (task.stage, kind) in units:
                selected.append(((task.stage, kind), task.microbatch))
    return selected


def task_units(body_ops: list[ir.Operation]) -> dict[TaskKey, list[ir.Operation]]:
    """Per (stage, kind): its receives, the task, then the sends of its results.

    Each transfer's task is the one ``jaxpp-insert-transfers`` recorded on it.
    """
    ops = body_ops[:-1]
    units: dict[TaskKey, list[ir.Operation]] = {}
    tasks: dict[TaskKey, ir.Operation] = {}
    sends: dict[TaskKey, list[ir.Operation]] = {}
    for op in ops:
        if jaxpp.is_task(op):
            key = (jaxpp.get_stage(op), jaxpp.get_kind(op))
            if key in tasks:
                raise PartitionError(f"two tasks for stage {key[0]} ({key[1]}) in the loop")
            tasks[key] = op
            units.setdefault(key, [])
            continue
        key = jaxpp.get_for_task(op)
        if key is None:
            raise PartitionError(
                f"{op.name} at {op.location} in the loop body does not name its task "
                f"({jaxpp.FOR_TASK_ATTR}): run jaxpp-insert-transfers to insert transfers"
            )
        if jaxpp.is_recv(op):
            units.setdefault(key, []).append(op)
        else:
            sends.setdefault(key, []).append(op)
    for key in list(units) + list(sends):
        if key not in tasks:
            raise PartitionError(
                f"a transfer in the loop body belongs to the {key[1]} task of stage {key[0]}, "
                "which the loop does not have"
            )
    return {key: units[key] + [task] + sends.get(key, []) for key, task in tasks.items()}


def dispatch_order(schedule: Schedule, num_microbatches: int) -> list[ScheduleItem]:
    """Every scheduled item once, ordered by simulated start time (ties: rank, position)."""
    per_rank = schedule.tasks(num_microbatches)
    simulation = schedule.simulate(num_microbatches)
    entries = []
    for rank, items in enumerate(per_rank):
        for position, item in enumerate(items):
            first = item.tasks[0] if isinstance(item, FusedTask) else item
            entries.append((simulation.start_times[first], rank, position, item))
    entries.sort(key=lambda entry: entry[:3])
    return [entry[-1] for entry in entries]
