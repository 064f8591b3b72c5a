"""Schedules as files in PyTorch pipelining's CSV action format.

``torch.distributed.pipelining`` writes a schedule's ``pipeline_order`` (its
``_dump_csv``) as one CSV row per rank, one cell per time step, each cell an
action ``<stage><type><microbatch>``: ``0F0`` (forward of stage 0, microbatch 0),
``1B0`` (full backward), ``0I1`` (input gradient), ``0W1`` (weight gradient); an
empty cell is an idle step. Its reader (``_load_csv``) reads the rows back in
rank order. Stage numbers are global; which rank runs a stage is the row it
appears in.

``schedule_to_csv`` writes a schedule the same way, with empty cells where the
rank idles in the unit-cost simulation (as PyTorch's own orders have).
A ``FusedTask`` has no plain PyTorch action; it is written as PyTorch's composite
overlap action ``(0F1;1B0)OVERLAP_F_B`` and read back as a ``FusedTask``.
``schedule_from_csv`` reads such a file into a ``CustomSchedule`` and validates it
(every task once, on its rank, no deadlock) with ``CustomSchedule``'s own errors.
Communication actions (``SEND_F``, ``RECV_B``, ...) and ``UNSHARD``/``RESHARD``,
which PyTorch's lowered ``compute_comms`` format adds, are skipped: jaxpp_mlir
inserts its own transfers.
"""

from __future__ import annotations

import csv
import io
import os
import re
from collections.abc import Callable, Sequence

from jaxpp_mlir.errors import ScheduleError
from jaxpp_mlir.schedules.base import Schedule
from jaxpp_mlir.schedules.custom import CustomSchedule
from jaxpp_mlir.schedules.simulate import UNIT_COSTS
from jaxpp_mlir.schedules.task import BWD, BWD_I, BWD_W, FWD, FusedTask, ScheduleItem, Task

_TO_LETTER = {FWD: "F", BWD: "B", BWD_I: "I", BWD_W: "W"}
_FROM_LETTER = {letter: kind for kind, letter in _TO_LETTER.items()}
_COMPUTE = re.compile(r"(\d+)(F|I|B|W)(\d+)")
_SKIPPED = re.compile(r"(\d+)(SEND_F|RECV_F|SEND_B|RECV_B|UNSHARD|RESHARD|REDUCE_GRAD)(\d*)")
_OVERLAP = re.compile(r"\((.*)\)OVERLAP_F_B")
MAX_FILE_BYTES = 64 << 20  # a schedule of 100000 microbatches on 64 ranks is ~30 MiB


def action_text(item: ScheduleItem) -> str:
    """``0F1`` for a task; ``(0F1;1B0)OVERLAP_F_B`` for a fused task."""
    if isinstance(item, FusedTask):
        return "(" + ";".join(action_text(task) for task in item.tasks) + ")OVERLAP_F_B"
    return f"{item.stage}{_TO_LETTER[item.kind]}{item.microbatch}"


def schedule_rows(schedule: Schedule, num_microbatches: int) -> list[list[str]]:
    """Per rank, one cell per unit time step: the action starting then, or ``""``."""
    simulation = schedule.simulate(num_microbatches, costs=UNIT_COSTS)
    rows = []
    for timeline in simulation.timeline:
        row: list[str] = []
        for start, end, item in timeline:
            step = round(start)
            row += [""] * (step - len(row))
            row.append(action_text(item))
            row += [""] * (round(end) - step - 1)  # a fused task spans several steps
        rows.append(row)
    width = max((len(row) for row in rows), default=0)
    return [row + [""] * (width - len(row)) for row in rows]


