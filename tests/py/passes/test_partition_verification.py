"""partition()'s verification of the IR: once after its passes by default, after every
pass that changed the module with ``verify_each_pass`` (``JAXPP_MLIR_VERIFY_EACH_PASS``)."""

from __future__ import annotations

import pytest
from broken_passes import BreakIR
from toolkit import lower_cached, make_mesh, mlp_batch, mlp_params, mlp_train_step

import jaxpp_mlir as pp
from jaxpp_mlir import ir_context
from jaxpp_mlir.errors import PartitionError
from jaxpp_mlir.passes import base
from jaxpp_mlir.passes.check_attributes import CheckAttributes
from jaxpp_mlir.passes.pipeline import make_element
from jaxpp_mlir.pipeline_run import PipelineRun

BREAK_PASS = BreakIR.name
MODULE = """\
func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  return %arg0 : tensor<4xf32>
}
"""
VERIFIER_ERROR = "entry block must have 2 arguments to match function signature"


def _error(verify_each: bool) -> str:
    """The error of a pipeline whose first pass leaves invalid IR."""
    module = ir_context.parse_module(MODULE)
    with base.registered(BreakIR), pytest.raises(PartitionError) as caught:
        pipeline = [make_element(BreakIR()), make_element(CheckAttributes())]
        PipelineRun(module, None, verify_each=verify_each).run(pipeline)
    return str(caught.value)


def test_invalid_ir_is_found_after_the_last_pass_and_says_how_to_find_its_pass():
    message = _error(verify_each=False)
    assert VERIFIER_ERROR in message
    assert f"invalid IR after the passes {BREAK_PASS}, jaxpp-check-attributes" in message
    assert "JAXPP_MLIR_VERIFY_EACH_PASS=1" in message


def test_verifying_each_pass_names_the_pass_that_left_invalid_ir():
    message = _error(verify_each=True)
    assert VERIFIER_ERROR in message
    assert f"invalid IR after pass {BREAK_PASS}" in message
    assert "JAXPP_MLIR_VERIFY_EACH_PASS" not in message


def test_verifying_each_pass_partitions_the_same_program():
    params, batch = mlp_params(4), mlp_batch(num_microbatches=4)
    lowered = lower_cached(mlp_train_step, params, batch)
    once = pp.partition(lowered, mesh=make_mesh(4), schedule=pp.Std1F1B(4))
    each = pp.partition(lowered, mesh=make_mesh(4), schedule=pp.Std1F1B(4), verify_each_pass=True)
    assert each.ir() == once.ir()


def test_the_variable_sets_the_field():
    assert not pp.PartitionOptions.from_env({}).verify_each_pass
    found = pp.PartitionOptions.from_env({"JAXPP_MLIR_VERIFY_EACH_PASS": "1"})
    assert found.verify_each_pass
    with pytest.raises(TypeError, match="verify_each_pass must be a bool, got 1"):
        pp.PartitionOptions(verify_each_pass=1)
