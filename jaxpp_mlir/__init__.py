"""jaxpp_mlir: MPMD pipeline parallelism for JAX as MLIR passes over StableHLO."""

from jaxpp_mlir.errors import (
    CallError,
    JaxppError,
    MarkerError,
    MeshError,
    MlirParseError,
    PartitionError,
    RuntimeFailure,
    ScheduleError,
)
from jaxpp_mlir.frontend.markers import mark_stage_end, pipeline_enter_stage
from jaxpp_mlir.frontend.treduce import Add, Concat, Max, TreduceError, treduce, treduce_i
from jaxpp_mlir.mesh import MpmdMesh
from jaxpp_mlir.partition import partition
from jaxpp_mlir.program import CompiledProgram, PartitionedProgram
from jaxpp_mlir.runtime.trace import program_trace
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
    "partition",
    "pipeline_enter_stage",
    "program_trace",
    "treduce",
    "treduce_i",
]
