"""Schedules as records: the plain data a module carries, and the one decoder back.

A record is a ``dict`` of ints, floats, bools, strs, tuples and dicts (no objects), which
``dialect.ops`` writes as a dictionary attribute (``jaxpp.schedule``: on treduce's loop
marker the schedule it was given, on the module the one ``jaxpp-choose-stages`` chose):

- a built-in schedule (``built_in.BUILT_IN``): ``{"kind": <class name>, <its constructor's
  keyword arguments>}``, e.g. ``{"kind": "Interleaved1F1B", "num_stages": 8,
  "mpmd_dim": 4, "fuse_steady_state": False}``;
- a bare name, ``{"kind": "GPipe"}``: completed with the program's stage count (and rank
  count, for schedules with several stages per rank) when decoded;
- ``AutoFused``: ``{"kind": "AutoFused", "schedule": <the wrapped schedule's record>}``
  plus ``max_parts``, ``transfer_cost``, ``launch_cost`` and ``costs`` (task kind to
  cost) where they are not the defaults;
- ``CustomSchedule``: ``{"kind": "CustomSchedule", "num_stages": n, "stage_rank": (rank
  of each stage), "tasks": (one tuple of items per rank)}``, an item being a tuple of
  ``(stage, kind, microbatch)`` tasks (one task: a ``Task``; several: a ``FusedTask``).

A schedule a record cannot hold (a ``Schedule`` subclass of one's own that changes the
task order, ``AutoFused`` with a cost function) is recorded, where the microbatch count is
known, as the ``CustomSchedule`` of the task lists it gives for that count
(``recordable``): ``partition`` and ``treduce`` run it as given.

Modules lowered before schedules became records carry the schedule's ``repr`` as text:
``schedule_from_record`` reads a bare built-in name there, and refuses anything else
with a request to lower the step again.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from jaxpp_mlir.errors import ScheduleError
from jaxpp_mlir.schedules.autofuse import DEFAULT_LAUNCH_COST, AutoFused
from jaxpp_mlir.schedules.base import Schedule
from jaxpp_mlir.schedules.built_in import BUILT_IN, takes_mpmd_dim
from jaxpp_mlir.schedules.custom import CustomSchedule
from jaxpp_mlir.schedules.task import FusedTask, ScheduleItem, Task

#: A schedule as plain data (see the module docstring).
Record = dict[str, Any]

#: The schedule name that asks the planner for the schedule and split (``partition``).
AUTO = "auto"

KIND = "kind"
_AUTO_FUSED_DEFAULTS = {"transfer_cost": 0.0, "launch_cost": DEFAULT_LAUNCH_COST}


def schedule_record(schedule: Schedule) -> Record:
    """``schedule`` as a record; a ``ScheduleError`` for what a record cannot hold (a
    schedule class of one's own, ``AutoFused`` with a cost function)."""
    cls = type(schedule)
    built_in = _built_in_of(cls)
    if built_in is not None:
        return {KIND: built_in.__name__, **schedule._repr_fields()}
    if cls is AutoFused:
        return _auto_fused_record(schedule)
    if cls is CustomSchedule:
        tasks = schedule.tasks(schedule.num_microbatches)
        return {
            KIND: "CustomSchedule",
            "num_stages": schedule.num_stages,
            "stage_rank": tuple(schedule.stage_rank(s) for s in range(schedule.num_stages)),
            "tasks": tuple(tuple(_item_record(item) for item in row) for row in tasks),
        }
    raise ScheduleError(
        f"the schedule {schedule!r} ({cls.__name__}) cannot be recorded in the module: give "
        f"a built-in schedule ({', '.join(BUILT_IN)}), AutoFused of one, or a "
        "CustomSchedule of its task lists"
    )


#: What makes a schedule's tasks and placement: a subclass of a built-in schedule that
#: keeps all of them (a constructor with more checks, as ``compat.schedules``) is that one.
_BEHAVIOUR = ("tasks", "_build", "_place", "stage_rank", "_warmup", "_repr_fields")


def _built_in_of(cls: type[Schedule]) -> type[Schedule] | None:
    """The built-in schedule ``cls`` is, or behaves as (see ``_BEHAVIOUR``)."""
    for base in cls.__mro__:
        if BUILT_IN.get(base.__name__) is base:
            same = all(getattr(cls, name, None) is getattr(base, name, None) for name in _BEHAVIOUR)
            return base if same else None
    return None


def name_record(name: str, *, auto: bool = False) -> Record:
    """The record of a bare built-in schedule name (``"GPipe"``); a ``ScheduleError``
    for any other text, suggesting the names it resembles (``"1f1b"``: ``Std1F1B``).
    ``auto``: the caller takes ``"auto"`` too (``partition``), and says so."""
    if name in BUILT_IN:
        return {KIND: name}
    names = [AUTO, *BUILT_IN] if auto else list(BUILT_IN)
    lowered = {known.lower(): known for known in names}
    close = difflib.get_close_matches(name.lower(), lowered, n=2, cutoff=0.6)
    hint = f"; did you mean {' or '.join(repr(lowered[c]) for c in close)}?" if close else ""
    takes = f"{AUTO!r} (the planner's choice) or " if auto else ""
    raise ScheduleError(
        f"{name!r} is not a built-in schedule name (known: {', '.join(BUILT_IN)}): give a "
        f"schedule object, {takes}one of those names, spelled as its class{hint}"
    )


def recordable(schedule: Schedule, num_microbatches: int | None) -> Record:
    """``schedule``'s record; a schedule a record cannot hold (a ``Schedule`` subclass of
    one's own, ``AutoFused`` with a cost function) as the ``CustomSchedule`` of its task
    lists for ``num_microbatches`` (None: unknown, the ``ScheduleError`` stands)."""
    try:
        return schedule_record(schedule)
    except ScheduleError:
        if num_microbatches is None:
            raise
    tasks = schedule.tasks(num_microbatches)
    stage_rank = tuple(schedule.stage_rank(stage) for stage in range(schedule.num_stages))
    return schedule_record(CustomSchedule(tasks, schedule.num_stages, stage_rank=stage_rank))


def schedule_from_record(
    record: Record | str, *, num_stages: int | None = None, mpmd_dim: int | None = None
) -> Schedule:
    """The schedule ``record`` describes; a bare name takes ``num_stages`` (and
    ``mpmd_dim``, for several stages per rank). Text is the form of older modules."""
    if isinstance(record, str):
        record = _old_text_record(record)
    if not isinstance(record, Mapping) or not isinstance(record.get(KIND), str):
        raise ScheduleError(f"a schedule record needs a '{KIND}' name, got {record!r}")
    kind = record[KIND]
    fields = {key: value for key, value in record.items() if key != KIND}
    try:
        if kind == "AutoFused":
            return _auto_fused(fields, num_stages, mpmd_dim)
        if kind == "CustomSchedule":
            return _custom(fields)
        if kind not in BUILT_IN:
            raise ScheduleError(
                f"the schedule record names the unknown schedule {kind!r} (known: "
                f"{', '.join([*BUILT_IN, 'AutoFused', 'CustomSchedule'])})"
            )
        cls = BUILT_IN[kind]
        if fields:
            return cls(**fields)
        if num_stages is None:
            raise ScheduleError(
                f"the schedule name {kind!r} needs the program's stage count to be built"
            )
        return cls(num_stages, mpmd_dim or num_stages) if takes_mpmd_dim(cls) else cls(num_stages)
    except TypeError as error:
        raise ScheduleError(f"the schedule record {dict(record)!r} does not fit: {error}") from None


def is_bare_name(record: Record | str) -> bool:
    """Whether ``record`` names a schedule without its parameters (completed when decoded)."""
    if isinstance(record, str):
        return record in BUILT_IN
    return set(record) == {KIND}


def _old_text_record(text: str) -> Record:
    if text.strip() in BUILT_IN:
        return {KIND: text.strip()}
    raise ScheduleError(
        f"the treduce loop carries its schedule as the text {text!r}, the form of modules "
        "lowered by an older jaxpp_mlir: lower the step again (jax.jit(step).lower(...)) "
        "with this version"
    )


def _item_record(item: ScheduleItem) -> tuple[tuple[int, str, int], ...]:
    return tuple((task.stage, task.kind, task.microbatch) for task in item.parts)


def _item(parts: Any) -> ScheduleItem:
    tasks = tuple(Task(*part) for part in parts)
    return tasks[0] if len(tasks) == 1 else FusedTask(tasks)


def _custom(fields: dict[str, Any]) -> CustomSchedule:
    rows = [[_item(parts) for parts in row] for row in fields["tasks"]]
    return CustomSchedule(rows, fields["num_stages"], stage_rank=tuple(fields["stage_rank"]))


def _auto_fused_record(schedule: AutoFused) -> Record:
    costs = schedule.costs
    if costs is not None and not isinstance(costs, Mapping):
        raise ScheduleError(
            f"{schedule!r} decides its fusion with a cost function, which cannot be "
            "recorded in the module: give its costs as a mapping of task kind to cost"
        )
    record: Record = {KIND: "AutoFused", "schedule": schedule_record(schedule.schedule)}
    if schedule.max_parts is not None:
        record["max_parts"] = schedule.max_parts
    for name, default in _AUTO_FUSED_DEFAULTS.items():
        if getattr(schedule, name) != default:
            record[name] = float(getattr(schedule, name))
    if costs is not None:
        record["costs"] = {kind: float(cost) for kind, cost in costs.items()}
    return record


def _auto_fused(fields: dict[str, Any], num_stages: int | None, mpmd_dim: int | None) -> AutoFused:
    if "schedule" not in fields:
        raise ScheduleError("an AutoFused record needs the 'schedule' it wraps")
    inner = schedule_from_record(fields.pop("schedule"), num_stages=num_stages, mpmd_dim=mpmd_dim)
    if "costs" in fields:
        fields["costs"] = dict(fields["costs"])
    return AutoFused(inner, **fields)
