"""compile() checks every executable against its plan specs; executables of one module
text (a program rebound to other ranks) read the compiled signature once between them."""

import types

import jax
import pytest
from jaxpp_mlir.runtime import _jax_compat as jc
from jaxpp_mlir.runtime.compilation import compile as runtime_compile
from jaxpp_mlir.runtime.plan import StageExecutable, TensorSpec

from jaxpp_mlir.errors import RuntimeFailure

PROGRAM = """
func.func public @main(%x: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  %c = stablehlo.constant dense<2.0> : tensor<2xf32>
  %y = stablehlo.multiply %x, %c : tensor<2xf32>
  return %y, %y : tensor<2xf32>, tensor<2xf32>
}
"""
SPEC = TensorSpec((2,), "float32")


def _plan(outputs_of_rank1: tuple[TensorSpec, ...]):
    stages = {
        "stage0_fwd": StageExecutable("stage0_fwd", 0, PROGRAM, (SPEC,), (SPEC, SPEC)),
        "stage1_fwd": StageExecutable("stage1_fwd", 1, PROGRAM, (SPEC,), outputs_of_rank1),
    }
    return types.SimpleNamespace(executables=stages)


def _compile(plan, monkeypatch) -> list[object]:
    read = []
    real = jc.program_shape
    monkeypatch.setattr(jc, "program_shape", lambda exe: read.append(exe) or real(exe))
    devices = [[d] for d in jax.devices()[:2]]
    runtime_compile.compile_plan_executables(plan, devices, list(plan.executables))
    return read


def test_executables_of_one_text_read_its_signature_once(monkeypatch):
    assert len(_compile(_plan((SPEC, SPEC)), monkeypatch)) == 1


@pytest.mark.parametrize(
    "outputs, error",
    [
        ((SPEC,), "executable 'stage1_fwd' has 2 outputs but the plan gives 1 output specs"),
        (
            (SPEC, TensorSpec((3,), "float32")),
            "executable 'stage1_fwd' output 1 is float32[2] but the plan says float32[3]",
        ),
        (
            (SPEC, TensorSpec((2,), "int32")),
            "executable 'stage1_fwd' output 1 is float32[2] but the plan says int32[2]",
        ),
    ],
)
def test_each_executable_is_still_checked_against_its_own_specs(monkeypatch, outputs, error):
    with pytest.raises(RuntimeFailure, match=error.replace("[", r"\[").replace("]", r"\]")):
        _compile(_plan(outputs), monkeypatch)
