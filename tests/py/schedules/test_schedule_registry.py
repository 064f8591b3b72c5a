"""One list of built-in schedules (``schedules/built_in.py``): every schedule class is
in it or says why not, the package exports exactly those, and each rebuilds from text."""

import importlib
import pkgutil

import pytest

import jaxpp_mlir as pp
from jaxpp_mlir import schedules
from jaxpp_mlir.schedules.base import Schedule
from jaxpp_mlir.schedules.built_in import BUILT_IN, takes_mpmd_dim
from jaxpp_mlir.schedules.parse import schedule_from_text

NOT_FROM_TEXT = {"CustomSchedule", "AutoFused"}  # task lists as data; a wrapper of another


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


def test_every_schedule_class_is_built_in_or_named_as_not_from_text():
    assert set(_schedule_classes()) == set(BUILT_IN) | NOT_FROM_TEXT
    assert set(BUILT_IN).isdisjoint(NOT_FROM_TEXT)


def test_the_packages_export_the_schedule_classes():
    exported = {
        name for name in schedules.__all__ if isinstance(getattr(schedules, name), type)
    } & set(_schedule_classes())
    assert exported == set(BUILT_IN) | NOT_FROM_TEXT
    for name in exported:
        assert getattr(pp, name) is getattr(schedules, name)


def _example(cls: type[Schedule]) -> Schedule:
    return cls(4, 2) if takes_mpmd_dim(cls) else cls(4)


@pytest.mark.parametrize("name", sorted(BUILT_IN))
def test_a_built_in_schedule_rebuilds_from_its_repr_and_its_name(name):
    example = _example(BUILT_IN[name])
    for text in (repr(example), name):
        rebuilt = schedule_from_text(text, num_stages=4, mpmd_dim=example.mpmd_dim)
        assert type(rebuilt) is BUILT_IN[name]
        assert repr(rebuilt) == repr(example)
