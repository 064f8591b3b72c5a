"""Run per-rank task lists in simulated time.

Each rank runs its list strictly in order, one item at a time. An item starts when its
rank is free and every task it depends on (see ``deps``) has finished, plus
``transfer_cost`` when that task ran on another rank. A ``FusedTask`` runs its parts back
to back as one executable: it starts once all the inputs of all its parts (other than
those its own earlier parts produce) are ready, and its outputs become available when the
whole group ends. ``launch_cost`` is the host's cost of starting one executable: every
item (a task, or a fused task as a whole) pays it once before its parts run, so fusing
tasks shows its gain. The lists are checked first (``check.check_tasks``); a schedule whose
ranks all end up waiting on each other is a deadlock and raises ``ScheduleError`` with the
step-by-rank grid, ``>>`` marking the step each stuck rank waits at.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from jaxpp_mlir.errors import ScheduleError
from jaxpp_mlir.runtime import records
from jaxpp_mlir.runtime.host_heap import collector_paused
from jaxpp_mlir.schedules.check import check_tasks, schedule_error
from jaxpp_mlir.schedules.deps import releases_activation
from jaxpp_mlir.schedules.task import BWD, BWD_I, BWD_W, FWD, KINDS, ScheduleItem, Task
from jaxpp_mlir.schedules.task_arrays import TaskArrays, task_arrays

#: Default cost of each task kind: a full backward costs two forwards.
DEFAULT_COSTS: Mapping[str, float] = {FWD: 1.0, BWD: 2.0, BWD_I: 1.0, BWD_W: 1.0}

#: Unit cost for every kind (used to render time grids).
UNIT_COSTS: Mapping[str, float] = {kind: 1.0 for kind in KINDS}

#: Per-kind overrides of ``DEFAULT_COSTS``, or a function of the task.
Costs = Mapping[str, float] | Callable[[Task], float]


@dataclasses.dataclass(frozen=True, repr=False)
class SimulationResult:
    """Timing of one simulated run of a schedule.

    ``start_times``/``end_times`` are per task (the parts of a fused task run back to
    back); ``timeline[rank]`` is that rank's ``(start, end, item)`` in list order.
    ``peak_in_flight[rank]`` is the largest number of (stage, microbatch) activations
    alive at once on that rank: from the start of a forward to the end of the task that
    frees it (``bwd``, or ``bwd_w`` when the backward is split).
    """

    num_ranks: int
    makespan: float
    bubble_fraction: float
    peak_in_flight: list[int]
    busy_time: list[float]
    start_times: dict[Task, float]
    end_times: dict[Task, float]
    timeline: list[list[tuple[float, float, ScheduleItem]]]

    @property
    def idle_time(self) -> float:
        """Total time the ranks spent idle before the makespan."""
        return self.num_ranks * self.makespan - sum(self.busy_time)

    @property
    def launches(self) -> int:
        """Executables the step starts, all ranks together (a fused task is one)."""
        return sum(len(items) for items in self.timeline)

    def grid(self) -> str:
        """The rank-by-time grid (``render_timeline``; needs integer times, e.g. unit costs)."""
        from jaxpp_mlir.schedules.render import render_timeline

        return render_timeline(self)

    def __repr__(self) -> str:
        return (
            f"SimulationResult({self.num_ranks} ranks, makespan {self.makespan:g}, "
            f"bubble {self.bubble_fraction:.1%}, peak activations per rank {self.peak_in_flight}, "
            f"{self.launches} launches; .grid() draws it)"
        )


#: The most item times ``PreparedTasks.summarize_many`` holds at once (of each kind).
_BATCH_ELEMENTS = 1 << 20


@records.frozen
class StepSummary:
    """What a planner reads of one simulated run (``PreparedTasks.summarize``): the same
    numbers as the ``SimulationResult`` of that run, without each task's times."""

    num_ranks: int
    makespan: float
    bubble_fraction: float
    peak_in_flight: list[int]
    busy_time: list[float]
    launches: int

    @classmethod
    def of(
        cls, busy_time: list[float], makespan: float, peak_in_flight: list[int], launches: int
    ) -> StepSummary:
        """The summary of ranks busy ``busy_time`` each (the bubble as ``simulate`` has it)."""
        return cls(
            num_ranks=len(busy_time),
            makespan=makespan,
            bubble_fraction=_bubble(busy_time, makespan),
            peak_in_flight=peak_in_flight,
            busy_time=busy_time,
            launches=launches,
        )


