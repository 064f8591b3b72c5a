"""The jaxpp_mlir runtime (installed as ``jaxpp_mlir.runtime``): executes an ``ExecutionPlan``.

It depends on jax/jaxlib and on the plan's plain data only, never on the passes.
Names load on first use (PEP 562), so ``jaxpp_mlir.runtime.plan`` can be read
without loading the executor or XLA.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

_SOURCES = {
    "CompiledPlan": "executor",
    "compile_plan": "executor",
    "ExecutionPlan": "plan",
    "InputBinding": "plan",
    "Instruction": "plan",
    "OutputBinding": "plan",
    "Recv": "plan",
    "RunStage": "plan",
    "Send": "plan",
    "StageExecutable": "plan",
    "TensorSpec": "plan",
}

__all__ = sorted(_SOURCES)


def __getattr__(name: str) -> Any:
    module = _SOURCES.get(name)
    if module is None:
        if importlib.util.find_spec(f"{__name__}.{name}") is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        return importlib.import_module(f"{__name__}.{name}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
