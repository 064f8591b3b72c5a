"""``partition()``: a lowered step in, a ``PartitionedProgram`` out."""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any

import jax
from jax.extend.mlir import ir

from jaxpp_mlir import ir_context, partition_log, setup_advice
from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.errors import PartitionError, ScheduleError
from jaxpp_mlir.host_heap import collector_paused
from jaxpp_mlir.ir.utils import find_loop, find_main, walk
from jaxpp_mlir.mesh import MpmdMesh
from jaxpp_mlir.partition_options import PartitionOptions
from jaxpp_mlir.passes.pipeline import PipelineElement, PipelineFailure, run_pipeline
from jaxpp_mlir.passes.pipelines import (
    grouping_pipeline,
    placement_pipeline,
    segment_pipeline,
)
from jaxpp_mlir.program import PartitionedProgram, TreeInfo
from jaxpp_mlir.runtime import options as _options
from jaxpp_mlir.runtime.observation import phases
from jaxpp_mlir.schedules import Schedule, Std1F1B
from jaxpp_mlir.schedules.autofuse import AutoFused
from jaxpp_mlir.schedules.base import uses_split_backward
from jaxpp_mlir.schedules.parse import schedule_from_text

if TYPE_CHECKING:  # the planner loads only when a partition merges segments or plans
    from jaxpp_mlir.planner.plan_pipeline import PipelinePlan
    from jaxpp_mlir.planner.segment_costs import SegmentCosts
    from jaxpp_mlir.planner.stage_split import SplitEstimate

DUMP_DIR_ENV = _options.DUMP_DIR.env
#: ``partition(..., schedule=AUTO)`` takes the best candidate of ``plan_pipeline``.
AUTO = "auto"


def partition(
    x: Any,
    *,
    mesh: MpmdMesh,
    schedule: Schedule | str | None = None,
    dump_dir: str | os.PathLike | None = None,
    strict: bool = False,
    fuse_tasks: bool | None = None,
    options: PartitionOptions | None = None,
    stage_split: tuple[int, ...] | None = None,
    memory_limit_bytes: int | None = None,
) -> PartitionedProgram:
    """Partitions a lowered step into stage programs over ``mesh``'s submeshes.

    ``x`` is a ``jax.stages.Lowered``, an ``ir.Module`` or MLIR text (or
    bytecode). The input is copied; it is never modified. ``schedule`` orders
    the microbatches of a ``treduce`` loop and places stages on ranks (stage s
    on rank s % mpmd_dim unless the schedule says otherwise); without it, the
    schedule given to ``treduce`` (recorded in the module), else ``Std1F1B``.
    A schedule given both here and to ``treduce`` must be the same. ``dump_dir`` (or
    the environment variable ``JAXPP_MLIR_DUMP_DIR``) receives the input
    module, the IR after every pass, every stage module and the schedule.
    What is legal but surprising (a stage marker JAX dropped, markers that end
    the same stage) is a ``PartitionWarning`` at the user's source line;
    ``strict=True`` makes it a ``PartitionError``. ``fuse_tasks`` (default: the
    environment variable ``JAXPP_MLIR_FUSE_TASKS``) runs tasks that follow each other
    on one rank as one launch wherever that delays no task (``schedules.AutoFused``).
    ``options`` (default: ``PartitionOptions.from_env()``) holds every other setting;
    ``dump_dir`` and ``fuse_tasks``, where given, take the place of its fields.

    With more marked segments (markers) than the schedule has stages, neighbouring
    segments are merged into stages: the split with the least simulated step time under
    the segments' estimated costs (``planner.segment_costs``), among those whose
    estimated peak bytes per rank fit ``memory_limit_bytes``. ``stage_split`` (segments
    per stage, e.g. ``(2, 1, 1, 4)``) forces a split. ``program.stage_split`` says which.
    ``schedule="auto"`` takes the schedule and split ``plan_pipeline`` ranks best.
    """
    options = PartitionOptions.from_env() if options is None else options
    if not isinstance(options, PartitionOptions):
        raise TypeError(
            f"options must be a jaxpp_mlir.PartitionOptions, got {type(options).__name__}"
        )
    changes: dict[str, Any] = {}
    if dump_dir is not None:
        changes["dump_dir"] = os.fspath(dump_dir)
    if fuse_tasks is not None:
        changes["fuse_tasks"] = bool(fuse_tasks)
    with collector_paused():
        return _partition(
            x,
            mesh=mesh,
            schedule=schedule,
            options=dataclasses.replace(options, **changes),
            strict=strict,
            stage_split=stage_split,
            memory_limit_bytes=memory_limit_bytes,
        )


