"""Measured segment costs: each marked segment's forward and backward timed on the devices.

The step is partitioned with one segment per stage (GPipe on as many ranks as segments,
or ``InterleavedGPipe`` when the segments are a multiple of the ranks) by the
``partition_step`` the caller gives (the planner does not import the driver), compiled, run
once to warm up and once under ``program_trace``, on zeros of the step's argument
shapes; each segment's forward and backward seconds are the median of its task spans
over the microbatches. A task's span is the longer of its device span and its dispatch
(a CPU client may run a small program inside the dispatch call, leaving a device span of
nothing). A fused task's span is shared evenly by its parts.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import tempfile
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from jaxpp_mlir.errors import ScheduleError
from jaxpp_mlir.mesh import MpmdMesh
from jaxpp_mlir.planner.segment_costs import SegmentCosts
from jaxpp_mlir.runtime.observation.timeline import TaskSpan
from jaxpp_mlir.schedules import GPipe, InterleavedGPipe, Schedule


def calibration_layout(num_segments: int, mesh: MpmdMesh) -> tuple[Schedule, MpmdMesh]:
    """A schedule with one stage per segment that fits ``mesh``, and the mesh it runs on."""
    ranks = mesh.mpmd_dim
    if num_segments <= ranks:
        return GPipe(num_segments), mesh.mpmd_submesh(list(range(num_segments)))
    if num_segments % ranks == 0:
        return InterleavedGPipe(num_segments, ranks), mesh
    raise ScheduleError(
        f"calibrate=True runs one marked segment per stage: {num_segments} segments fit "
        f"neither at most {ranks} ranks nor a multiple of them"
    )


def _zeros_like_arguments(lowered: Any) -> tuple[tuple, dict]:
    if not hasattr(lowered, "args_info"):
        raise TypeError(
            "calibrate=True runs the step, so it needs the jax.stages.Lowered (the argument "
            f"shapes), got {type(lowered).__name__}"
        )
    return jax.tree.map(lambda info: jnp.zeros(info.shape, info.dtype), lowered.args_info)


def _task_seconds(spans: Sequence[TaskSpan]) -> dict[tuple[int, str], float]:
    """Per (stage, kind), the median seconds of its tasks' spans (module docstring)."""
    samples: dict[tuple[int, str], list[float]] = defaultdict(list)
    for span in spans:
        tasks = span.pipeline_tasks
        for task in tasks:
            span_us = max(span.end - span.begin, span.dispatch_us)
            samples[(task.stage, task.kind)].append(span_us / 1e6 / len(tasks))
    return {key: statistics.median(values) for key, values in samples.items()}


#: Partitions the step being planned with a schedule on a mesh: ``partition`` bound to it.
PartitionStep = Callable[[Schedule, MpmdMesh], Any]


def calibrated_costs(
    lowered: Any, mesh: MpmdMesh, costs: SegmentCosts, *, partition_step: PartitionStep
) -> SegmentCosts:
    """``costs`` with each segment's forward and backward seconds measured (module doc)
    on the program ``partition_step`` makes of ``lowered``."""
    from jaxpp_mlir.runtime.observation.trace import program_trace

    schedule, calibration_mesh = calibration_layout(costs.num_segments, mesh)
    program = partition_step(schedule, calibration_mesh)
    compiled = program.compile()
    args, kwargs = _zeros_like_arguments(lowered)
    jax.block_until_ready(compiled(*args, **kwargs))
    with tempfile.TemporaryDirectory(prefix="jaxpp-calibration-") as scratch:
        with program_trace(os.path.join(scratch, "step.json")) as recorder:
            jax.block_until_ready(compiled(*args, **kwargs))
        seconds = _task_seconds(recorder.timeline().tasks)
    backward = [
        seconds.get((s, "bwd"), seconds.get((s, "bwd_i"), 0.0) + seconds.get((s, "bwd_w"), 0.0))
        for s in range(costs.num_segments)
    ]
    return dataclasses.replace(
        costs,
        measured_forward_s=tuple(seconds.get((s, "fwd"), 0.0) for s in range(costs.num_segments)),
        measured_backward_s=tuple(backward),
    )
