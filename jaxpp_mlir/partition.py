"""``partition()``: a lowered step in, a ``PartitionedProgram`` out.

Options in, one declared pipeline (``passes/pipelines.py``) run, the plan out: the
passes decide the stages, the schedule and the placement, and record them on the
module, from which ``PartitionedProgram`` builds the plan. Nothing is decided here by
reading the IR between passes.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from jaxpp_mlir import partition_log, setup_advice
from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.dialect.records import record_text
from jaxpp_mlir.errors import ScheduleError
from jaxpp_mlir.ir.utils import walk
from jaxpp_mlir.mesh import MpmdMesh, parallel_ranks
from jaxpp_mlir.partition_options import PartitionOptions, checked_byte_count
from jaxpp_mlir.passes.choose_stages import AUTO
from jaxpp_mlir.passes.pipelines import default_pipeline, segment_pipeline
from jaxpp_mlir.pipeline_run import PipelineRun
from jaxpp_mlir.program import PartitionedProgram
from jaxpp_mlir.runtime.compilation.warm_up import start_warm_up
from jaxpp_mlir.runtime.host_heap import collector_paused
from jaxpp_mlir.runtime.observation import phases
from jaxpp_mlir.schedules import Schedule
from jaxpp_mlir.schedules.record import name_record, recordable, schedule_record
from jaxpp_mlir.step_input import import_step, is_sharded

if TYPE_CHECKING:  # the planner loads only when a partition plans
    from jaxpp_mlir.planner.plan_pipeline import PipelinePlan

__all__ = ["AUTO", "partition", "plan_pipeline"]


def partition(
    x: Any,
    *,
    mesh: MpmdMesh,
    schedule: Schedule | str | None = None,
    options: PartitionOptions | None = None,
    **settings: Any,
) -> PartitionedProgram:
    """Partitions a lowered step into stage programs over ``mesh``'s submeshes.

    ``x`` is a ``jax.stages.Lowered``, an ``ir.Module`` or MLIR text (or
    bytecode). The input is copied; it is never modified. ``schedule`` orders
    the microbatches of a ``treduce`` loop and places stages on ranks (stage s
    on rank s % mpmd_dim unless the schedule says otherwise); without it, the
    schedule given to ``treduce`` (recorded in the module), else ``Std1F1B``.
    A schedule given both here and to ``treduce`` must be the same.
    ``schedule="auto"`` takes the schedule and split ``plan_pipeline`` ranks best.

    ``options`` (default: ``PartitionOptions.from_env()``, the ``JAXPP_MLIR_*``
    variables) holds every setting, and each field may also be given by name:
    ``partition(x, mesh=m, dump_dir=path, strict=True, fuse_tasks=True,
    stage_split=(2, 1, 1, 4), memory_limit_bytes=2**30)`` (a keyword given as None
    leaves the field as ``options`` has it; a name that is no field is a
    ``TypeError``). ``dump_dir`` receives the input module, the IR after every pass,
    every stage module and the schedule. What is legal but surprising (a stage marker
    JAX dropped, markers that end the same stage) is a ``PartitionWarning`` at the
    user's source line; ``strict=True`` makes it a ``PartitionError``. ``fuse_tasks``
    runs tasks that follow each other on one rank as one launch wherever that delays
    no task (``schedules.AutoFused``).

    With more segments (marked by the stage markers) than the schedule has stages,
    neighbouring segments are merged into stages (jaxpp-choose-stages): the split with
    the least simulated step time under the segments' estimated costs
    (``planner.segment_costs``), among those whose estimated peak bytes per rank fit
    ``memory_limit_bytes``; ``stage_split`` (segments per stage) forces one.
    ``program.stage_split`` says which.
    """
    given = {name: value for name, value in settings.items() if value is not None}
    options = PartitionOptions.with_settings(options, given)
    with collector_paused():
        return _partition(x, mesh=mesh, schedule=schedule, options=options)


def _partition(
    x: Any, *, mesh: MpmdMesh, schedule: Schedule | str | None, options: PartitionOptions
) -> PartitionedProgram:
    _check_mesh(mesh)
    option = _schedule_option(schedule)
    start_warm_up(mesh.jax_mesh.devices.flat)
    with phases.timed("partition: import the module"):
        module, tree_info = import_step(x)
    with module.context:
        target = _target(module, mesh, schedule, option)
    PipelineRun(
        module, options.dump_dir, strict=options.strict, verify_each=options.verify_each_pass
    ).run(default_pipeline(options, **target))
    with phases.timed("partition: build the plan"):
        program = PartitionedProgram(module, mesh, tree=tree_info)
    if options.setup_warnings:
        with phases.timed("partition: setup advice"):
            setup_advice.warn_about_program(program)
    partition_log.log_summary(program.plan, program.num_stages)
    if options.dump_dir is not None:
        program.dump(os.path.join(options.dump_dir, "program"))
    return program


def _check_mesh(mesh: Any) -> None:
    if not isinstance(mesh, MpmdMesh):
        raise TypeError(f"mesh must be a jaxpp_mlir.MpmdMesh, got {type(mesh).__name__}")


def _schedule_option(schedule: Schedule | str | None) -> Schedule | str:
    """The schedule as jaxpp-choose-stages takes it: "" (none), "auto", a built-in
    schedule's name, or the object (recorded once the module's context is there)."""
    if schedule is None:
        return ""
    if isinstance(schedule, str):
        if schedule != AUTO:
            name_record(schedule, auto=True)  # a ScheduleError naming what it resembles
        return schedule
    if not isinstance(schedule, Schedule):
        raise TypeError(
            f"schedule must be a jaxpp_mlir schedule, {AUTO!r} or a built-in schedule's name "
            f"(GPipe, Std1F1B, ...), got {type(schedule).__name__}"
        )
    return schedule


def _target(module: Any, mesh: MpmdMesh, schedule: Any, option: Schedule | str) -> dict[str, Any]:
    """``default_pipeline``'s arguments besides the options: the mesh's, the schedule's."""
    if isinstance(option, Schedule):
        try:
            record = schedule_record(option)
        except ScheduleError:
            # A schedule a record cannot hold goes as the task lists it gives for the
            # step's microbatch count.
            record = recordable(option, _num_microbatches(module))
        option = record_text(record)
    return {
        "mpmd_dim": mesh.mpmd_dim,
        "mpmd_axis": mesh.mpmd_axis_name,
        "submesh_size": len(mesh.rank_devices(0)),
        "sharded": is_sharded(module),
        "schedule": option,
        "schedule_stages": schedule.num_stages if isinstance(schedule, Schedule) else 0,
        "parallel_ranks": parallel_ranks(mesh) or 0,
    }


