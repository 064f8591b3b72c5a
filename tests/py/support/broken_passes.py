"""Test-only passes that break the IR on purpose, to check that the verifier catches it."""

from __future__ import annotations

import dataclasses

from jax.extend.mlir import ir

from jaxpp_mlir.ir.utils import walk
from jaxpp_mlir.passes.base import ModulePass


@dataclasses.dataclass(frozen=True)
class BreakIR(ModulePass):
    """Test only: gives every func.func one more input than its block has arguments."""

    name = "jaxpp-test-break-ir"

    def run(self, module: ir.Operation) -> None:
        for op in walk(module):
            if op.name == "func.func":
                old = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
                new = ir.FunctionType.get([*old.inputs, *old.inputs], list(old.results))
                op.attributes["function_type"] = ir.TypeAttr.get(new)
