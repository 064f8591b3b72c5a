"""Pass options come from the fields' type hints; ``registered`` adds passes for a block."""

from __future__ import annotations

import dataclasses

import pytest

from jaxpp_mlir.passes import base, registry  # noqa: F401  (registers the real passes)
from jaxpp_mlir.passes.base import ModulePass, PassOptionError, registered, registered_passes


@dataclasses.dataclass(frozen=True)
class Typed(ModulePass):
    """Test only: one option of each supported type."""

    name = "jaxpp-test-typed"
    flag: bool = False
    count: int = 0
    scale: float = 1.0
    label: str = ""
    ranks: tuple[int, ...] = ()
    names: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class Unsupported(ModulePass):
    """Test only: an option whose type no pipeline text can spell."""

    name = "jaxpp-test-unsupported"
    table: dict[str, int] = dataclasses.field(default_factory=dict)


def test_options_parse_by_their_type_hints():
    built = Typed.from_options(
        {"flag": "true", "count": "3", "scale": "0.5", "label": "x", "ranks": "2,0", "names": "a,b"}
    )
    assert built == Typed(flag=True, count=3, scale=0.5, label="x", ranks=(2, 0), names=("a", "b"))


@pytest.mark.parametrize(
    ("key", "text", "expected"),
    [
        ("count", "three", "option 'count' expects int, got 'three'"),
        ("flag", "maybe", "option 'flag' expects bool, got 'maybe'"),
        ("ranks", "0,x", r"option 'ranks' expects tuple\[int, \.\.\.\], got '0,x'"),
    ],
)
def test_a_bad_value_names_the_option_and_its_type(key, text, expected):
    with pytest.raises(PassOptionError, match=expected):
        Typed.from_options({key: text})


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"flag": "false"}, "option 'flag' expects bool, got 'false' \\(str\\)"),
        ({"flag": 1}, "option 'flag' expects bool, got 1 \\(int\\)"),
        ({"count": True}, "option 'count' expects int, got True \\(bool\\)"),
        ({"count": 2.0}, "option 'count' expects int, got 2.0 \\(float\\)"),
        ({"scale": "0.5"}, "option 'scale' expects float, got '0.5' \\(str\\)"),
        ({"label": 5}, "option 'label' expects str, got 5 \\(int\\)"),
        ({"ranks": 4}, "option 'ranks' expects tuple\\[int, \\.\\.\\.\\], got 4 \\(int\\)"),
        ({"ranks": (1, "2")}, "option 'ranks' expects tuple\\[int, \\.\\.\\.\\], got \\(1, '2'\\)"),
    ],
)
def test_a_value_of_another_type_built_in_python_is_refused(value, expected):
    with pytest.raises(PassOptionError, match=expected):
        Typed(**value)


def test_ints_are_floats_for_a_float_option():
    assert Typed(scale=2).scale == 2


def test_registered_adds_passes_for_the_block_only():
    before = registered_passes()
    with registered(Typed):
        assert registered_passes()["jaxpp-test-typed"] is Typed
    assert registered_passes() == before


def test_registered_restores_the_registry_when_the_block_fails():
    before = registered_passes()
    with pytest.raises(RuntimeError, match="inside"), registered(Typed):
        raise RuntimeError("inside")
    assert registered_passes() == before


def test_an_option_type_no_text_can_spell_is_refused_at_registration():
    with pytest.raises(TypeError, match="option 'table' has type dict\\[str, int\\]"):
        with registered(Unsupported):
            pass
    assert "jaxpp-test-unsupported" not in registered_passes()


def test_a_name_taken_by_another_pass_is_refused():
    taken = dataclasses.make_dataclass(
        "Impostor", [], bases=(ModulePass,), frozen=True, namespace={"name": "jaxpp-inline-calls"}
    )
    with pytest.raises(ValueError, match="'jaxpp-inline-calls' is registered twice"):
        with registered(taken):
            pass
    assert registered_passes()["jaxpp-inline-calls"] is not taken
