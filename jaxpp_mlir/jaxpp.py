"""NVIDIA JaxPP's ``jaxpp.api`` names on jaxpp_mlir.

Code written for JaxPP runs by changing its import line to
``import jaxpp_mlir.jaxpp as jaxpp``.

Every public name of JaxPP 0.9.2's ``jaxpp.api`` is here except its three JAX
primitives (``add_multi_p``, ``gather_multi_p``, ``place_with_p``: JaxPP
internals; their functions ``cross_mpmd_all_reduce``, ``cross_mpmd_stack`` and
``place_with`` are here). Not supported: the Ray-only ``RemoteMpmdMesh``,
``mpmd_jit_rev`` and ``ArrayRef`` of older releases.
"""

from __future__ import annotations

import sys

from jaxpp_mlir.compat.arrays import (
    MpmdArray,
    MpmdSharding,
    mpmd_to_spmd_reshard,
    spmd_to_mpmd_reshard,
)
from jaxpp_mlir.compat.mpmd_jit import mpmd_jit_by_yield, mpmd_jit_with_loop
from jaxpp_mlir.compat.primitives import (
    collect_task_times_ms,
    cross_mpmd_all_reduce,
    cross_mpmd_stack,
    place_with,
)
from jaxpp_mlir.compat.schedules import (
    BaseSchedule,
    DualPipeV,
    Eager1F1B,
    GPipe,
    GridTask,
    Interleaved1F1B,
    InterleavedBaseSchedule,
    InterleavedGPipe,
    KimiK2,
    ScheduleTasks,
    Std1F1B,
    TaskType,
    ZeroBubble,
    jaxpp_grid,
)
from jaxpp_mlir.frontend.markers import mark_stage_end, pipeline_enter_stage
from jaxpp_mlir.frontend.treduce import Add, Concat, Max, treduce, treduce_i
from jaxpp_mlir.mesh import MpmdMesh, filter_axes
from jaxpp_mlir.schedules import FusedTask, Task

#: ``jaxpp.api.X`` (JaxPP's tutorial spells names so) is this module's ``X``.
api = sys.modules[__name__]

__all__ = [
    "Add",
    "BaseSchedule",
    "Concat",
    "DualPipeV",
    "Eager1F1B",
    "FusedTask",
    "GPipe",
    "GridTask",
    "Interleaved1F1B",
    "InterleavedBaseSchedule",
    "InterleavedGPipe",
    "KimiK2",
    "Max",
    "MpmdArray",
    "MpmdMesh",
    "MpmdSharding",
    "ScheduleTasks",
    "Std1F1B",
    "Task",
    "TaskType",
    "ZeroBubble",
    "api",
    "collect_task_times_ms",
    "cross_mpmd_all_reduce",
    "cross_mpmd_stack",
    "filter_axes",
    "jaxpp_grid",
    "mark_stage_end",
    "mpmd_jit_by_yield",
    "mpmd_jit_with_loop",
    "mpmd_to_spmd_reshard",
    "pipeline_enter_stage",
    "place_with",
    "spmd_to_mpmd_reshard",
    "treduce",
    "treduce_i",
]