def _bubble(busy_time: list[float], makespan: float) -> float:
    """The share of the ranks' time before ``makespan`` that they spent idle."""
    num_ranks = len(busy_time)
    idle = num_ranks * makespan - sum(busy_time)
    return idle / (num_ranks * makespan) if makespan > 0 else 0.0


def cost_function(costs: Costs | None) -> Callable[[Task], float]:
    """Turn a cost spec (``None``, per-kind overrides or a function) into ``task -> cost``."""
    if callable(costs):
        func = costs

        def checked(task: Task) -> float:
            value = float(func(task))
            if value < 0:
                raise ScheduleError(f"cost of {task} is negative: {value}")
            return value

        return checked
    table = dict(DEFAULT_COSTS)
    for kind, value in (costs or {}).items():
        if kind not in KINDS:
            raise ScheduleError(f"unknown task kind in costs: {kind!r} (kinds: {KINDS})")
        if float(value) < 0:
            raise ScheduleError(f"cost of {kind!r} is negative: {value}")
        table[kind] = float(value)
    return lambda task: table[task.kind]


def _activation_events(arrays: TaskArrays) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Which tasks open an activation, which free one, and each rank's first task."""
    opens = arrays.kind == KINDS.index(FWD)
    closes = np.isin(arrays.kind, [KINDS.index(kind) for kind in KINDS if _frees(kind)])
    return opens, closes, arrays.item_tasks[arrays.rank_items].tolist()


def _peak_in_flight(
    events: tuple[np.ndarray, np.ndarray, list[int]], start: np.ndarray, end: np.ndarray
) -> list[int]:
    """Per rank, the most (stage, microbatch) activations alive at once (frees first)."""
    opens, closes, bounds = events
    peaks = []
    for first, last in zip(bounds, bounds[1:], strict=False):
        mine = slice(first, last)
        times = np.concatenate([end[mine][closes[mine]], start[mine][opens[mine]]])
        order = np.repeat([0, 1], [closes[mine].sum(), opens[mine].sum()])
        delta = (2 * order - 1)[np.lexsort((order, times))]
        peaks.append(max(0, int(np.cumsum(delta).max(initial=0))))
    return peaks


def _frees(kind: str) -> bool:
    return releases_activation(Task(0, kind, 0))


def _deadlock(
    per_rank: Sequence[Sequence[ScheduleItem]],
    stage_rank: Callable[[int], int],
    num_stages: int,
    num_microbatches: int,
    arrays: TaskArrays,
    pos: Sequence[int],
    item_end: Sequence[float | None],
) -> ScheduleError:
    """The error for ranks stuck at ``pos``: what each waits for, and the marked grid."""
    where, needs = check_tasks(
        per_rank,
        num_stages=num_stages,
        num_microbatches=num_microbatches,
        stage_rank=stage_rank,
    )
    avail = {
        task: item_end[index]
        for task, index in zip(arrays.tasks, arrays.item.tolist(), strict=True)
        if item_end[index] is not None
    }
    problems: list[str] = []
    marked: list[tuple[int, int]] = []
    for rank, row in enumerate(per_rank):
        step = pos[rank]
        if step >= len(row):
            continue
        item = row[step]
        waits = [
            dep
            for task in item.parts
            for dep in needs[task]
            if dep not in avail and dep not in item.parts
        ]
        dep = waits[0]
        dep_rank, dep_step, _ = where[dep]
        problems.append(
            f"rank {rank} step {step}: {item} waits for {dep} "
            f"(rank {dep_rank} step {dep_step}; rank {dep_rank} is stuck at step "
            f"{pos[dep_rank]})"
        )
        marked.append((rank, step))
    return schedule_error(
        "deadlock: every unfinished rank waits on another:", problems, per_rank, marked
    )


