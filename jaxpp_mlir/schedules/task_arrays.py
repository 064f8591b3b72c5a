"""Per-rank task lists as flat integer arrays, checked and linked with numpy.

The simulator runs schedules of hundreds of thousands of tasks (a planner calls it many
times), so it works on integer task ids instead of ``Task`` objects and dicts:
``id = (stage * len(KINDS) + kind) * num_microbatches + microbatch``. ``task_arrays``
flattens the lists, checks them and computes every task's dependencies (the rules of
``deps.dependencies``) in bulk. When anything is wrong it hands the lists to
``check.check_tasks``, which raises the ``ScheduleError`` that names every problem, so
both paths fail with the same message.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from jaxpp_mlir.errors import ScheduleError
from jaxpp_mlir.runtime import records
from jaxpp_mlir.schedules.check import check_tasks
from jaxpp_mlir.schedules.task import KINDS, FusedTask, Task

_KIND_INDEX = {kind: index for index, kind in enumerate(KINDS)}
_FWD, _BWD, _BWD_I, _BWD_W = (_KIND_INDEX[kind] for kind in ("fwd", "bwd", "bwd_i", "bwd_w"))
_NUM_KINDS = len(KINDS)


@records.frozen
class TaskArrays:
    """Flat view of checked per-rank lists.

    Tasks are numbered in list order (rank by rank, item by item, part by part);
    ``tasks[t]`` is the ``Task``, ``kind[t]`` its kind index and ``item[t]`` the index
    of its item (numbered the same way). Items of rank ``r`` are
    ``rank_items[r]:rank_items[r+1]``; the tasks of item ``i`` are
    ``item_tasks[i]:item_tasks[i+1]``. ``wait_item`` lists, item by item
    (``item_waits[i]:item_waits[i+1]``), the items on other ranks that each item waits
    for. An item never waits on its own rank: what it reads from there comes earlier
    in the rank's list, so it has ended by the time the rank is free.
    """

    tasks: list[Task]
    items: list[object]
    kind: np.ndarray
    item: np.ndarray
    rank_items: np.ndarray
    item_tasks: np.ndarray
    item_waits: np.ndarray
    wait_item: np.ndarray


def _flatten(per_rank: Sequence[Sequence[object]]) -> tuple[list, list, list, list[int]] | None:
    """Items, tasks, task-to-item index and per-rank item counts; None on a stray item."""
    items: list[object] = []
    tasks: list[Task] = []
    item_of: list[int] = []
    counts: list[int] = []
    for row in per_rank:
        counts.append(len(row))
        if set(map(type, row)) == {Task}:
            item_of.extend(range(len(items), len(items) + len(row)))
            tasks.extend(row)
            items.extend(row)
            continue
        for item in row:
            if type(item) is Task:
                item_of.append(len(items))
                tasks.append(item)
            elif isinstance(item, Task | FusedTask):
                parts = item.parts
                item_of.extend([len(items)] * len(parts))
                tasks.extend(parts)
            else:
                return None
            items.append(item)
    return items, tasks, item_of, counts


def _dependencies(
    stage: np.ndarray, kind: np.ndarray, mb: np.ndarray, present: np.ndarray, m: int, s: int
) -> np.ndarray:
    """``[num_tasks, 3]`` ids of what each task reads (-1: none); see ``deps``."""

    def ids(st: np.ndarray, kd: np.ndarray | int, mbs: np.ndarray) -> np.ndarray:
        return (st * _NUM_KINDS + kd) * m + mbs

    def present_or_bwd(st: np.ndarray, kd: np.ndarray | int, mbs: np.ndarray) -> np.ndarray:
        wanted = ids(st, kd, mbs)
        safe = np.clip(wanted, 0, present.size - 1)
        return np.where(present[safe], wanted, ids(st, _BWD, mbs))

    deps = np.full((stage.size, 3), -1, dtype=np.int64)
    fwd, bwd_w = kind == _FWD, kind == _BWD_W
    backward = ~fwd & ~bwd_w
    has_prev_mb = mb > 0
    prev_mb = np.maximum(mb - 1, 0)
    same_kind = np.where(kind == _BWD_I, _BWD_I, _BWD_W)
    previous = np.where(fwd, ids(stage, _FWD, prev_mb), present_or_bwd(stage, same_kind, prev_mb))
    deps[:, 2] = np.where(has_prev_mb, previous, -1)
    first_fwd = fwd & (stage > 0)
    deps[first_fwd, 0] = ids(stage[first_fwd] - 1, _FWD, mb[first_fwd])
    deps[bwd_w, 0] = ids(stage[bwd_w], _BWD_I, mb[bwd_w])
    deps[backward, 0] = ids(stage[backward], _FWD, mb[backward])
    upstream = backward & (stage < s - 1)
    deps[upstream, 1] = present_or_bwd(stage[upstream] + 1, _BWD_I, mb[upstream])
    return deps


def task_arrays(
    per_rank: Sequence[Sequence[object]],
    *,
    num_stages: int,
    num_microbatches: int,
    stage_rank: Callable[[int], int],
) -> TaskArrays:
    """Flatten, check and link the lists; raise ``check_tasks``'s error if they are wrong."""

    def reject() -> ScheduleError:
        check_tasks(
            per_rank,
            num_stages=num_stages,
            num_microbatches=num_microbatches,
            stage_rank=stage_rank,
        )
        return ScheduleError("internal error: the task lists failed a check that passed")

    flat = _flatten(per_rank)
    if flat is None:
        raise reject()
    items, tasks, item_of, counts = flat
    m, s = num_microbatches, num_stages
    num_tasks = len(tasks)
    if num_tasks:
        stages_t, kinds_t, mbs_t = zip(*tasks, strict=True)
    else:
        stages_t, kinds_t, mbs_t = (), (), ()
    stage = np.fromiter(stages_t, dtype=np.int64, count=num_tasks)
    kind = np.fromiter(map(_KIND_INDEX.__getitem__, kinds_t), dtype=np.int64, count=num_tasks)
    mb = np.fromiter(mbs_t, dtype=np.int64, count=num_tasks)
    item = np.fromiter(item_of, dtype=np.int64, count=num_tasks)
    rank_items = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=rank_items[1:])
    item_rank = np.repeat(np.arange(len(counts)), counts)
    rank = item_rank[item]
    if num_tasks and (stage.max() >= s or mb.max() >= m):
        raise reject()
    placement = np.fromiter((stage_rank(st) for st in range(s)), dtype=np.int64, count=s)
    if np.any(placement[stage] != rank):
        raise reject()
    task_id = (stage * _NUM_KINDS + kind) * m + mb
    seen = np.bincount(task_id, minlength=s * _NUM_KINDS * m)
    if np.any(seen > 1):
        raise reject()
    grid = seen.reshape(s, _NUM_KINDS, m).astype(bool)
    whole, halves = grid[:, _BWD], grid[:, _BWD_I].astype(int) + grid[:, _BWD_W]
    if not grid[:, _FWD].all() or np.any(whole & (halves > 0)) or np.any(~whole & (halves != 2)):
        raise reject()
    present = seen.astype(bool)
    deps = _dependencies(stage, kind, mb, present, m, s)
    position = np.full(seen.size, -1, dtype=np.int64)
    position[task_id] = np.arange(num_tasks)
    waiter, column = np.nonzero(deps >= 0)
    dep_task = position[deps[waiter, column]]
    same_rank = rank[dep_task] == rank[waiter]
    if np.any(same_rank & (dep_task >= waiter)):
        raise reject()  # comes later on its rank, or later in the same fused item
    waiter, dep_task = waiter[~same_rank], dep_task[~same_rank]
    waiting_item = item[waiter]  # nondecreasing: deps come out of nonzero in task order
    item_waits = np.zeros(len(items) + 1, dtype=np.int64)
    np.cumsum(np.bincount(waiting_item, minlength=len(items)), out=item_waits[1:])
    item_tasks = np.zeros(len(items) + 1, dtype=np.int64)
    np.cumsum(np.bincount(item, minlength=len(items)), out=item_tasks[1:])
    return TaskArrays(
        tasks=tasks,
        items=items,
        kind=kind,
        item=item,
        rank_items=rank_items,
        item_tasks=item_tasks,
        item_waits=item_waits,
        wait_item=item[dep_task],
    )
