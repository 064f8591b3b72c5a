"""One list of built-in schedules (``schedules/built_in.py``): every schedule class is
in it or says why not, the package exports exactly those, each rebuilds from its record
and its name, and the planner's candidates are made of it."""

import importlib
import pkgutil

import pytest

import jaxpp_mlir as pp
from jaxpp_mlir import schedules
from jaxpp_mlir.planner.plan_pipeline import schedule_kinds
from jaxpp_mlir.schedules.base import Schedule
from jaxpp_mlir.schedules.built_in import BUILT_IN, takes_mpmd_dim
from jaxpp_mlir.schedules.record import name_record, schedule_from_record, schedule_record

NOT_BY_NAME = {"CustomSchedule", "AutoFused"}  # task lists as data; a wrapper of another


def _schedule_classes() -> dict[str, type[Schedule]]:
    for info in pkgutil.iter_modules(schedules.__path__, f"{schedules.__name__}."):
        importlib.import_module(info.name)
    found, todo = {}, list(Schedule.__subclasses__())
    while todo:
        cls = todo.pop()
        if cls.__module__.startswith(schedules.__name__):
            found[cls.__name__] = cls
        todo += cls.__subclasses__()
    return found


def test_every_schedule_class_is_built_in_or_named_as_not_by_name():
    assert set(_schedule_classes()) == set(BUILT_IN) | NOT_BY_NAME
    assert set(BUILT_IN).isdisjoint(NOT_BY_NAME)


def test_the_packages_export_the_schedule_classes():
    exported = {
        name for name in schedules.__all__ if isinstance(getattr(schedules, name), type)
    } & set(_schedule_classes())
    assert exported == set(BUILT_IN) | NOT_BY_NAME
    for name in exported:
        assert getattr(pp, name) is getattr(schedules, name)


def _example(cls: type[Schedule]) -> Schedule:
    return cls(4, 2) if takes_mpmd_dim(cls) else cls(4)


@pytest.mark.parametrize("name", sorted(BUILT_IN))
def test_a_built_in_schedule_rebuilds_from_its_record_and_its_name(name):
    example = _example(BUILT_IN[name])
    for record in (schedule_record(example), name_record(name)):
        rebuilt = schedule_from_record(record, num_stages=4, mpmd_dim=example.mpmd_dim)
        assert type(rebuilt) is BUILT_IN[name]
        assert repr(rebuilt) == repr(example)


def test_the_planner_candidates_are_the_built_in_schedules():
    found = {type(schedule).__name__ for schedule in schedule_kinds(8, 2)}
    assert found == set(BUILT_IN)  # 8 segments on 2 ranks fit every built-in layout
    assert {type(s).__name__ for s in schedule_kinds(2, 2)} == {
        name for name, cls in BUILT_IN.items() if not takes_mpmd_dim(cls)
    }