def _task_costs(arrays: TaskArrays, costs: Costs | None) -> list[float]:
    """Each task's cost, in the arrays' task order."""
    if callable(costs):
        return list(map(cost_function(costs), arrays.tasks))
    cost_function(costs)  # checks the overrides
    table = {**DEFAULT_COSTS, **{kind: float(value) for kind, value in (costs or {}).items()}}
    return np.array([table[kind] for kind in KINDS])[arrays.kind].tolist()


def _item_ready(
    arrays: TaskArrays, item_end: list[float | None], transfer_cost: float
) -> list[float]:
    """When each item could start: its rank's previous item ended (0 for the first)
    and what it waits for from other ranks arrived."""
    ends = np.array(item_end, dtype=np.float64)
    ready = np.empty_like(ends)
    ready[1:] = ends[:-1]
    ready[arrays.rank_items[:-1][np.diff(arrays.rank_items) > 0]] = 0.0
    waiting = np.repeat(np.arange(ends.size), np.diff(arrays.item_waits))
    np.maximum.at(ready, waiting, ends[arrays.wait_item] + transfer_cost)
    return ready.tolist()


def _task_times(
    arrays: TaskArrays,
    cost: list[float],
    launch_cost: float,
    item_ready: list[float],
    item_end: list[float | None],
) -> tuple[np.ndarray, np.ndarray, list[float]]:
    """Each task's start and end, and each rank's busy time, from its items' times.

    The parts of a fused item run back to back from its start; the sums are taken in
    the same order as the simulation's, so the times are the same floats.
    """
    ready = np.array(item_ready)
    ends = np.array(item_end, dtype=np.float64)
    start = (ready + launch_cost)[arrays.item]
    end = ends[arrays.item]
    for index in np.flatnonzero(np.diff(arrays.item_tasks) > 1).tolist():
        now = item_ready[index] + launch_cost
        for task in range(arrays.item_tasks[index], arrays.item_tasks[index + 1]):
            start[task] = now
            now += cost[task]
            end[task] = now
    return start, end, _busy_times(arrays, ready, ends)


def _busy_times(arrays: TaskArrays, ready: np.ndarray, ends: np.ndarray) -> list[float]:
    """Each rank's busy time: its items' spans (launch and parts), summed in list order."""
    spans = ends - ready
    return [
        float(np.cumsum(spans[first:last])[-1]) if last > first else 0.0
        for first, last in zip(arrays.rank_items[:-1], arrays.rank_items[1:], strict=True)
    ]