def _partition(
    x: Any,
    *,
    mesh: MpmdMesh,
    schedule: Schedule | str | None,
    options: PartitionOptions,
    strict: bool = False,
    stage_split: tuple[int, ...] | None = None,
    memory_limit_bytes: int | None = None,
) -> PartitionedProgram:
    if not isinstance(mesh, MpmdMesh):
        raise TypeError(f"mesh must be a jaxpp_mlir.MpmdMesh, got {type(mesh).__name__}")
    auto = isinstance(schedule, str) and schedule == AUTO
    if auto and stage_split is not None:
        raise ScheduleError(
            'schedule="auto" chooses the stage split: give stage_split= only with a schedule'
        )
    if schedule is not None and not auto and not isinstance(schedule, Schedule):
        raise TypeError(f"schedule must be a jaxpp_mlir schedule, got {type(schedule).__name__}")
    with phases.timed("partition: import the module"):
        module, tree_info = _import(x)
    treduce_schedule = _treduce_schedule_text(module)
    dump_dir = options.dump_dir
    runner = _Runner(module, dump_dir, strict=strict)
    submesh_size = len(mesh.rank_devices(0))
    sharded = any(op.operation.name == "sdy.mesh" for op in module.body.operations)
    runner.run(
        segment_pipeline(
            num_stages=schedule.num_stages if isinstance(schedule, Schedule) else 0,
            mpmd_axis=mesh.mpmd_axis_name,
            submesh_size=submesh_size,
            sharded=sharded,
        )
    )
    num_microbatches = _num_microbatches(module)
    estimate = None
    if auto:
        best = _plan(module, num_microbatches, mesh, memory_limit_bytes).best
        schedule = best.schedule
        if best.stage_split != (1,) * len(best.stage_split):
            stage_split = best.stage_split
    if stage_split is not None or (
        schedule is not None and schedule.num_stages < _num_stages(module)
    ):
        stage_split, estimate = _stage_split(
            module, schedule, stage_split, num_microbatches, memory_limit_bytes, mesh
        )
    runner.run(
        grouping_pipeline(
            stage_split=stage_split or (),
            pack_accumulators=options.pack_accumulators,
            pack_parameters=options.pack_parameters,
            pack_contraction_operands=options.pack_contraction_operands,
        )
    )
    num_stages = _num_stages(module)
    if num_microbatches is None:
        if schedule is not None:
            raise ScheduleError(
                "a schedule orders the microbatches of a treduce loop, but the step has none"
            )
        placement: tuple[int, ...] = ()
        split_backward = False
    else:
        schedule = _pick_schedule(schedule, treduce_schedule, num_stages, mesh)
        _check_schedule(schedule, num_stages, num_microbatches, mesh)
        placement = tuple(schedule.stage_rank(s) for s in range(num_stages))
        split_backward = uses_split_backward(schedule.tasks(num_microbatches))
        if options.fuse_tasks and not isinstance(schedule, AutoFused):
            schedule = AutoFused(schedule)
    runner.run(
        placement_pipeline(
            mpmd_dim=mesh.mpmd_dim,
            placement=placement,
            split_backward=split_backward,
            replicate_max_bytes=options.replicate_max_bytes,
        )
    )
    with phases.timed("partition: build the plan"):
        program = PartitionedProgram(module, mesh, tree=tree_info, schedule=schedule)
    program.stage_estimate = estimate
    if options.setup_warnings:
        with phases.timed("partition: setup advice"):
            setup_advice.warn_about_setup(
                num_stages=num_stages,
                num_microbatches=num_microbatches,
                stage_ranks=placement or [s % mesh.mpmd_dim for s in range(num_stages)],
                num_ranks=mesh.mpmd_dim,
                stage_functions=[program.stage_functions(s) for s in range(num_stages)],
            )
    partition_log.log_summary(program.plan, program.num_stages)
    if dump_dir is not None:
        program.dump(os.path.join(dump_dir, "program"))
    return program