def schedule_to_csv(
    schedule: Schedule, num_microbatches: int, path: str | os.PathLike | None = None
) -> str:
    """The schedule's per-rank actions as CSV text; also written to ``path`` if given."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(schedule_rows(schedule, num_microbatches))
    text = buffer.getvalue()
    if path is not None:
        with open(path, "w", newline="") as handle:
            handle.write(text)
    return text


def parse_action(cell: str, where: str) -> ScheduleItem | None:
    """The item a cell names; ``None`` for an empty or communication cell."""
    text = cell.strip()
    if not text or _SKIPPED.fullmatch(text):
        return None
    if match := _OVERLAP.fullmatch(text):
        parts = [part.strip() for part in match.group(1).split(";")]
        tasks = [_task(part, where, text) for part in parts]
        return FusedTask(tuple(tasks))
    return _task(text, where, text)


def _task(text: str, where: str, cell: str) -> Task:
    match = _COMPUTE.fullmatch(text)
    if match is None:
        raise ScheduleError(
            f"{where}: {cell!r} is not a pipeline action: expected "
            "[stage][F|B|I|W][microbatch] such as '0F0', '1B0', '0I1', '0W1'"
        )
    stage, letter, microbatch = match.groups()
    return Task(int(stage), _FROM_LETTER[letter], int(microbatch))


def schedule_from_csv(
    source: str | os.PathLike,
    *,
    num_stages: int | None = None,
    stage_rank: Sequence[int] | Callable[[int], int] | None = None,
    text: bool = False,
) -> CustomSchedule:
    """A validated ``CustomSchedule`` from a PyTorch-format CSV file (``text=True``: CSV text).

    Row r is rank r's order. ``num_stages`` defaults to one more than the largest
    stage used; ``stage_rank`` defaults to the row each stage appears in. Raises
    ``ScheduleError`` naming the row and column of a malformed cell, or (from
    ``CustomSchedule.validate``) listing missing, duplicated, misplaced or
    deadlocking tasks.
    """
    name = "schedule text" if text else f"schedule file {os.fspath(source)!r}"
    content = str(source) if text else _read(source, name)
    rows: list[list[ScheduleItem]] = []
    highest: tuple[int, str] = (-1, "")  # the largest stage index, and where it is
    for rank, cells in enumerate(csv.reader(io.StringIO(content))):
        row = []
        for column, cell in enumerate(cells):
            where = f"{name}, row {rank + 1} (rank {rank}), column {column + 1}"
            item = parse_action(cell, where)
            if item is not None:
                row.append(item)
                highest = max(highest, (max(task.stage for task in item.parts), where))
        rows.append(row)
    while rows and not rows[-1]:
        rows.pop()  # trailing blank lines
    if not rows:
        raise ScheduleError(f"{name} holds no actions")
    stages = {task.stage for row in rows for item in row for task in item.parts}
    total = num_stages if num_stages is not None else len(stages)
    _check_stage_count(total, stages, highest, num_stages is not None, name)
    placement = stage_rank if stage_rank is not None else _placement(rows, total, name)
    try:
        schedule = CustomSchedule(rows, total, stage_rank=placement)
        schedule.validate(schedule.num_microbatches)
    except ScheduleError as e:
        raise ScheduleError(f"{name}: {e}") from None
    return schedule


def _read(source: str | os.PathLike, name: str) -> str:
    """The file's text; raises ``ScheduleError`` naming the file (and the line of a byte
    that is not UTF-8)."""
    try:
        if os.path.getsize(source) > MAX_FILE_BYTES:
            raise ScheduleError(
                f"{name} is {os.path.getsize(source)} bytes, more than a schedule file may be "
                f"({MAX_FILE_BYTES} bytes)"
            )
        with open(source, "rb") as handle:
            data = handle.read()
    except OSError as e:
        raise ScheduleError(f"cannot read {name}: {e}") from e
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise ScheduleError(
            f"{name}, line {line}: byte {data[e.start]:#04x} is not UTF-8 text ({e.reason}); "
            f"a schedule file is CSV text"
        ) from None


def _check_stage_count(
    total: int, stages: set[int], highest: tuple[int, str], declared: bool, name: str
) -> None:
    """Before any work sized by it: every stage index below the count, and every stage of
    the count used by some action (a stage without actions cannot be scheduled)."""
    stage, where = highest
    if declared and len(stages) < total:
        raise ScheduleError(
            f"{name}: num_stages={total}, but its actions use only {len(stages)} stages "
            f"(every stage needs its tasks)"
        )
    if stage >= total:
        counted = f"num_stages={total}" if declared else f"the {total} stages its actions use"
        raise ScheduleError(
            f"{where}: stage {stage} is out of range: stages are numbered 0 to {total - 1} "
            f"({counted})"
        )


def _placement(rows: list[list[ScheduleItem]], num_stages: int, name: str) -> list[int]:
    """Each stage's rank: the row it appears in (one row only), or ``s % ranks`` if absent."""
    found: dict[int, int] = {}
    for rank, row in enumerate(rows):
        for item in row:
            for task in item.parts:
                other = found.setdefault(task.stage, rank)
                if other != rank:
                    raise ScheduleError(
                        f"{name}: stage {task.stage} appears on rank {other} and on rank "
                        f"{rank}; a stage runs on one rank (pass stage_rank= to say which)"
                    )
    return [found.get(stage, stage % len(rows)) for stage in range(num_stages)]
