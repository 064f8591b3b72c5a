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
from jaxpp_mlir.mesh import MpmdMesh
from jaxpp_mlir.partition import partition
from jaxpp_mlir.program import CompiledProgram, PartitionedProgram

__all__ = [
    "CallError",
    "CompiledProgram",
    "JaxppError",
    "MarkerError",
    "MeshError",
    "MlirParseError",
    "MpmdMesh",
    "PartitionError",
    "PartitionedProgram",
    "RuntimeFailure",
    "ScheduleError",
    "mark_stage_end",
    "partition",
    "pipeline_enter_stage",
]
