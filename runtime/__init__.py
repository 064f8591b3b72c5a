"""The jaxpp_mlir runtime (installed as ``jaxpp_mlir.runtime``): executes an ``ExecutionPlan``.

It depends on jax/jaxlib and on the plan's plain data only, never on the passes.
Names load on first use (PEP 562), so ``jaxpp_mlir.runtime.plan`` can be read
without loading the executor or XLA.

Subpackages by concern: ``instructions`` (one module per instruction kind, and
their registry), ``compilation`` (stage programs to executables, caches),
``execution`` (one process's dispatch loop), ``multiprocess`` (ranks in several
processes), ``failure`` (watchdog, exit hooks), ``observation`` (traces, memory).
Each module has one name: its path in these subpackages.
"""

from .lazy_exports import lazy_getattr as _lazy_getattr

_SOURCES = {
    "CompiledPlan": f"{__name__}.execution.executor",
    "compile_plan": f"{__name__}.execution.executor",
    "ExecutionPlan": f"{__name__}.plan",
    "InputBinding": f"{__name__}.plan",
    "Instruction": f"{__name__}.plan",
    "OutputBinding": f"{__name__}.plan",
    "Piece": f"{__name__}.plan",
    "Recv": f"{__name__}.instructions.receive",
    "RunStage": f"{__name__}.instructions.run",
    "Send": f"{__name__}.instructions.send",
    "StackedArray": f"{__name__}.stacked_array",
    "StageExecutable": f"{__name__}.plan",
    "TaskRef": f"{__name__}.plan",
    "TensorSpec": f"{__name__}.plan",
}

__all__ = sorted(_SOURCES)

__getattr__ = _lazy_getattr(__name__, _SOURCES, globals())


def __dir__() -> list[str]:
    """The public API only (``__all__``), loaded or not."""
    return list(__all__)
