"""Static checks of per-rank task lists, before any simulation.

``check_tasks`` verifies that the lists hold every needed task exactly once, on the rank
the placement gives its stage, and that no task comes after, on its own rank, a task that
needs its output. Every failure raises ``ScheduleError`` whose message lists the problems
and shows the step-by-rank grid with ``>>`` before each offending step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from jaxpp_mlir.errors import ScheduleError
from jaxpp_mlir.schedules.deps import dependencies
from jaxpp_mlir.schedules.render import MARK, render_steps
from jaxpp_mlir.schedules.task import BWD, BWD_I, BWD_W, FWD, FusedTask, Task

#: Where a task sits: (rank, step in that rank's list, index inside a fused task).
Location = tuple[int, int, int]

_MAX_PROBLEMS = 12


def schedule_error(
    summary: str,
    problems: Sequence[str],
    per_rank: Sequence[Sequence[object]],
    marked: Sequence[tuple[int, int]] = (),
) -> ScheduleError:
    """A ``ScheduleError`` listing ``problems`` and showing the grid with ``marked`` steps."""
    lines = [summary]
    lines += [f"  {problem}" for problem in problems[:_MAX_PROBLEMS]]
    if len(problems) > _MAX_PROBLEMS:
        lines.append(f"  ... and {len(problems) - _MAX_PROBLEMS} more")
    lines.append(f"per-rank task order ({MARK} marks the offending steps):")
    lines.append(render_steps(per_rank, {where: MARK for where in marked}))
    return ScheduleError("\n".join(lines))


def _expected_backward_problems(seen: set[Task], num_stages: int, num_mb: int) -> list[str]:
    problems = []
    for stage in range(num_stages):
        for mb in range(num_mb):
            if Task(stage, FWD, mb) not in seen:
                problems.append(f"missing {Task(stage, FWD, mb)}")
            whole = Task(stage, BWD, mb) in seen
            split = [Task(stage, kind, mb) in seen for kind in (BWD_I, BWD_W)]
            if whole and any(split):
                problems.append(
                    f"stage {stage} microbatch {mb} has both a bwd and a split backward "
                    "(bwd_i/bwd_w); use one form"
                )
            elif not whole and not any(split):
                problems.append(f"missing {Task(stage, BWD, mb)} (or bwd_i and bwd_w)")
            elif not whole and not all(split):
                have, lack = (BWD_I, BWD_W) if split[0] else (BWD_W, BWD_I)
                problems.append(f"{Task(stage, have, mb)} has no matching {Task(stage, lack, mb)}")
    return problems


def check_tasks(
    per_rank: Sequence[Sequence[object]],
    *,
    num_stages: int,
    num_microbatches: int,
    stage_rank: Callable[[int], int],
) -> tuple[dict[Task, Location], dict[Task, tuple[Task, ...]]]:
    """Check the lists' contents and same-rank order.

    Returns where each task sits and the tasks each one depends on.
    """
    num_ranks = len(per_rank)
    problems: list[str] = []
    marked: list[tuple[int, int]] = []
    where: dict[Task, Location] = {}
    placement = [stage_rank(stage) for stage in range(num_stages)]
    for rank, row in enumerate(per_rank):
        for step, item in enumerate(row):
            if not isinstance(item, Task | FusedTask):
                problems.append(f"rank {rank} step {step}: not a Task or FusedTask: {item!r}")
                marked.append((rank, step))
                continue
            for index, task in enumerate(item.parts):
                bad = None
                if task.stage >= num_stages:
                    bad = f"stage {task.stage} out of range (num_stages={num_stages})"
                elif task.microbatch >= num_microbatches:
                    bad = (
                        f"microbatch {task.microbatch} out of range "
                        f"(num_microbatches={num_microbatches})"
                    )
                elif placement[task.stage] != rank:
                    placed = placement[task.stage]
                    bad = f"stage {task.stage} is placed on rank {placed}, not {rank}"
                elif task in where:
                    first_rank, first_step, _ = where[task]
                    bad = f"duplicate, first at rank {first_rank} step {first_step}"
                if bad is not None:
                    problems.append(f"rank {rank} step {step}: {task}: {bad}")
                    marked.append((rank, step))
                else:
                    where[task] = (rank, step, index)
    if problems:
        raise schedule_error("invalid schedule:", problems, per_rank, marked)
    problems = _expected_backward_problems(set(where), num_stages, num_microbatches)
    if problems:
        raise schedule_error(
            f"incomplete schedule ({num_stages} stages, {num_microbatches} microbatches, "
            f"{num_ranks} ranks):",
            problems,
            per_rank,
        )
    needs = {task: dependencies(task, num_stages, where) for task in where}
    _check_local_order(per_rank, where, needs)
    return where, needs


def _check_local_order(
    per_rank: Sequence[Sequence[object]],
    where: dict[Task, Location],
    needs: dict[Task, tuple[Task, ...]],
) -> None:
    """Reject a task placed before, on its own rank, a task whose output it needs."""
    problems: list[str] = []
    marked: list[tuple[int, int]] = []
    for rank, row in enumerate(per_rank):
        for step, item in enumerate(row):
            assert isinstance(item, Task | FusedTask)
            for index, task in enumerate(item.parts):
                for dep in needs[task]:
                    dep_rank, dep_step, dep_index = where[dep]
                    if dep_rank != rank or (dep_step, dep_index) < (step, index):
                        continue
                    if dep_step == step:
                        later = "after it in the same fused task"
                    else:
                        later = f"later on the same rank (step {dep_step})"
                    problems.append(
                        f"rank {rank} step {step}: {task} needs {dep}, which comes {later}"
                    )
                    marked.append((rank, step))
    if problems:
        raise schedule_error("broken dependency order:", problems, per_rank, marked)
