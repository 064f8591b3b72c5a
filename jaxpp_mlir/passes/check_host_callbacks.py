"""jaxpp-check-host-callbacks: refuse host callbacks inside the pipelined step."""

from __future__ import annotations

import re

from jax.interpreters.mlir import ir

from jaxpp_mlir import diagnostics
from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.passes.base import UNCHANGED, ModulePass, Unchanged, register_pass
from jaxpp_mlir.runtime import records

# JAX's host callback targets: xla_ffi[_partitioned]_python_{cpu,gpu}_callback and the
# legacy xla_python_{cpu,gpu}_callback.
_HOST_CALLBACK_TARGET = re.compile(r"^xla(_ffi)?(_partitioned)?_python_\w+_callback$")


@register_pass
@records.frozen
class CheckHostCallbacks(ModulePass):
    """Refuse host callbacks (jax.debug.print, pure_callback, io_callback) in a pipelined step.

    A host callback lowers to a ``stablehlo.custom_call`` whose target names a
    Python function registered in the tracing process, with a maximal sharding
    on device 0. A pipeline stage runs on its own rank's devices (possibly in
    another process), where that callback cannot be called as written, so the
    step is refused with an error at the callback's source line rather than
    partitioned into a stage program that fails later in Shardy or XLA.

    Precondition: no ``func.call`` in ``@main`` (jaxpp-inline-calls).
    Postcondition: the module is unchanged; it holds no host callback, or the
    pass failed. A step with neither stage markers nor a treduce loop is left
    alone (it is not pipelined; with a treduce loop and no marker, a layer scan may
    be split into stages).
    """

    name = "jaxpp-check-host-callbacks"

    def run(self, module: ir.Operation) -> Unchanged:
        main = ir_utils.get_main(module)
        nested = list(ir_utils.walk(main))
        if not any(jaxpp.is_stage_marker(op) or jaxpp.is_loop_marker(op) for op in nested):
            return UNCHANGED
        for op in nested:
            target = _call_target(op)
            if target is not None and _HOST_CALLBACK_TARGET.match(target):
                raise diagnostics.error(
                    op,
                    "a host callback (jax.debug.print, jax.pure_callback or "
                    "jax.experimental.io_callback) inside a pipelined step is not supported: "
                    "the stage that holds it runs on another rank's devices. Move it out of "
                    "the step (print or inspect the step's outputs instead)",
                )
        return UNCHANGED


def _call_target(op: ir.Operation) -> str | None:
    if op.name != jaxpp.CUSTOM_CALL_OP or "call_target_name" not in op.attributes:
        return None
    return ir.StringAttr(op.attributes["call_target_name"]).value
