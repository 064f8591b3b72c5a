"""Pass order is declared on the pass that needs it, and pass objects are frozen."""

import dataclasses

import pytest

from jaxpp_mlir.passes import registry  # noqa: F401  (registers every pass)
from jaxpp_mlir.passes.base import ModulePass, registered_passes
from jaxpp_mlir.passes.pipeline import parse_pipeline

PASSES = registered_passes()


@pytest.mark.parametrize("name", sorted(PASSES))
def test_declared_order_names_registered_passes(name):
    pass_class = PASSES[name]
    for other in (*pass_class.requires, *pass_class.must_precede):
        assert other in PASSES, f"{name} declares an order with unknown pass {other}"
        assert other != name


@pytest.mark.parametrize("name", sorted(PASSES))
def test_required_passes_can_report_unfinished_work(name):
    for required in PASSES[name].requires:
        assert PASSES[required].unfinished is not ModulePass.unfinished, (
            f"{name} requires {required}, which never reports work left"
        )


def test_no_pass_declares_the_old_required_by():
    assert not [name for name, cls in PASSES.items() if hasattr(cls, "required_by")]


@pytest.mark.parametrize("name", sorted(PASSES))
def test_pass_objects_are_frozen(name):
    pass_ = PASSES[name]()
    with pytest.raises(dataclasses.FrozenInstanceError):
        pass_.internal_error = None


def test_default_order_satisfies_every_declaration():
    from jaxpp_mlir.passes.pipelines import default_pipeline_text

    names = [e.name for e in parse_pipeline(default_pipeline_text(mpmd_dim=2))]
    for position, name in enumerate(names):
        cls = PASSES.get(name)
        if cls is None:
            continue
        for required in cls.requires:
            if required in names:
                assert names.index(required) < position, (name, required)
        for later in cls.must_precede:
            if later in names:
                assert names.index(later) > position, (name, later)
