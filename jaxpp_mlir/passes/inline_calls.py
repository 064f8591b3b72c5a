"""jaxpp-inline-calls: inline every ``func.call`` reachable from ``@main``."""

from __future__ import annotations

import dataclasses

from jax.interpreters.mlir import ir

from jaxpp_mlir import diagnostics
from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.ir.utils import find_main
from jaxpp_mlir.passes.base import Evidence, ModulePass, register_pass
from jaxpp_mlir.runtime import records


@register_pass
@records.frozen
class InlineCalls(ModulePass):
    """Inline every func.call reachable from @main so that stage markers are visible.

    JAX lowers nested ``jax.jit`` calls, ``jax.checkpoint`` and loop bodies to
    private functions called with ``func.call``; stage markers inside them are
    invisible to a pass that looks at ``@main`` alone (and jaxlib's textual
    ``inline`` pass does not inline ``func.call``).

    Precondition: the module has a public ``func.func @main``; calls are not
    recursive.
    Postcondition: no ``func.call`` remains in ``@main`` (nested regions
    included); private functions that are no longer called are erased (public
    ones are kept); the module carries the unit attribute ``jaxpp.calls_inlined``,
    so that a second run stops with a located error.
    """

    name = "jaxpp-inline-calls"
    max_depth: int = dataclasses.field(
        default=64, metadata={"help": "maximum nesting of inlined calls (at least 1)", "min": 1}
    )

    @classmethod
    def finished(cls, module: ir.Operation) -> Evidence | None:
        if jaxpp.CALLS_INLINED_ATTR not in module.attributes:
            return None
        return Evidence(module, f"the calls are already inlined (found {jaxpp.CALLS_INLINED_ATTR})")

    @classmethod
    def unfinished(cls, module: ir.Operation) -> Evidence | None:
        main = find_main(module)
        calls = ir_utils.collect_ops(main, "func.call") if main is not None else []
        if not calls:
            return None
        callee = ir.FlatSymbolRefAttr(calls[0].attributes["callee"]).value
        return Evidence(calls[0], f"@main still calls @{callee}")

    def run(self, module: ir.Operation) -> None:
        main = ir_utils.get_main(module)
        symbols = ir.SymbolTable(module)
        inlined: set[str] = set()
        # One nesting level per round: the calls of @main, then those the inlined bodies
        # brought in (found in the moved ops, in program order, without walking @main again).
        calls = ir_utils.collect_ops(main, "func.call")
        for _ in range(self.max_depth):
            if not calls:
                break
            brought_in: list[ir.Operation] = []
            for call in calls:
                callee_name = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
                callee = symbols[callee_name]
                if not callee.regions[0].blocks:
                    raise diagnostics.error(
                        call, f"cannot inline call to '{callee_name}': it has no body"
                    )
                brought_in.extend(_inline_call(call, callee.operation))
                inlined.add(callee_name)
            calls = brought_in
        else:
            if calls:
                callee_name = ir.FlatSymbolRefAttr(calls[0].attributes["callee"]).value
                raise diagnostics.error(
                    calls[0],
                    f"this call of '{callee_name}' is nested deeper than "
                    f"max-depth={self.max_depth} calls (recursive functions cannot be "
                    "partitioned)",
                )
        remaining = set(inlined)
        while remaining:
            still_called = {
                ir.FlatSymbolRefAttr(op.attributes["callee"]).value
                for op in ir_utils.collect_ops(module, "func.call")
            }
            dead = {name for name in remaining - still_called if _is_private(symbols[name])}
            if not dead:
                break
            for name in sorted(dead):
                symbols[name].operation.erase()
            remaining -= dead
        module.attributes[jaxpp.CALLS_INLINED_ATTR] = ir.UnitAttr.get()


def _is_private(function: ir.OpView) -> bool:
    attrs = function.operation.attributes
    return "sym_visibility" in attrs and ir.StringAttr(attrs["sym_visibility"]).value == "private"


def _inline_call(call: ir.Operation, callee: ir.Operation) -> list[ir.Operation]:
    """Replaces ``call`` by a copy of ``callee``'s body; returns the calls in that copy."""
    copy = callee.clone(ip=ir.InsertionPoint(callee))
    block = copy.regions[0].blocks[0]
    for argument, operand in zip(block.arguments, call.operands, strict=True):
        argument.replace_all_uses_with(operand)
    ops = list(block.operations)
    terminator = ops[-1]
    nested_calls: list[ir.Operation] = []
    for op in ops[:-1]:
        op = op.operation
        op.move_before(call)
        if op.name == "func.call":
            nested_calls.append(op)
        elif len(op.regions):
            nested_calls.extend(ir_utils.collect_ops(op, "func.call"))
    for result, returned in zip(call.results, terminator.operands, strict=True):
        result.replace_all_uses_with(returned)
    call.erase()
    copy.erase()
    return nested_calls