def _run_ranks(
    arrays: TaskArrays, cost: list[float], transfer_cost: float, launch_cost: float
) -> tuple[list[float | None], list[int], list[float]]:
    """Time every item: when its outputs are ready (None: never ran), how far each rank
    got (item index) and when it went free.

    A rank runs until an item waits for one not yet timed, registers as that item's
    waiter and is resumed once it is timed: every item is timed once, as soon as what
    it waits for is known.
    """
    num_ranks = len(arrays.rank_items) - 1
    rank_items = arrays.rank_items.tolist()
    item_tasks, item_waits, wait_item = arrays.item_tasks, arrays.item_waits, arrays.wait_item
    num_items = len(arrays.items)
    # Plain items (one task, waiting on at most one other rank's item) take the fast
    # path: ``first_wait`` (the sentinel ``num_items``, which ended at -inf, for none)
    # and ``item_cost``; fused items and items with several waits take the general one.
    waits = np.diff(arrays.item_waits)
    first_wait = np.full(num_items, num_items, dtype=np.int64)
    first_wait[waits > 0] = arrays.wait_item[arrays.item_waits[:-1][waits > 0]]
    first_wait_list = first_wait.tolist()
    single = np.diff(arrays.item_tasks) == 1
    general = ((waits > 1) | ~single).tolist()
    item_cost = np.zeros(num_items)
    item_cost[single] = np.asarray(cost)[arrays.item_tasks[:-1][single]]
    item_cost_list = item_cost.tolist()
    item_end: list[float | None] = [None] * num_items + [-math.inf]  # outputs ready
    pos = rank_items[:-1]
    free = [0.0] * num_ranks
    waiters: list[list[int] | None] = [None] * num_items  # ranks stuck on each item
    runnable = list(range(num_ranks - 1, -1, -1))
    while runnable:
        rank = runnable.pop()
        now, blocker = free[rank], -1
        for index in range(pos[rank], rank_items[rank + 1]):
            if general[index]:
                ready = now
                for wait in wait_item[item_waits[index] : item_waits[index + 1]].tolist():
                    done = item_end[wait]
                    if done is None:
                        blocker = wait
                        break
                    done += transfer_cost
                    if done > ready:
                        ready = done
                if blocker >= 0:
                    break
                now = ready + launch_cost
                for part_cost in cost[item_tasks[index] : item_tasks[index + 1]]:
                    now += part_cost
            else:
                done = item_end[first_wait_list[index]]
                if done is None:
                    blocker = first_wait_list[index]
                    break
                done += transfer_cost
                if done < now:
                    done = now
                now = done + launch_cost + item_cost_list[index]
            item_end[index] = now
            woken = waiters[index]
            if woken is not None:
                runnable.extend(woken)
        else:
            index = rank_items[rank + 1]
        if blocker >= 0:
            if waiters[blocker] is None:
                waiters[blocker] = [rank]
            else:
                waiters[blocker].append(rank)
        pos[rank], free[rank] = index, now
    del item_end[num_items]
    return item_end, pos, free


def simulate_tasks(
    per_rank: Sequence[Sequence[ScheduleItem]],
    *,
    num_stages: int,
    num_microbatches: int,
    stage_rank: Callable[[int], int],
    costs: Costs | None = None,
    transfer_cost: float = 0.0,
    launch_cost: float = 0.0,
) -> SimulationResult:
    """Check and simulate per-rank task lists; raise ``ScheduleError`` if they cannot run.

    The time grows with the number of tasks (see ``_run_ranks``), not with tasks times
    ranks: a planner simulates schedules of 100 000s of tasks many times.
    """
    prepared = PreparedTasks(
        per_rank, num_stages=num_stages, num_microbatches=num_microbatches, stage_rank=stage_rank
    )
    return prepared.simulate(costs, transfer_cost=transfer_cost, launch_cost=launch_cost)


