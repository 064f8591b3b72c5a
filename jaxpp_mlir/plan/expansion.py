"""Schedule expansion: the loop body's tasks, per microbatch, in the schedule's order.

Each scheduled task becomes one run with its receives before it and its sends
after it (the grouping ``jaxpp-insert-transfers`` records in ``jaxpp.for_task``);
the global dispatch order follows the schedule's simulated start times. A loop
body task is read from MLIR once, as microbatch-independent templates (the op
table, ``instructions``), then expanded per microbatch.
``expand_loop`` returns the loop's instructions and the executables they run;
the builder adds them to the plan.
"""

from __future__ import annotations

from jax.interpreters.mlir import ir

from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.errors import PartitionError, ScheduleError
from jaxpp_mlir.runtime import plan as rt
from jaxpp_mlir.runtime import records
from jaxpp_mlir.schedules import FusedTask, Schedule, ScheduleItem

from . import fusion
from .instructions import PendingExecutable, Template, standalone_executable, template
from .specs import TensorSpecs
from .values import ValueNumbering

TaskKey = tuple[int, str]  # (stage, kind)


@records.frozen
class Expansion:
    """A loop's instructions for every microbatch, and the executables they run (by name,
    in the order first run)."""

    instructions: list[rt.Instruction]
    executables: dict[str, PendingExecutable]
    task_of: dict[str, TaskKey]  # each loop task's callee -> its (stage, kind), in body order


def expand(
    values: ValueNumbering,
    templates: list[Template],
    microbatch: int | None,
    instructions: list[rt.Instruction],
) -> None:
    """Appends the instructions of ``templates`` for ``microbatch`` to ``instructions``."""
    append = instructions.append
    for item in templates:
        append(item.expand(values, microbatch))


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
