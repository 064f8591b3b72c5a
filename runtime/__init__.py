"""The jaxpp_mlir runtime (installed as ``jaxpp_mlir.runtime``): executes an ``ExecutionPlan``.

It depends on jax/jaxlib and on the plan's plain data only, never on the passes.
Names load on first use (PEP 562), so ``jaxpp_mlir.runtime.plan`` can be read
without loading the executor or XLA.

Subpackages by concern: ``compilation`` (stage programs to executables, caches),
``execution`` (one process's dispatch loop), ``multiprocess`` (ranks in several
processes), ``failure`` (watchdog, exit hooks), ``observation`` (traces, memory).
The modules that moved into them stay reachable under their old names
(``from jaxpp_mlir.runtime import executor``).
"""

from __future__ import annotations

import importlib
from typing import Any

from .lazy_exports import lazy_getattr

_SOURCES = {
    "CompiledPlan": f"{__name__}.execution.executor",
    "compile_plan": f"{__name__}.execution.executor",
    "ExecutionPlan": f"{__name__}.plan",
    "InputBinding": f"{__name__}.plan",
    "Instruction": f"{__name__}.plan",
    "OutputBinding": f"{__name__}.plan",
    "Recv": f"{__name__}.plan",
    "RunStage": f"{__name__}.plan",
    "Send": f"{__name__}.plan",
    "StageExecutable": f"{__name__}.plan",
    "TensorSpec": f"{__name__}.plan",
}

# Modules by the names they had at this package's top level, before the subpackages.
MOVED_MODULES = {
    "compile": "compilation.compile",
    "executable_cache": "compilation.executable_cache",
    "executable_memo": "compilation.executable_memo",
    "progress": "compilation.progress",
    "executor": "execution.executor",
    "dispatch": "execution.dispatch",
    "slots": "execution.slots",
    "placement": "execution.arguments",
    "replicated": "execution.replicated",
    "distributed": "multiprocess.distributed",
    "distributed_setup": "multiprocess.distributed_setup",
    "collectives": "multiprocess.collectives",
    "coordination": "multiprocess.coordination",
    "ordering": "multiprocess.ordering",
    "local_plan": "multiprocess.local_plan",
    "remote_output": "multiprocess.remote_output",
    "watchdog": "failure.watchdog",
    "watchdog_options": "failure.watchdog_options",
    "exit_hooks": "failure.exit_hooks",
    "stderr": "failure.stderr",
    "trace": "observation.trace",
    "trace_ops": "observation.trace_ops",
    "memory": "observation.memory",
}

__all__ = sorted(_SOURCES)

_names = lazy_getattr(__name__, _SOURCES, globals())


def __getattr__(name: str) -> Any:
    moved = MOVED_MODULES.get(name)
    if moved is not None:
        return importlib.import_module(f"{__name__}.{moved}")
    return _names(name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | set(MOVED_MODULES))
