"""Text grids of per-rank task lists: one row per rank.

Two views:

* ``render_steps``: column ``i`` is the ``i``-th item of each rank's list (no timing);
  cells can carry a two-character mark (``>>``) pointing at an offending step. Used in
  error messages, where a schedule may not be runnable.
* ``render_timeline``: column ``t`` is time step ``t`` of a simulation (integer times,
  e.g. unit costs); ``.`` is idle, ``~`` continues a task longer than one step, and a
  ``+`` prefix marks a task fused with the one before it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from jaxpp_mlir.errors import ScheduleError
from jaxpp_mlir.schedules.task import FusedTask, Task

if TYPE_CHECKING:
    from jaxpp_mlir.schedules.simulate import SimulationResult

#: The mark ``render_steps`` puts before an offending cell.
MARK = ">>"


def item_label(item: object) -> str:
    """Short label of a schedule item (``F2.0``, ``F3.0+B3.0``), or ``repr`` of anything else."""
    if isinstance(item, Task | FusedTask):
        return item.label
    return repr(item)


def _rank_prefixes(num_ranks: int) -> list[str]:
    width = len(str(max(num_ranks - 1, 0)))
    return [f"rank {rank:>{width}} |" for rank in range(num_ranks)]


def render_steps(
    per_rank: Sequence[Sequence[object]], marks: Mapping[tuple[int, int], str] | None = None
) -> str:
    """Step-by-rank grid of the lists; ``marks[(rank, step)]`` (2 chars) prefixes that cell."""
    marks = marks or {}
    labels = [[item_label(item) for item in row] for row in per_rank]
    width = max([4, *(len(label) for row in labels for label in row)])
    num_steps = max([0, *(len(row) for row in labels)])
    prefixes = _rank_prefixes(len(labels))
    head = "step".ljust(len(prefixes[0]) - 1) + "|" if prefixes else "step |"
    lines = [head + "".join(f"  {step:<{width}} " for step in range(num_steps)).rstrip()]
    for rank, row in enumerate(labels):
        cells = [
            f"{marks.get((rank, step), '  '):2}{label:<{width}} " for step, label in enumerate(row)
        ]
        lines.append(prefixes[rank] + "".join(cells).rstrip())
    return "\n".join(lines)


def _as_step(value: float) -> int:
    if value != int(value):
        raise ScheduleError(
            f"render_timeline needs integer start/end times (e.g. unit costs), got {value}"
        )
    return int(value)


def render_timeline(result: SimulationResult) -> str:
    """Time-step-by-rank grid of a simulation whose times are all integers."""
    num_steps = _as_step(result.makespan)
    grid: list[list[str]] = [["."] * num_steps for _ in range(result.num_ranks)]
    fused = False
    for rank, timeline in enumerate(result.timeline):
        for _, _, item in timeline:
            for index, part in enumerate(item.parts):
                start = _as_step(result.start_times[part])
                end = _as_step(result.end_times[part])
                prefix = "+" if index > 0 else ""
                fused = fused or index > 0
                for step in range(start, end):
                    grid[rank][step] = prefix + part.label if step == start else "~"
    width = max([4, *(len(cell) for row in grid for cell in row)])
    prefixes = _rank_prefixes(result.num_ranks)
    head = "t".ljust(len(prefixes[0]) - 1) + "|"
    lines = [head + "".join(f" {step:<{width}}" for step in range(num_steps)).rstrip()]
    for rank, row in enumerate(grid):
        lines.append(prefixes[rank] + "".join(f" {cell:<{width}}" for cell in row).rstrip())
    legend = "'.' idle, '~' continues the task on its left"
    if fused:
        legend += ", '+' fused with the task before it"
    lines.append(f"({legend})")
    return "\n".join(lines)
