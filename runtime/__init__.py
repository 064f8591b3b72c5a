"""The jaxpp_mlir runtime (installed as ``jaxpp_mlir.runtime``): executes an ``ExecutionPlan``.

It depends on jax/jaxlib and on the plan's plain data only, never on the passes.
"""

from .executor import CompiledPlan, compile_plan
from .plan import (
    ExecutionPlan,
    InputBinding,
    Instruction,
    OutputBinding,
    Recv,
    RunStage,
    Send,
    StageExecutable,
    TensorSpec,
)

__all__ = [
    "CompiledPlan",
    "ExecutionPlan",
    "InputBinding",
    "Instruction",
    "OutputBinding",
    "Recv",
    "RunStage",
    "Send",
    "StageExecutable",
    "TensorSpec",
    "compile_plan",
]
