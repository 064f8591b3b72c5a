"""An independent reference for per-rank task lists: which ones can run.

Written from the documented rules (``jaxpp_mlir/schedules/deps.py``'s docstring),
sharing no code with ``jaxpp_mlir.schedules``: a schedule is accepted when every
(stage, microbatch) has its forward and exactly one complete backward form
(``bwd``, or ``bwd_i`` with ``bwd_w``), each task once, on its stage's rank,
and running each rank's list in order, each item once every task it reads has
finished (or is an earlier part of the same fused item), ends with every item run.
One more documented rule: there are no more ranks than stages.
"""

from __future__ import annotations

from collections.abc import Sequence

from jaxpp_mlir.schedules import FusedTask

Key = tuple[int, str, int]  # (stage, kind, microbatch)


def parts(item: object) -> list[Key]:
    tasks = item.tasks if isinstance(item, FusedTask) else (item,)
    return [(t.stage, t.kind, t.microbatch) for t in tasks]


def _complete(present: set[Key], num_stages: int, num_microbatches: int) -> bool:
    for s in range(num_stages):
        for m in range(num_microbatches):
            whole = (s, "bwd", m) in present
            halves = ((s, "bwd_i", m) in present, (s, "bwd_w", m) in present)
            if (s, "fwd", m) not in present:
                return False
            if whole == any(halves) or halves[0] != halves[1]:
                return False  # none, both forms, or half a split
    return True


def reads(task: Key, num_stages: int, present: set[Key]) -> list[Key]:
    """What ``task`` reads: its data inputs, then the loop state of the previous microbatch."""
    s, kind, m = task
    if kind == "fwd":
        inputs = [(s - 1, "fwd", m)] if s > 0 else []
        state = [(s, "fwd", m - 1)] if m > 0 else []
        return inputs + state
    if kind == "bwd_w":
        inputs = [(s, "bwd_i", m)]
    else:
        inputs = [(s, "fwd", m)]
        if s + 1 < num_stages:
            split = (s + 1, "bwd_i", m)
            inputs.append(split if split in present else (s + 1, "bwd", m))
    state = []
    if m > 0:
        role = "bwd_i" if kind == "bwd_i" else "bwd_w"
        state = [(s, role, m - 1) if (s, role, m - 1) in present else (s, "bwd", m - 1)]
    return inputs + state


def accepts(
    rows: Sequence[Sequence[object]],
    num_stages: int,
    num_microbatches: int,
    placement: Sequence[int],
) -> bool:
    """Whether ``rows`` (per-rank items) is a schedule that runs to the end."""
    if len(rows) > num_stages:
        return False  # documented: no more ranks than stages
    seen: list[Key] = []
    for rank, row in enumerate(rows):
        for item in row:
            for s, _, m in parts(item):
                if not (s < num_stages and m < num_microbatches and placement[s] == rank):
                    return False
                seen.append((s, _, m))
    present = set(seen)
    if len(present) != len(seen) or not _complete(present, num_stages, num_microbatches):
        return False
    done: set[Key] = set()
    position = [0] * len(rows)
    moved = True
    while moved:
        moved = False
        for rank, row in enumerate(rows):
            if position[rank] == len(row):
                continue
            item = parts(row[position[rank]])
            runnable = True
            for index, task in enumerate(item):
                for need in reads(task, num_stages, present):
                    if need in item[index + 1 :] or need == task:
                        return False  # a fused item reading its own later part
                    if need not in done and need not in item[:index]:
                        runnable = False
            if runnable:
                done.update(item)
                position[rank] += 1
                moved = True
    return all(position[rank] == len(row) for rank, row in enumerate(rows))