class _Runner:
    """Runs pipelines on one module, numbering dumps across them."""

    def __init__(
        self, module: ir.Module, dump_dir: str | os.PathLike | None, *, strict: bool = False
    ):
        self.module = module
        self.strict = strict
        self.dump_dir = dump_dir
        self.count = 0
        self.completed: set[str] = set()  # jaxpp passes run so far, across pipelines
        if dump_dir is not None:
            os.makedirs(dump_dir, exist_ok=True)
            _write(dump_dir, "00_input.mlir", _print(module))

    def run(self, pipeline: list[PipelineElement]) -> None:
        timer = partition_log.PassTimer()

        def after_pass(index: int, element: PipelineElement, current: ir.Module) -> None:
            timer.after_pass(index, element, current)
            self.count += 1
            if self.dump_dir is not None:
                name = f"{self.count:02d}_after_{element.name}.mlir"
                _write(self.dump_dir, name, _print(current))

        try:
            found = run_pipeline(
                self.module,
                pipeline,
                before_pass=timer.before_pass,
                after_pass=after_pass,
                completed=self.completed,
            )
        except PipelineFailure as failure:
            if failure.internal_error is not None:
                raise failure.internal_error from None
            text = "\n".join(d.render() for d in failure.diagnostics)
            raise PartitionError(
                text or f"pass {failure.pass_name} failed",
                tuple(d.render() for d in failure.diagnostics),
            ) from None
        partition_log.surface_warnings(found, strict=self.strict)


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
    if not isinstance(mesh, MpmdMesh):
        raise TypeError(f"mesh must be a jaxpp_mlir.MpmdMesh, got {type(mesh).__name__}")
    module, _ = _import(x)
    sharded = any(op.operation.name == "sdy.mesh" for op in module.body.operations)
    _Runner(module, None).run(
        segment_pipeline(
            mpmd_axis=mesh.mpmd_axis_name,
            submesh_size=len(mesh.rank_devices(0)),
            sharded=sharded,
        )
    )
    from jaxpp_mlir.planner.calibration import calibrated_costs
    from jaxpp_mlir.planner.segment_costs import segment_costs

    costs = segment_costs(module.operation)
    if calibrate:
        costs = calibrated_costs(x, mesh, costs)
    return _plan(module, _num_microbatches(module), mesh, memory_limit_bytes, costs)


def _plan(
    module: ir.Module,
    num_microbatches: int | None,
    mesh: MpmdMesh,
    memory_limit_bytes: int | None,
    costs: SegmentCosts | None = None,
) -> PipelinePlan:
    from jaxpp_mlir.planner.plan_pipeline import machine_for, plan_candidates
    from jaxpp_mlir.planner.segment_costs import segment_costs

    if num_microbatches is None:
        raise ScheduleError(
            "planning a pipeline needs a treduce microbatch loop: the step has none"
        )
    return plan_candidates(
        costs if costs is not None else segment_costs(module.operation),
        num_microbatches,
        mesh.mpmd_dim,
        memory_limit_bytes=memory_limit_bytes,
        machine=machine_for(mesh),
    )


def _num_stages(module: ir.Module) -> int:
    return jaxpp.get_int_attr(module.operation, jaxpp.NUM_STAGES_ATTR) or 0


def _stage_split(
    module: ir.Module,
    schedule: Schedule | None,
    stage_split: tuple[int, ...] | None,
    num_microbatches: int | None,
    memory_limit_bytes: int | None,
    mesh: MpmdMesh,
) -> tuple[tuple[int, ...], SplitEstimate | None]:
    """The segments per stage: the one given (checked against the schedule), else the
    split of the schedule's stages with the least simulated step time."""
    from jaxpp_mlir.planner.plan_pipeline import machine_for
    from jaxpp_mlir.planner.segment_costs import segment_costs
    from jaxpp_mlir.planner.stage_split import choose_split, estimate_split

    if stage_split is not None:
        split = tuple(stage_split)
        if not split or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in split):
            raise ScheduleError(
                f"stage_split must be a tuple of positive ints (segments per stage), got "
                f"{stage_split!r}"
            )
        if schedule is not None and len(split) != schedule.num_stages:
            raise ScheduleError(
                f"stage_split {split} makes {len(split)} stages but the schedule {schedule!r} "
                f"has {schedule.num_stages}"
            )
        if schedule is None or num_microbatches is None:
            return split, None
        costs = segment_costs(module.operation)
        if sum(split) != costs.num_segments:
            return split, None  # jaxpp-merge-stages names the mismatch, located
        return split, estimate_split(schedule, split, costs, num_microbatches, machine_for(mesh))
    assert schedule is not None
    if num_microbatches is None:
        raise ScheduleError(
            f"the program has {_num_stages(module)} marked segments and the schedule "
            f"{schedule!r} {schedule.num_stages} stages: merging segments into stages needs "
            "a treduce microbatch loop to balance; give stage_split= to merge by hand"
        )
    best = choose_split(
        schedule,
        segment_costs(module.operation),
        num_microbatches,
        memory_limit_bytes=memory_limit_bytes,
        machine=machine_for(mesh),
    )
    return best.split, best


