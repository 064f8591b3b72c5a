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
from collections.abc import Callable, Mapping, Sequence

from jaxpp_mlir.errors import ScheduleError
from jaxpp_mlir.schedules.check import Location, check_tasks, schedule_error
from jaxpp_mlir.schedules.deps import releases_activation
from jaxpp_mlir.schedules.task import BWD, BWD_I, BWD_W, FWD, KINDS, ScheduleItem, Task

#: Default cost of each task kind: a full backward costs two forwards.
DEFAULT_COSTS: Mapping[str, float] = {FWD: 1.0, BWD: 2.0, BWD_I: 1.0, BWD_W: 1.0}

#: Unit cost for every kind (used to render time grids).
UNIT_COSTS: Mapping[str, float] = {kind: 1.0 for kind in KINDS}

#: Per-kind overrides of ``DEFAULT_COSTS``, or a function of the task.
Costs = Mapping[str, float] | Callable[[Task], float]


@dataclasses.dataclass(frozen=True)
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


def _peak_in_flight(
    per_rank: Sequence[Sequence[ScheduleItem]],
    start: Mapping[Task, float],
    end: Mapping[Task, float],
) -> list[int]:
    peaks = []
    for row in per_rank:
        events = []  # (time, order, delta): frees (order 0) before new forwards (order 1)
        for item in row:
            for task in item.parts:
                if task.kind == FWD:
                    events.append((start[task], 1, 1))
                elif releases_activation(task):
                    events.append((end[task], 0, -1))
        alive = peak = 0
        for _, _, delta in sorted(events):
            alive += delta
            peak = max(peak, alive)
        peaks.append(peak)
    return peaks


def _deadlock(
    per_rank: Sequence[Sequence[ScheduleItem]],
    where: Mapping[Task, Location],
    needs: Mapping[Task, tuple[Task, ...]],
    pos: Sequence[int],
    avail: Mapping[Task, float],
) -> ScheduleError:
    """The error for ranks stuck at ``pos``: what each waits for, and the marked grid."""
    problems: list[str] = []
    marked: list[tuple[int, int]] = []
    for rank, row in enumerate(per_rank):
        if pos[rank] >= len(row):
            continue
        item = row[pos[rank]]
        waits = [
            dep
            for task in item.parts
            for dep in needs[task]
            if dep not in avail and dep not in item.parts
        ]
        dep = waits[0]
        dep_rank, dep_step, _ = where[dep]
        problems.append(
            f"rank {rank} step {pos[rank]}: {item} waits for {dep} "
            f"(rank {dep_rank} step {dep_step}; rank {dep_rank} is stuck at step "
            f"{pos[dep_rank]})"
        )
        marked.append((rank, pos[rank]))
    return schedule_error(
        "deadlock: every unfinished rank waits on another:", problems, per_rank, marked
    )


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
    """Check and simulate per-rank task lists; raise ``ScheduleError`` if they cannot run."""
    if transfer_cost < 0:
        raise ScheduleError(f"transfer_cost must be >= 0, got {transfer_cost}")
    if launch_cost < 0:
        raise ScheduleError(f"launch_cost must be >= 0, got {launch_cost}")
    cost = cost_function(costs)
    where, needs = check_tasks(
        per_rank,
        num_stages=num_stages,
        num_microbatches=num_microbatches,
        stage_rank=stage_rank,
    )
    num_ranks = len(per_rank)
    pos = [0] * num_ranks
    free = [0.0] * num_ranks
    busy = [0.0] * num_ranks
    avail: dict[Task, float] = {}  # when each task's outputs are ready (fused: group end)
    start: dict[Task, float] = {}
    end: dict[Task, float] = {}
    timeline: list[list[tuple[float, float, ScheduleItem]]] = [[] for _ in range(num_ranks)]
    # Per rank and step: the item, its tasks, and what it waits for from outside itself,
    # with the transfer delay each of those adds.
    steps = [
        [
            (
                item,
                item.parts,
                tuple(
                    (dep, transfer_cost if where[dep][0] != rank else 0.0)
                    for task in item.parts
                    for dep in needs[task]
                    if dep not in item.parts
                ),
            )
            for item in row
        ]
        for rank, row in enumerate(per_rank)
    ]
    progressed = True
    while progressed:
        progressed = False
        for rank, row in enumerate(steps):
            while pos[rank] < len(row):
                item, parts, waits = row[pos[rank]]
                ready = free[rank]
                for dep, hop in waits:
                    done = avail.get(dep)
                    if done is None:
                        break
                    ready = max(ready, done + hop)
                else:
                    now = ready + launch_cost
                    for task in parts:
                        start[task] = now
                        now += cost(task)
                        end[task] = now
                    for task in parts:
                        avail[task] = now
                    timeline[rank].append((ready, now, item))
                    busy[rank] += now - ready
                    free[rank] = now
                    pos[rank] += 1
                    progressed = True
                    continue
                break
    if any(pos[rank] < len(row) for rank, row in enumerate(per_rank)):
        raise _deadlock(per_rank, where, needs, pos, avail)
    makespan = max(free, default=0.0)
    idle = num_ranks * makespan - sum(busy)
    bubble = idle / (num_ranks * makespan) if makespan > 0 else 0.0
    return SimulationResult(
        num_ranks=num_ranks,
        makespan=makespan,
        bubble_fraction=bubble,
        peak_in_flight=_peak_in_flight(per_rank, start, end),
        busy_time=busy,
        start_times=start,
        end_times=end,
        timeline=timeline,
    )
