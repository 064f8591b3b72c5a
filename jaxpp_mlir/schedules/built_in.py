"""The built-in schedules, listed once: by name for the schedule records modules carry
(``schedules.record``), as the planner's candidates (``planner.plan_pipeline``), and
checked against the package's exports by a test."""

from __future__ import annotations

import inspect

from jaxpp_mlir.schedules.base import Schedule
from jaxpp_mlir.schedules.dual_pipe_v import DualPipeV
from jaxpp_mlir.schedules.gpipe import GPipe
from jaxpp_mlir.schedules.interleaved import Interleaved1F1B, InterleavedGPipe, KimiK2
from jaxpp_mlir.schedules.one_f_one_b import Eager1F1B, Std1F1B
from jaxpp_mlir.schedules.zero_bubble import ZeroBubble

#: Every schedule a name and literal arguments rebuild (not ``CustomSchedule``, whose task
#: lists are data, nor ``AutoFused``, which wraps another schedule).
BUILT_IN: dict[str, type[Schedule]] = {
    cls.__name__: cls
    for cls in (
        GPipe,
        Std1F1B,
        Eager1F1B,
        Interleaved1F1B,
        KimiK2,
        InterleavedGPipe,
        ZeroBubble,
        DualPipeV,
    )
}


def takes_mpmd_dim(cls: type[Schedule]) -> bool:
    """Whether ``cls(num_stages, mpmd_dim)`` is how it is built (several stages per rank)."""
    return "mpmd_dim" in inspect.signature(cls).parameters
