"""Pipeline schedules as plain Python data (no MLIR, no JAX).

A schedule places ``num_stages`` stages on ``mpmd_dim`` ranks and gives, for a number of
microbatches, each rank's ordered list of ``Task``/``FusedTask``. ``simulate`` runs the
lists in time (checking completeness, placement and deadlock freedom) and ``render``
draws them as a rank-by-time grid.
"""

from jaxpp_mlir.schedules.autofuse import AutoFused, fuse_schedule_tasks
from jaxpp_mlir.schedules.base import Schedule
from jaxpp_mlir.schedules.csv_format import schedule_from_csv, schedule_to_csv
from jaxpp_mlir.schedules.custom import CustomSchedule
from jaxpp_mlir.schedules.dual_pipe_v import DualPipeV
from jaxpp_mlir.schedules.gpipe import GPipe
from jaxpp_mlir.schedules.interleaved import Interleaved1F1B, InterleavedGPipe, KimiK2
from jaxpp_mlir.schedules.one_f_one_b import Eager1F1B, Std1F1B
from jaxpp_mlir.schedules.render import render_steps, render_timeline
from jaxpp_mlir.schedules.simulate import (
    DEFAULT_COSTS,
    UNIT_COSTS,
    SimulationResult,
    simulate_tasks,
)
from jaxpp_mlir.schedules.task import BWD, BWD_I, BWD_W, FWD, KINDS, FusedTask, ScheduleItem, Task
from jaxpp_mlir.schedules.zero_bubble import ZeroBubble

__all__ = [
    "BWD",
    "BWD_I",
    "BWD_W",
    "DEFAULT_COSTS",
    "FWD",
    "KINDS",
    "UNIT_COSTS",
    "AutoFused",
    "CustomSchedule",
    "DualPipeV",
    "Eager1F1B",
    "FusedTask",
    "GPipe",
    "Interleaved1F1B",
    "InterleavedGPipe",
    "KimiK2",
    "Schedule",
    "ScheduleItem",
    "SimulationResult",
    "Std1F1B",
    "Task",
    "ZeroBubble",
    "render_steps",
    "render_timeline",
    "fuse_schedule_tasks",
    "schedule_from_csv",
    "schedule_to_csv",
    "simulate_tasks",
]