def _num_microbatches(module: ir.Module) -> int | None:
    main = find_main(module)
    loop = find_loop(main) if main is not None else None
    if loop is None:
        return None
    return jaxpp.get_int_attr(loop, jaxpp.LOOP_NUM_MICROBATCHES_ATTR)


def _treduce_schedule_text(module: ir.Module) -> str:
    """The schedule ``treduce(..., schedule=...)`` recorded on its loop marker ("" if none)."""
    for op in walk(module.operation):
        if jaxpp.is_loop_marker(op):
            return jaxpp.loop_schedule(op)
    return ""


def _pick_schedule(
    given: Schedule | None, treduce_text: str, num_stages: int, mesh: MpmdMesh
) -> Schedule:
    """``partition``'s schedule, else the one given to ``treduce``, else the default."""
    requested = (
        schedule_from_text(treduce_text, num_stages=num_stages, mpmd_dim=mesh.mpmd_dim)
        if treduce_text and (given is None or repr(given) != treduce_text)
        else None
    )
    if given is None:
        return requested or _default_schedule(num_stages, mesh)
    if requested is not None and repr(requested) != repr(given):
        raise ScheduleError(
            f"treduce was given the schedule {treduce_text!r} but partition was given "
            f"{given!r}: give the schedule in one place, or the same in both"
        )
    return given


def _default_schedule(num_stages: int, mesh: MpmdMesh) -> Schedule:
    if num_stages > mesh.mpmd_dim:
        raise ScheduleError(
            f"the program has {num_stages} stages but the mesh has only {mesh.mpmd_dim} "
            "submeshes along the mpmd axis: pass a schedule that places several stages per "
            "rank (Interleaved1F1B, DualPipeV) or use a larger mesh"
        )
    return Std1F1B(num_stages)


def _check_schedule(
    schedule: Schedule, num_stages: int, num_microbatches: int, mesh: MpmdMesh
) -> None:
    if schedule.num_stages != num_stages:
        raise ScheduleError(
            f"the schedule {schedule!r} has {schedule.num_stages} stages but the program has "
            f"{num_stages} (one per pipeline_enter_stage marker)"
        )
    if schedule.mpmd_dim > mesh.mpmd_dim:
        raise ScheduleError(
            f"the schedule {schedule!r} needs {schedule.mpmd_dim} ranks but the mesh has "
            f"{mesh.mpmd_dim} submeshes along '{mesh.mpmd_axis_name}'"
        )
    # The plan builder simulates the schedule (and so validates it) once, later.


def _import(x: Any) -> tuple[ir.Module, TreeInfo]:
    """A private copy of the input in jaxpp_mlir's context, plus pytree information."""
    tree_info = TreeInfo()
    lowered_by_jax = hasattr(x, "compiler_ir") and hasattr(x, "in_tree")
    if lowered_by_jax:
        tree_info = _lowered_tree_info(x)
        x = x.compiler_ir("stablehlo")
    if isinstance(x, ir.Module):
        x = ir_context.bytecode(x)
    if not isinstance(x, (str, bytes)):
        raise TypeError(
            "partition() takes a jax.stages.Lowered, an ir.Module or MLIR text, "
            f"got {type(x).__name__}"
        )
    # JAX's own lowering nests as deep as the traced program, far below the limit.
    return ir_context.parse_module(x, check_depth=not lowered_by_jax), tree_info


def _lowered_tree_info(lowered: Any) -> TreeInfo:
    in_tree = lowered.in_tree
    from jaxpp_mlir import _jax_compat

    compile_args = _jax_compat.lowered_compile_args(lowered)
    kept = compile_args.get("kept_var_idx")
    kept_inputs = None
    if kept is not None and len(kept) != in_tree.num_leaves:
        kept_inputs = tuple(sorted(kept))
    out_dtypes = [leaf.dtype for leaf in jax.tree_util.tree_leaves(lowered.out_info)]
    key_impls = None
    if any(jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key) for dtype in out_dtypes):
        key_impls = tuple(
            _jax_compat.prng_key_impl(dtype)
            if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)
            else None
            for dtype in out_dtypes
        )
    return TreeInfo(in_tree, lowered.out_tree, kept_inputs, key_impls)


def _print(module: ir.Module) -> str:
    return module.operation.get_asm(enable_debug_info=True)


def _write(directory: str | os.PathLike, name: str, text: str) -> None:
    with open(os.path.join(directory, name), "w") as handle:
        handle.write(text)
