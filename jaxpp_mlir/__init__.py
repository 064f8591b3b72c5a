"""jaxpp_mlir: MPMD pipeline parallelism for JAX as MLIR passes over StableHLO."""

from jaxpp_mlir.errors import (
    CallError,
    JaxppError,
    MarkerError,
    MeshError,
    MlirParseError,
    PartitionError,
    PartitionWarning,
    RuntimeFailure,
    ScheduleError,
)
from jaxpp_mlir.frontend.markers import (
    mark_stage_end,
    mark_stage_end_backward,
    pipeline_enter_stage,
)
from jaxpp_mlir.frontend.treduce import Add, Concat, Max, TreduceError, treduce, treduce_i
from jaxpp_mlir.mesh import MpmdMesh
from jaxpp_mlir.partition import partition
from jaxpp_mlir.program import CompiledProgram, PartitionedProgram
from jaxpp_mlir.schedules import (
    CustomSchedule,
    DualPipeV,
    Eager1F1B,
    FusedTask,
    GPipe,
    Interleaved1F1B,
    Schedule,
    SimulationResult,
    Std1F1B,
    Task,
    ZeroBubble,
)

__all__ = [
    "Add",
    "CallError",
    "CompiledProgram",
    "Concat",
    "CustomSchedule",
    "DualPipeV",
    "Eager1F1B",
    "FusedTask",
    "GPipe",
    "Interleaved1F1B",
    "JaxppError",
    "MarkerError",
    "Max",
    "MeshError",
    "MlirParseError",
    "MpmdMesh",
    "PartitionError",
    "PartitionWarning",
    "PartitionedProgram",
    "RuntimeFailure",
    "Schedule",
    "ScheduleError",
    "SimulationResult",
    "Std1F1B",
    "Task",
    "TreduceError",
    "ZeroBubble",
    "mark_stage_end",
    "mark_stage_end_backward",
    "partition",
    "pipeline_enter_stage",
    "treduce",
    "treduce_i",
]
