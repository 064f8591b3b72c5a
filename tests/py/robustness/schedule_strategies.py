"""Hypothesis strategies: random per-rank task lists, valid ones and broken ones."""

from __future__ import annotations

import dataclasses
import random

from hypothesis import strategies as st
from schedule_reference import Key, reads

from jaxpp_mlir.schedules import FusedTask, Task

MUTATIONS = (
    "none",
    "swap_adjacent",
    "move",
    "drop",
    "duplicate",
    "wrong_rank",
    "microbatch_out_of_range",
    "stage_out_of_range",
    "both_backward_forms",
)
BACKWARD_FORMS = ("whole", "split", "mixed")  # every task's backward, or each at random


@dataclasses.dataclass
class RandomSchedule:
    rows: list[list[Task | FusedTask]]
    num_stages: int
    num_microbatches: int
    placement: list[int]
    mutation: str

    @property
    def num_ranks(self) -> int:
        return len(self.rows)


def _task(key: Key) -> Task:
    s, kind, m = key
    return Task(s, kind, m)


def _topological_rows(
    rnd: random.Random, keys: set[Key], num_stages: int, placement: list[int], num_ranks: int
) -> list[list[Task | FusedTask]]:
    """Each rank's tasks in the order of one random run that respects every read.

    Each step picks at random among the tasks whose reads have all run; the list of
    such tasks is kept up to date as tasks run rather than recomputed (built in sorted
    order, so that the run does not depend on the hash order of the set ``keys``).
    """
    rows: list[list[Task | FusedTask]] = [[] for _ in range(num_ranks)]
    unmet: dict[Key, int] = {}
    readers: dict[Key, list[Key]] = {}
    for key in sorted(keys):
        needs = set(reads(key, num_stages, keys))
        unmet[key] = len(needs)
        for need in needs:
            readers.setdefault(need, []).append(key)
    ready = [key for key, count in unmet.items() if count == 0]
    while ready:
        index = rnd.randrange(len(ready))
        ready[index], ready[-1] = ready[-1], ready[index]
        key = ready.pop()
        for reader in readers.get(key, ()):
            unmet[reader] -= 1
            if unmet[reader] == 0:
                ready.append(reader)
        rows[placement[key[0]]].append(_task(key))
    if any(unmet.values()):
        raise AssertionError("the tasks' reads form a cycle or leave the task set")
    return rows


def _fuse_some(rnd: random.Random, rows: list[list], probability: float) -> None:
    for r, row in enumerate(rows):
        fused: list = []
        for item in row:
            if fused and rnd.random() < probability:
                previous = fused.pop()
                parts = (*getattr(previous, "tasks", (previous,)), *item.parts)
                fused.append(FusedTask(parts))
            else:
                fused.append(item)
        rows[r] = fused


def _mutate(rnd: random.Random, s: RandomSchedule, mutation: str) -> None:
    rows = [row for row in s.rows if row]
    row = rnd.choice(rows)
    i = rnd.randrange(len(row))
    item = row[i]
    task = item.parts[0]
    if mutation == "swap_adjacent" and len(row) > 1:
        j = min(i, len(row) - 2)
        row[j], row[j + 1] = row[j + 1], row[j]
    elif mutation == "move":
        row.insert(rnd.randrange(len(row)), row.pop(i))
    elif mutation == "drop":
        del row[i]
    elif mutation == "duplicate":
        row.insert(rnd.randrange(len(row) + 1), task)
    elif mutation == "wrong_rank" and s.num_ranks > 1:
        del row[i]
        others = [r for r in range(s.num_ranks) if r != s.placement[task.stage]]
        target = s.rows[rnd.choice(others)]
        target.insert(rnd.randrange(len(target) + 1), item)
    elif mutation == "microbatch_out_of_range":
        row.insert(i, Task(task.stage, task.kind, s.num_microbatches))
    elif mutation == "stage_out_of_range":
        row.insert(i, Task(s.num_stages, task.kind, task.microbatch))
    elif mutation == "both_backward_forms":
        kind = "bwd_i" if task.kind == "bwd" else "bwd"
        row.insert(rnd.randrange(len(row) + 1), Task(task.stage, kind, task.microbatch))


@st.composite
def random_schedules(
    draw,
    *,
    max_ranks: int = 4,
    max_stages: int = 8,
    max_microbatches: int = 6,
    num_stages: int | None = None,
    num_microbatches: int | None = None,
    num_ranks: int | None = None,
    fuse_probability: float = 0.15,
    mutations: tuple[str, ...] = MUTATIONS,
) -> RandomSchedule:
    """Random per-rank task lists: a random valid run, some adjacent items fused, then
    (unless the mutation is ``none``) one random change that may or may not break it."""
    stages = num_stages or draw(st.integers(1, max_stages))
    ranks = num_ranks or draw(st.integers(1, min(max_ranks, stages)))
    microbatches = num_microbatches or draw(st.integers(1, max_microbatches))
    # A seeded random.Random: hypothesis's own (use_true_random=False) makes each of the
    # hundreds of calls per schedule a recorded draw, which cost most of the test's time;
    # per-element hypothesis draws (a rank per stage, a backward form per task) cost the
    # same, so those come from it too: hypothesis picks whether the backwards are all
    # whole, all split, or each one at random.
    rnd = draw(st.randoms(use_true_random=True))
    placement = [rnd.randrange(ranks) for _ in range(stages)]
    backwards = draw(st.sampled_from(BACKWARD_FORMS))
    keys: set[Key] = set()
    for s in range(stages):
        for m in range(microbatches):
            keys.add((s, "fwd", m))
            if backwards == "split" or (backwards == "mixed" and rnd.random() < 0.5):
                keys.update({(s, "bwd_i", m), (s, "bwd_w", m)})
            else:
                keys.add((s, "bwd", m))
    rows = _topological_rows(rnd, keys, stages, placement, ranks)
    _fuse_some(rnd, rows, fuse_probability)
    mutation = draw(st.sampled_from(mutations))
    schedule = RandomSchedule(rows, stages, microbatches, placement, mutation)
    if mutation != "none":
        _mutate(rnd, schedule, mutation)
    return schedule
