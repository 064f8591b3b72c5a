"""The dialect's attribute table is closed: every jaxpp.* attribute name of the vocabulary
has a kind, and every attribute the passes write is of its kind."""

import pytest
import toolkit

import jaxpp_mlir as pp
from jaxpp_mlir import ir_context
from jaxpp_mlir.dialect import attributes, vocabulary
from jaxpp_mlir.passes.base import UNCHANGED
from jaxpp_mlir.passes.check_attributes import CheckAttributes

# A name of the vocabulary that is no op attribute of its own: an entry of a saved
# custom-call marker's frontend attributes.
_NOT_OP_ATTRIBUTES = {vocabulary.DIRECTION_ATTR}


def _vocabulary_attribute_names() -> set[str]:
    return {
        value
        for name, value in vars(vocabulary).items()
        if name.endswith("_ATTR") and isinstance(value, str) and value.startswith("jaxpp.")
    }


def test_every_attribute_of_the_vocabulary_has_a_kind():
    names = _vocabulary_attribute_names()
    assert names - _NOT_OP_ATTRIBUTES == set(attributes.ATTRIBUTES)
    assert vocabulary.DIRECTION_ATTR in attributes.FRONTEND_ATTRIBUTES


@pytest.mark.parametrize(
    "schedule", [pp.Std1F1B(2), pp.ZeroBubble(2), pp.AutoFused(pp.Std1F1B(2))], ids=repr
)
def test_what_the_passes_write_is_of_its_kind(schedule):
    """The whole partitioned module (stages, tasks, transfers, loop, estimates) passes
    the check that refuses user input."""
    params, batch = toolkit.mlp_params(2), toolkit.mlp_batch(2, 4)
    lowered = toolkit.lower_cached(toolkit.mlp_train_step, params, batch)
    program = pp.partition(lowered, mesh=toolkit.make_mesh(2), schedule=schedule)
    module = ir_context.parse_module(program.ir())
    with module.context, module.operation.location:
        assert CheckAttributes().run(module.operation) is UNCHANGED  # and no error