def _num_microbatches(module: Any) -> int | None:
    """The microbatch count treduce recorded on the step's loop marker (None: no loop, or
    loops of different counts, which jaxpp-normalize-loop refuses)."""
    counts = {
        jaxpp.loop_num_microbatches(op)
        for op in walk(module.operation)
        if op.name in jaxpp.MARKER_OP_NAMES and jaxpp.is_loop_marker(op)
    }
    return counts.pop() if len(counts) == 1 else None


def plan_pipeline(
    x: Any, *, mesh: MpmdMesh, memory_limit_bytes: int | None = None, calibrate: bool = False
) -> PipelinePlan:
    """The pipeline layouts that fit ``mesh`` for the lowered step ``x``, best first.

    Each candidate is a schedule (kind and parameters), a stage split (marked segments
    per stage), the predicted step seconds, bubble fraction, peak bytes per rank and
    launches per step, from the segments' costs estimated from their StableHLO ops
    (``planner.segment_costs``) and simulated. ``str(plan)`` is a table;
    ``partition(x, mesh=mesh, schedule="auto")`` partitions with ``plan[0]``.
    ``calibrate=True`` (``x`` a ``jax.stages.Lowered``) measures each segment's forward
    and backward once on the mesh's devices and plans on those times instead
    (``planner.calibration``: it compiles and runs the step once, one segment per stage).
    """
    from jaxpp_mlir.planner.calibration import calibrated_costs
    from jaxpp_mlir.planner.plan_pipeline import machine_for, plan_module
    from jaxpp_mlir.planner.segment_costs import segment_costs

    _check_mesh(mesh)
    if memory_limit_bytes is not None:
        memory_limit_bytes = checked_byte_count(
            "plan_pipeline: memory_limit_bytes", memory_limit_bytes, minimum=1
        )
    if not isinstance(calibrate, bool):
        raise TypeError(f"plan_pipeline: calibrate must be a bool, got {calibrate!r}")
    module, _ = import_step(x)
    target = {"mpmd_axis": mesh.mpmd_axis_name, "submesh_size": len(mesh.rank_devices(0))}
    PipelineRun(module, None).run(segment_pipeline(sharded=is_sharded(module), **target))
    costs = None
    if calibrate:
        costs = calibrated_costs(
            x,
            mesh,
            segment_costs(module.operation),
            partition_step=lambda schedule, on: partition(x, mesh=on, schedule=schedule),
        )
    return plan_module(
        module.operation,
        mesh.mpmd_dim,
        costs=costs,
        memory_limit_bytes=memory_limit_bytes,
        machine=machine_for(mesh),
    )
