"""Pipeline tasks: the units of work a schedule orders on each rank.

A ``Task`` is one pass of one stage over one microbatch: a forward (``fwd``), a full
backward (``bwd``), or the two halves of a split backward, the input gradient (``bwd_i``,
what the upstream stage waits for) and the weight gradient (``bwd_w``, which nothing
downstream waits for). A ``FusedTask`` is a group of tasks that runs as one executable
on one rank: all its inputs must be ready when it starts, and its outputs are ready when
it ends.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import NamedTuple, TypeAlias

from jaxpp_mlir.dialect import vocabulary
from jaxpp_mlir.errors import ScheduleError
from jaxpp_mlir.runtime import records

FWD = vocabulary.FORWARD
BWD = vocabulary.BACKWARD
BWD_I = vocabulary.BACKWARD_INPUT
BWD_W = vocabulary.BACKWARD_WEIGHT

#: Every task kind, in the order forward, full backward, input gradient, weight gradient.
KINDS: tuple[str, ...] = vocabulary.KINDS

_SHORT = {FWD: "F", BWD: "B", BWD_I: "I", BWD_W: "W"}


def _check_index(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ScheduleError(f"Task {name} must be a non-negative int, got {value!r}")


class _TaskFields(NamedTuple):
    stage: int
    kind: str
    microbatch: int


class Task(_TaskFields):
    """One pass (``kind``) of one pipeline ``stage`` over one ``microbatch``.

    ``str(Task(2, "fwd", 0))`` is ``"fwd_2__0"``. An immutable named tuple: schedules
    build, hash and compare thousands of them, which a tuple does in C.
    """

    __slots__ = ()

    def __new__(cls, stage: int, kind: str, microbatch: int) -> Task:
        if not (type(stage) is int and type(microbatch) is int and stage >= 0 and microbatch >= 0):
            _check_index("stage", stage)
            _check_index("microbatch", microbatch)
        if type(kind) is not str or kind not in _SHORT:
            raise ScheduleError(f"Task kind must be one of {KINDS}, got {kind!r}")
        return super().__new__(cls, stage, kind, microbatch)

    def __str__(self) -> str:
        return f"{self.kind}_{self.stage}__{self.microbatch}"

    @property
    def parts(self) -> tuple[Task, ...]:
        """The tasks this item runs: just itself."""
        return (self,)

    @property
    def label(self) -> str:
        """Short grid label: ``F2.0`` (forward of stage 2, microbatch 0), ``B``, ``I``, ``W``."""
        return f"{_SHORT[self.kind]}{self.stage}.{self.microbatch}"


@records.frozen
class FusedTask:
    """Tasks that run, in this order, as one executable on one rank.

    ``str(FusedTask((fwd, bwd)))`` is ``"FusedTask(fwd_3__0, bwd_3__0)"``.
    """

    tasks: tuple[Task, ...]

    def __post_init__(self) -> None:
        try:
            tasks = tuple(self.tasks)
        except TypeError:
            raise ScheduleError(
                f"FusedTask takes a tuple of Task, got {type(self.tasks).__name__}"
            ) from None
        object.__setattr__(self, "tasks", tasks)
        if not tasks:
            raise ScheduleError("FusedTask needs at least one Task")
        for task in tasks:
            if not isinstance(task, Task):
                raise ScheduleError(f"FusedTask parts must be Task, got {task!r}")
        if len(set(tasks)) != len(tasks):
            raise ScheduleError(f"FusedTask holds the same task twice: {self}")

    def __str__(self) -> str:
        return f"FusedTask({', '.join(str(task) for task in self.tasks)})"

    @property
    def parts(self) -> tuple[Task, ...]:
        """The tasks this item runs, in order."""
        return self.tasks

    @property
    def label(self) -> str:
        """Short grid label: the part labels joined by ``+`` (``F3.0+B3.0``)."""
        return "+".join(task.label for task in self.tasks)


#: One entry of a rank's ordered task list.
ScheduleItem: TypeAlias = Task | FusedTask

#: One ordered list of items per rank.
RankTasks: TypeAlias = list[list[ScheduleItem]]


def tasks_from_columns(
    stages: Iterable[int], kinds: Iterable[str], microbatches: Iterable[int]
) -> list[Task]:
    """``Task``s of already checked columns (non-negative ints, kinds from ``KINDS``).

    For schedule builders that make hundreds of thousands of tasks: it skips the
    argument checks of ``Task(...)``, which would cost most of the build.
    """
    return list(
        map(functools.partial(tuple.__new__, Task), zip(stages, kinds, microbatches, strict=True))
    )


def fuse(*tasks: Task) -> FusedTask:
    """``FusedTask`` of the given tasks, in the given order."""
    return FusedTask(tuple(tasks))