class PreparedTasks:
    """Per-rank task lists checked and linked once (``task_arrays``), to simulate under
    many costs: a planner's candidate stage splits differ only in their tasks' costs."""

    def __init__(
        self,
        per_rank: Sequence[Sequence[ScheduleItem]],
        *,
        num_stages: int,
        num_microbatches: int,
        stage_rank: Callable[[int], int],
    ):
        self.per_rank = per_rank
        self.num_stages = num_stages
        self.num_microbatches = num_microbatches
        self.stage_rank = stage_rank
        with collector_paused():
            self.arrays = task_arrays(
                per_rank,
                num_stages=num_stages,
                num_microbatches=num_microbatches,
                stage_rank=stage_rank,
            )
            self.activation_events = _activation_events(self.arrays)
        self._peaks: list[int] | None = None  # ``_list_order_peaks``, counted once
        # ``_dependency_order``'s items in order, and each one's predecessor on its rank.
        self._order: tuple[list[int], list[int]] | None = None

    def simulate(
        self, costs: Costs | None = None, *, transfer_cost: float = 0.0, launch_cost: float = 0.0
    ) -> SimulationResult:
        """The lists simulated with ``costs``; ``ScheduleError`` if they cannot run."""
        if transfer_cost < 0:
            raise ScheduleError(f"transfer_cost must be >= 0, got {transfer_cost}")
        if launch_cost < 0:
            raise ScheduleError(f"launch_cost must be >= 0, got {launch_cost}")
        with collector_paused():
            return _simulate(self, costs, transfer_cost, launch_cost)

    def summarize(
        self, task_costs: Sequence[float], *, transfer_cost: float = 0.0, launch_cost: float = 0.0
    ) -> StepSummary:
        """``simulate``'s makespan, bubble, busy times, peaks and launches (the same
        floats) for ``task_costs``, each task's cost in the order of ``arrays.tasks``,
        without building each task's times: a planner simulates hundreds of splits.

        Where every task and launch takes time, a rank's events happen in its list's
        order whatever the costs, so its activations' peak is the list's (counted once);
        otherwise it comes from the tasks' times, as in ``simulate``.
        """
        values = np.asarray(task_costs, dtype=np.float64)
        if values.shape != (len(self.arrays.tasks),):
            raise ScheduleError(f"{values.size} task costs for {len(self.arrays.tasks)} tasks")
        self._check_costs(values[None], np.array([transfer_cost]), launch_cost)
        with collector_paused():
            positive = bool(values.size == 0 or values.min() > 0)
            return self._summarize(values.tolist(), positive, transfer_cost, launch_cost)

    def _summarize(
        self, cost: list[float], positive: bool, transfer_cost: float, launch_cost: float
    ) -> StepSummary:
        arrays = self.arrays
        item_end, pos, free = _run_ranks(arrays, cost, transfer_cost, launch_cost)
        _raise_if_stuck(self, item_end, pos)
        item_ready = _item_ready(arrays, item_end, transfer_cost)
        if launch_cost > 0 and positive:
            busy = _busy_times(arrays, np.array(item_ready), np.array(item_end, dtype=np.float64))
            peaks = self._list_order_peaks()
        else:
            start, end, busy = _task_times(arrays, cost, launch_cost, item_ready, item_end)
            peaks = _peak_in_flight(self.activation_events, start, end)
        return StepSummary.of(busy, max(free, default=0.0), peaks, len(arrays.items))

    def summarize_many(
        self,
        task_costs: np.ndarray,
        *,
        transfer_costs: Sequence[float],
        launch_cost: float = 0.0,
    ) -> list[StepSummary]:
        """``summarize`` for many costings at once: row ``k`` of ``task_costs`` (one
        column per task of ``arrays.tasks``) with ``transfer_costs[k]``; the same floats
        as ``summarize`` gives row by row.

        The items are timed in one order that respects what each waits for (the lists'
        dependencies do not depend on the costs), every costing at once: one array
        operation per item instead of one simulation per costing. A costing with a free
        task, or without launch cost, needs each task's times for its peaks: it is
        summarized on its own.
        """
        costs = np.asarray(task_costs, dtype=np.float64)
        transfers = np.asarray(transfer_costs, dtype=np.float64)
        count = len(self.arrays.tasks)
        if costs.size == 0 and transfers.size == 0:
            return []
        if costs.ndim != 2 or costs.shape[1] != count or transfers.shape != (len(costs),):
            raise ScheduleError(
                f"task costs of shape {costs.shape} and {transfers.size} transfer costs for "
                f"{count} tasks: give one row of task costs and one transfer cost per costing"
            )
        self._check_costs(costs, transfers, launch_cost)
        in_list_order = (costs > 0).all(axis=1) & (launch_cost > 0)  # as ``summarize`` decides
        batched = np.flatnonzero(in_list_order)
        # Each item keeps a few values per costing: a chunk holds about 40 MiB at most.
        rows = max(1, _BATCH_ELEMENTS // max(1, len(self.arrays.items)))
        summaries: dict[int, StepSummary] = {}  # by row
        with collector_paused():
            for first in range(0, len(batched), rows):
                chunk = batched[first : first + rows]
                for k, summary in zip(
                    chunk.tolist(),
                    self._summarize_many(costs[chunk], transfers[chunk], launch_cost),
                    strict=True,
                ):
                    summaries[k] = summary
            for k in np.flatnonzero(~in_list_order).tolist():
                summaries[k] = self._summarize(
                    costs[k].tolist(), False, float(transfers[k]), launch_cost
                )
        return [summaries[k] for k in range(len(costs))]

    def _summarize_many(
        self, costs: np.ndarray, transfers: np.ndarray, launch_cost: float
    ) -> list[StepSummary]:
        """The summaries of costings whose ranks' events happen in list order (every task
        and launch takes time), timed together."""
        arrays, (order, previous) = self.arrays, self._dependency_order()
        item_tasks = arrays.item_tasks.tolist()
        item_waits, wait_item = arrays.item_waits.tolist(), arrays.wait_item.tolist()
        columns = costs.T  # one row per task: each a costing-wide vector
        start_free = np.zeros(len(costs))
        ready: list[np.ndarray | None] = [None] * len(arrays.items)
        end: list[np.ndarray | None] = [None] * len(arrays.items)
        # Each item timed with ``_run_ranks``' operations, in the same order of operands,
        # on every costing at once.
        for index in order:
            now = start_free if previous[index] < 0 else end[previous[index]]
            waits = wait_item[item_waits[index] : item_waits[index + 1]]
            first, last = item_tasks[index], item_tasks[index + 1]
            if len(waits) <= 1 and last - first == 1:
                item_ready = now if not waits else np.maximum(end[waits[0]] + transfers, now)
                end[index] = item_ready + launch_cost + columns[first]
            else:
                item_ready = now
                for wait in waits:
                    item_ready = np.maximum(item_ready, end[wait] + transfers)
                finish = item_ready + launch_cost
                for task in range(first, last):
                    finish = finish + columns[task]
                end[index] = finish
            ready[index] = item_ready
        ends = np.stack(end, axis=1) if end else np.zeros((len(costs), 0))
        readies = np.stack(ready, axis=1) if ready else np.zeros((len(costs), 0))
        spans = ends - readies
        num_ranks = len(self.per_rank)
        rank_items = arrays.rank_items.tolist()
        busy = np.zeros((len(costs), num_ranks))
        free = np.zeros((len(costs), num_ranks))
        for rank in range(num_ranks):
            first, last = rank_items[rank], rank_items[rank + 1]
            if last > first:
                busy[:, rank] = np.cumsum(spans[:, first:last], axis=1)[:, -1]
                free[:, rank] = ends[:, last - 1]
        return [
            StepSummary.of(
                busy[k].tolist(),
                max(free[k].tolist(), default=0.0),
                self._list_order_peaks(),
                len(arrays.items),
            )
            for k in range(len(costs))
        ]

    def _check_costs(self, costs: np.ndarray, transfers: np.ndarray, launch_cost: float) -> None:
        """A ``ScheduleError`` naming the first task whose cost is negative or not a number,
        or the transfer or launch cost that is negative."""
        bad = np.argwhere(~(costs >= 0))
        if bad.size:
            row, column = (int(x) for x in bad[0])
            value = float(costs[row, column])
            what = "not a number" if math.isnan(value) else f"negative: {value}"
            raise ScheduleError(f"cost of {self.arrays.tasks[column]} is {what}")
        if not (transfers >= 0).all():
            raise ScheduleError(f"transfer_cost must be >= 0, got {transfers.min()}")
        if launch_cost < 0:
            raise ScheduleError(f"launch_cost must be >= 0, got {launch_cost}")

    def _dependency_order(self) -> tuple[list[int], list[int]]:
        """The items in an order where each comes after its rank's previous item and the
        items it waits for, and each item's previous one on its rank (-1 for a rank's
        first); where there is no such order (a deadlock), ``simulate``'s error."""
        if self._order is None:
            arrays = self.arrays
            count = len(arrays.items)
            # Each item's predecessor in its rank's list (-1 for a rank's first).
            previous = list(range(-1, count - 1))
            for first in arrays.rank_items[:-1].tolist():
                if first < count:
                    previous[first] = -1
            item_waits, wait_item = arrays.item_waits.tolist(), arrays.wait_item.tolist()
            pending = [0] * count
            followers: list[list[int]] = [[] for _ in range(count)]
            for index in range(count):
                needs = wait_item[item_waits[index] : item_waits[index + 1]]
                if previous[index] >= 0:
                    needs = [*needs, previous[index]]
                pending[index] = len(needs)
                for need in needs:
                    followers[need].append(index)
            order = [index for index in range(count) if not pending[index]]
            for index in order:  # grows while it is read
                for follower in followers[index]:
                    pending[follower] -= 1
                    if not pending[follower]:
                        order.append(follower)
            if len(order) < count:
                self.simulate()  # raises the deadlock error, with the grid
                raise ScheduleError("the task lists wait on each other in a cycle")
            self._order = order, previous
        return self._order

    def _list_order_peaks(self) -> list[int]:
        """Each rank's activations' peak with its events in list order (frees first)."""
        if self._peaks is None:
            order = np.arange(len(self.arrays.tasks), dtype=np.float64) * 2
            self._peaks = _peak_in_flight(self.activation_events, order, order + 1)
        return list(self._peaks)  # a summary's own list: the count stays as it was


def _simulate(
    prepared: PreparedTasks, costs: Costs | None, transfer_cost: float, launch_cost: float
) -> SimulationResult:
    per_rank, arrays = prepared.per_rank, prepared.arrays
    cost = _task_costs(arrays, costs)
    num_ranks = len(per_rank)
    rank_items = arrays.rank_items.tolist()
    item_end, pos, free = _run_ranks(arrays, cost, transfer_cost, launch_cost)
    _raise_if_stuck(prepared, item_end, pos)
    item_ready = _item_ready(arrays, item_end, transfer_cost)
    start, end, busy = _task_times(arrays, cost, launch_cost, item_ready, item_end)
    makespan = max(free, default=0.0)
    bubble = _bubble(busy, makespan)
    timeline = [
        list(
            zip(item_ready[first:last], item_end[first:last], arrays.items[first:last], strict=True)
        )
        for first, last in itertools.pairwise(rank_items)
    ]
    return SimulationResult(
        num_ranks=num_ranks,
        makespan=makespan,
        bubble_fraction=bubble,
        peak_in_flight=_peak_in_flight(prepared.activation_events, start, end),
        busy_time=busy,
        start_times=dict(zip(arrays.tasks, start.tolist(), strict=True)),
        end_times=dict(zip(arrays.tasks, end.tolist(), strict=True)),
        timeline=timeline,
    )


def _raise_if_stuck(prepared: PreparedTasks, item_end: list[float | None], pos: list[int]) -> None:
    """The deadlock ``ScheduleError`` where a rank did not get through its list."""
    per_rank, arrays = prepared.per_rank, prepared.arrays
    rank_items = arrays.rank_items.tolist()
    steps = [pos[rank] - rank_items[rank] for rank in range(len(per_rank))]
    if any(step < len(row) for step, row in zip(steps, per_rank, strict=True)):
        raise _deadlock(
            per_rank,
            prepared.stage_rank,
            prepared.num_stages,
            prepared.num_microbatches,
            arrays,
            steps,
            item_end,
        )
