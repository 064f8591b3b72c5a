"""NVIDIA JaxPP's ``jaxpp.api`` names on jaxpp_mlir.

Code written for JaxPP runs by changing its import line to
``import jaxpp_mlir.jaxpp as jaxpp`` (or ``from jaxpp_mlir.compat import jaxpp``).

Supported: ``mpmd_jit_with_loop``, ``mpmd_jit_by_yield``, ``MpmdMesh``,
``pipeline_enter_stage``, ``treduce``, ``treduce_i``, ``Add``, ``Concat``,
``Max``, ``BaseSchedule``, ``GPipe``, ``Std1F1B``, ``Eager1F1B``,
``Interleaved1F1B``, ``ZeroBubble`` (``tasks(n)`` in JaxPP's format; the older
time grid via ``jaxpp_grid``), ``Task``, ``FusedTask``, ``TaskType``.
Not supported: ``cross_mpmd_all_reduce`` (raises, see its docstring) and the
Ray-only ``RemoteMpmdMesh``, ``mpmd_jit_rev``, ``ArrayRef``, ``add_multi_p``.
"""

from __future__ import annotations

import sys
from typing import Any

from jaxpp_mlir.compat.mpmd_jit import mpmd_jit_by_yield, mpmd_jit_with_loop
from jaxpp_mlir.compat.schedules import (
    BaseSchedule,
    Eager1F1B,
    GPipe,
    GridTask,
    Interleaved1F1B,
    ScheduleTasks,
    Std1F1B,
    TaskType,
    ZeroBubble,
    jaxpp_grid,
)
from jaxpp_mlir.frontend.markers import pipeline_enter_stage
from jaxpp_mlir.frontend.treduce import Add, Concat, Max, treduce, treduce_i
from jaxpp_mlir.mesh import MpmdMesh
from jaxpp_mlir.schedules import FusedTask, Task


def cross_mpmd_all_reduce(*args: Any) -> Any:
    """Not supported: JaxPP sums one array from each of several ranks inside a step.

    jaxpp_mlir finds where values live from the module alone and already sums
    a weight's gradients that several stages produce (tied embeddings) once,
    after the loop; an explicit cross-rank reduction has no marker op in the
    lowered module to partition on, so it is refused rather than run wrong.
    """
    raise NotImplementedError(
        "cross_mpmd_all_reduce is not supported by jaxpp_mlir: a weight used by several "
        "stages gets its gradients summed across ranks automatically; sum values with "
        "ordinary jnp ops (they run on the rank that receives the least)"
    )


#: ``jaxpp.api.X`` (JaxPP's tutorial spells names so) is this module's ``X``.
api = sys.modules[__name__]

__all__ = [
    "Add",
    "BaseSchedule",
    "Concat",
    "Eager1F1B",
    "FusedTask",
    "GPipe",
    "GridTask",
    "Interleaved1F1B",
    "Max",
    "MpmdMesh",
    "ScheduleTasks",
    "Std1F1B",
    "Task",
    "TaskType",
    "ZeroBubble",
    "api",
    "cross_mpmd_all_reduce",
    "jaxpp_grid",
    "mpmd_jit_by_yield",
    "mpmd_jit_with_loop",
    "pipeline_enter_stage",
    "treduce",
    "treduce_i",
]
