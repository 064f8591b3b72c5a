"""jaxpp_mlir: MPMD pipeline parallelism for JAX as MLIR passes over StableHLO.

Public names load on first use (PEP 562): ``import jaxpp_mlir.runtime`` or
``import jaxpp_mlir.errors`` loads neither the passes nor the frontend.
"""

import sys as _sys
import types as _types

from jaxpp_mlir.runtime.lazy_exports import lazy_getattr as _lazy_getattr

_SOURCES = {
    "Add": "jaxpp_mlir.frontend.treduce",
    "AutoFused": "jaxpp_mlir.schedules",
    "CallError": "jaxpp_mlir.errors",
    "CheckpointError": "jaxpp_mlir.errors",
    "CompiledProgram": "jaxpp_mlir.program",
    "Concat": "jaxpp_mlir.frontend.treduce",
    "CustomSchedule": "jaxpp_mlir.schedules",
    "DualPipeV": "jaxpp_mlir.schedules",
    "Eager1F1B": "jaxpp_mlir.schedules",
    "FusedTask": "jaxpp_mlir.schedules",
    "GPipe": "jaxpp_mlir.schedules",
    "Interleaved1F1B": "jaxpp_mlir.schedules",
    "InterleavedGPipe": "jaxpp_mlir.schedules",
    "KimiK2": "jaxpp_mlir.schedules",
    "JaxppError": "jaxpp_mlir.errors",
    "MarkerError": "jaxpp_mlir.errors",
    "Max": "jaxpp_mlir.frontend.treduce",
    "MeshError": "jaxpp_mlir.errors",
    "MlirParseError": "jaxpp_mlir.errors",
    "MpmdMesh": "jaxpp_mlir.mesh",
    "PartitionError": "jaxpp_mlir.errors",
    "PartitionScheduleError": "jaxpp_mlir.errors",
    "PartitionOptions": "jaxpp_mlir.partition_options",
    "PartitionWarning": "jaxpp_mlir.errors",
    "PartitionedProgram": "jaxpp_mlir.program",
    "PlanError": "jaxpp_mlir.errors",
    "RuntimeFailure": "jaxpp_mlir.errors",
    "Schedule": "jaxpp_mlir.schedules",
    "ScheduleError": "jaxpp_mlir.errors",
    "SimulationResult": "jaxpp_mlir.schedules",
    "StackedArray": "jaxpp_mlir.runtime.stacked_array",
    "Std1F1B": "jaxpp_mlir.schedules",
    "Task": "jaxpp_mlir.schedules",
    "TreduceError": "jaxpp_mlir.frontend.treduce",
    "ZeroBubble": "jaxpp_mlir.schedules",
    "mark_stage_end": "jaxpp_mlir.frontend.markers",
    "mark_stage_end_backward": "jaxpp_mlir.frontend.markers",
    "partition": "jaxpp_mlir.partition",
    "pipeline_enter_stage": "jaxpp_mlir.frontend.markers",
    "plan_pipeline": "jaxpp_mlir.partition",
    "program_trace": "jaxpp_mlir.runtime.observation.trace",
    "treduce": "jaxpp_mlir.frontend.treduce",
    "treduce_i": "jaxpp_mlir.frontend.treduce",
}

__all__ = sorted([*_SOURCES, "ray"])  # ray: the subpackage jaxpp_mlir.ray, loaded on use


__getattr__ = _lazy_getattr(__name__, _SOURCES, globals())


class _Package(_types.ModuleType):
    def __setattr__(self, name: str, value: object) -> None:
        # Importing the submodule ``jaxpp_mlir.partition`` binds it on the package;
        # the public name ``partition`` stays the function, as with eager imports.
        if isinstance(value, _types.ModuleType) and _SOURCES.get(name) == value.__name__:
            value = getattr(value, name)
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package


def __dir__() -> list[str]:
    """The public API only (``__all__``), loaded or not."""
    return list(__all__)
