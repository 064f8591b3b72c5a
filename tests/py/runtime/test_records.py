"""``records.frozen`` behaves as ``dataclasses.dataclass(frozen=True)``: each check runs on
a record and on a dataclass declared the same way, and expects the same outcome."""

from __future__ import annotations

import copy
import dataclasses
import math
import pickle

import pytest
from jaxpp_mlir.runtime import records


def _declare(decorate, **field_options):
    @decorate
    class Point:
        x: int
        y: object = dataclasses.field(default=None, **field_options)
        tags: tuple = ()

    return Point


SIDES = {
    "record": records.frozen,
    "dataclass": dataclasses.dataclass(frozen=True),
}


@pytest.fixture(params=sorted(SIDES))
def decorate(request):
    return SIDES[request.param]


def _both(**field_options):
    return {name: _declare(d, **field_options) for name, d in SIDES.items()}


def test_equality_hash_and_repr_match_the_dataclass():
    made = {name: cls(1, "a", (2, 3)) for name, cls in _both().items()}
    record, reference = made["record"], made["dataclass"]
    assert repr(record) == repr(reference)
    assert record == type(record)(1, "a", (2, 3))
    assert record != type(record)(1, "b", (2, 3))
    assert hash(record) == hash(type(record)(1, "a", (2, 3)))
    assert record != reference  # another class, as a dataclass is unequal to another
    assert record.__eq__(reference) is NotImplemented
    assert record.__eq__((1, "a", (2, 3))) is NotImplemented


def test_a_field_left_out_of_comparison_is_left_out_of_equality_and_hash():
    for cls in _both(compare=False).values():
        assert cls(1, "a") == cls(1, "b")
        assert hash(cls(1, "a")) == hash(cls(1, "b"))
        assert cls(1, "a") != cls(2, "a")


def test_hash_false_leaves_a_compared_field_out_of_the_hash_only():
    for cls in _both(hash=False).values():
        assert cls(1, ["unhashable"]) != cls(1, ["other"])
        assert hash(cls(1, ["unhashable"])) == hash(cls(1, ["other"]))


def test_an_unhashable_field_raises_as_the_dataclass_does():
    for cls in _both().values():
        with pytest.raises(TypeError, match="unhashable"):
            hash(cls(1, ["a list"]))


def test_repr_false_hides_the_field_as_the_dataclass_does():
    shown = {name: repr(cls(1, "secret")) for name, cls in _both(repr=False).items()}
    assert shown["record"] == shown["dataclass"]
    assert "secret" not in shown["record"]


def test_a_record_that_contains_itself_prints():
    shown = {}
    for name, cls in _both().items():
        holder: list = []
        point = cls(1, holder)
        holder.append(point)
        shown[name] = repr(point)
    assert shown["record"] == shown["dataclass"]
    assert shown["record"].endswith("Point(x=1, y=[...], tags=())")


def test_the_same_nan_object_compares_equal_as_in_a_tuple(decorate):
    @decorate
    class Value:
        v: float

    nan = math.nan
    assert Value(nan) == Value(nan)
    assert Value(nan) != Value(float("nan"))


def test_no_fields(decorate):
    @decorate
    class Empty:
        pass

    assert Empty() == Empty()
    assert hash(Empty()) == hash(Empty())
    assert repr(Empty()).endswith("Empty()")


def test_assignment_raises_and_the_dataclass_functions_work(decorate):
    cls = _declare(decorate)
    point = cls(1, "a")
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.x = 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        del point.y
    assert dataclasses.is_dataclass(point) and cls.__dataclass_params__.frozen
    assert [f.name for f in dataclasses.fields(point)] == ["x", "y", "tags"]
    assert dataclasses.replace(point, y="b") == cls(1, "b")
    assert dataclasses.asdict(point) == {"x": 1, "y": "a", "tags": ()}
    assert cls.__match_args__ == ("x", "y", "tags")
    assert copy.copy(point) == point and copy.deepcopy(point) == point


def test_methods_the_body_defines_are_kept(decorate):
    @decorate
    class Own:
        x: int

        def __eq__(self, other):
            return isinstance(other, Own) and self.x % 10 == other.x % 10

        def __repr__(self):
            return "own"

    assert Own(1) == Own(11)
    assert repr(Own(1)) == "own"
    # A body with __eq__ and no __hash__: the dataclass hashes the fields, so does a record.
    assert hash(Own(1)) == hash(Own(1)) and Own.__hash__ is not None

    @decorate
    class OwnHash:
        x: int

        def __hash__(self):
            return 7

    assert hash(OwnHash(1)) == 7


def test_a_subclass_compares_its_own_fields_and_not_with_its_parent(decorate):
    parent = _declare(decorate)

    @decorate
    class Child(parent):
        z: int = 0

    assert Child(1, z=2) == Child(1, z=2)
    assert Child(1, z=2) != Child(1, z=3)
    assert Child(1) != parent(1)
    assert repr(Child(1, z=2)).endswith("Child(x=1, y=None, tags=(), z=2)")


def test_slots():
    @records.frozen(slots=True)
    class Slotted:
        x: int
        y: str = "a"

    assert "__slots__" in Slotted.__dict__ and not hasattr(Slotted(1), "__dict__")
    assert Slotted(1) == Slotted(1, "a") and hash(Slotted(1)) == hash(Slotted(1, "a"))
    assert repr(Slotted(1)).endswith("Slotted(x=1, y='a')")
    with pytest.raises(dataclasses.FrozenInstanceError):
        Slotted(1).x = 3


def test_records_are_pickled_and_copied():
    made = ModuleLevelRecord(1, ("a",))
    assert pickle.loads(pickle.dumps(made)) == made
    assert copy.deepcopy(made) == made


@records.frozen
class ModuleLevelRecord:  # pickle finds a class by its module-level name
    x: int
    names: tuple = ()
