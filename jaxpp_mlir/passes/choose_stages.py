"""jaxpp-choose-stages: make stages of the segments and choose the schedule."""

from __future__ import annotations

import dataclasses
from typing import Any

from jax.interpreters.mlir import ir

from jaxpp_mlir import diagnostics
from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.dialect.records import parse_record
from jaxpp_mlir.errors import ScheduleError
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.passes.base import Evidence, ModulePass, find_untagged, register_pass
from jaxpp_mlir.runtime import records
from jaxpp_mlir.schedules import AutoFused, Schedule, Std1F1B
from jaxpp_mlir.schedules import record as record_module
from jaxpp_mlir.schedules.record import (
    Record,
    is_bare_name,
    name_record,
    schedule_from_record,
    schedule_record,
)

#: The ``schedule`` option that asks the planner for the schedule and the split.
AUTO = record_module.AUTO


@register_pass
@records.frozen
class ChooseStages(ModulePass):
    """Make stages of the segments (one or more neighbouring ones each) and choose the schedule.

    The stage decision of the pipeline: the segmenter before it (jaxpp-assign-segments)
    cut the step into segments; this pass decides which segments run as one stage, and,
    for a step with a treduce microbatch loop, the schedule, recorded on the module for
    the passes after it (jaxpp-split-backward, jaxpp-place-stages) and the plan.

    The schedule is ``schedule`` if given, else the one treduce recorded on the loop
    (both given: they must be the same), else ``Std1F1B`` with one stage per rank;
    ``fuse-tasks`` wraps it in ``AutoFused``. A built-in name (``schedule=GPipe``, or
    treduce's ``schedule="GPipe"``) takes the other's stage count, else one stage per
    ``stage-split`` entry, else per segment. The stages are then:

    - ``stage-split`` (segments per stage, e.g. ``2,1,1,4``) if given: its length must be
      the schedule's stage count and its entries must sum to the segment count;
    - with fewer stages in the schedule than segments, the split the planner
      (``planner.stage_split.choose_split``) simulates fastest among those whose estimated
      peak bytes per rank fit ``memory-limit``;
    - else one segment per stage.

    A ``memory-limit`` is honoured or refused: a forced split, or one segment per stage,
    is estimated and refused (located) where its estimated peak exceeds the limit.
    ``schedule=auto`` takes the schedule and split the planner ranks best for
    ``mpmd-dim`` ranks (``planner.plan_pipeline``); where none fits ``memory-limit``, the
    error lists the candidates of least estimated peak. The planner estimates each segment's
    cost from its StableHLO ops (``planner.segment_costs``), on a machine whose ranks
    compute at once unless ``parallel-ranks`` says how many do. Without a loop there is
    no schedule: a ``schedule`` is an error, and the stages are ``stage-split``'s or one
    per segment.

    Precondition: every op of the stage block but its terminator carries
    ``jaxpp.segment`` and ``jaxpp.kind``, the module ``jaxpp.num_segments`` (a segmenter
    ran); no stages are chosen yet.
    Postcondition: each of those ops carries ``jaxpp.stage`` (the stage of its segment)
    in place of ``jaxpp.segment``; a loop of layers (``jaxpp.segments``, whose iterations
    are segments: jaxpp-segment-layer-scans) carries ``jaxpp.stage_rows`` (which stage
    takes which of its segments) and as its stage the one its first iteration runs in;
    the module carries ``jaxpp.num_stages`` and ``jaxpp.stage_split`` (segments per
    stage, summing to ``jaxpp.num_segments``); with a loop, the module carries the chosen
    schedule (``jaxpp.schedule``, a dictionary: ``schedules.record``) of
    ``jaxpp.num_stages`` stages on at most ``mpmd-dim`` ranks, and the loop no longer
    carries treduce's; where the planner chose or estimated the
    split, the module carries its estimate (``jaxpp.stage_estimate``). Schedule and split
    errors are located at the loop and are ``ScheduleError``s from ``partition``.
    """

    name = "jaxpp-choose-stages"
    schedule: str = dataclasses.field(
        default="",
        metadata={
            "help": "the schedule: empty (treduce's, else Std1F1B), 'auto' (the planner's "
            'best), a built-in name (GPipe) or a record ({kind = "Std1F1B", num_stages = 4})'
        },
    )
    mpmd_dim: int = dataclasses.field(
        default=0, metadata={"help": "ranks along the mpmd axis (0: unchecked)", "min": 0}
    )
    stage_split: tuple[int, ...] = dataclasses.field(
        default=(),
        metadata={"help": "segments per stage, comma separated (empty: chosen)", "min": 1},
    )
    memory_limit: int = dataclasses.field(
        default=0,
        metadata={"help": "estimated peak bytes per rank the split must fit (0: any)", "min": 0},
    )
    fuse_tasks: bool = dataclasses.field(
        default=False, metadata={"help": "fuse back-to-back tasks of a rank (AutoFused)"}
    )
    parallel_ranks: int = dataclasses.field(
        default=0,
        metadata={"help": "ranks the planner assumes compute at once (0: all)", "min": 0},
    )

    # A module past jaxpp-outline-stages or jaxpp-split-backward, which need the stages,
    # carries jaxpp.num_stages: ``finished`` refuses it.
    requires = ("jaxpp-assign-segments",)

    @classmethod
    def finished(cls, module: ir.Operation) -> Evidence | None:
        if jaxpp.NUM_STAGES_ATTR not in module.attributes:
            return None
        return Evidence(module, f"the stages are already chosen (found {jaxpp.NUM_STAGES_ATTR})")

    @classmethod
    def unfinished(cls, module: ir.Operation) -> Evidence | None:
        return find_untagged(module, jaxpp.has_stage, "stage assignment", jaxpp.NUM_STAGES_ATTR)

    def run(self, module: ir.Operation) -> None:
        main = ir_utils.get_main(module)
        loop = ir_utils.find_loop(main)
        choice = _Choice(self, module, loop)
        schedule, split, estimate = choice.decide()
        block = jaxpp.loop_body(loop) if loop is not None else ir_utils.body(main)
        _set_stages(ir_utils.block_ops(block)[:-1], split)
        jaxpp.set_int_attr(module, jaxpp.NUM_STAGES_ATTR, len(split))
        jaxpp.set_stage_split(module, split)
        if loop is not None:
            jaxpp.clear_loop_schedule(loop)
        if schedule is not None:
            jaxpp.set_schedule(module, choice.record(schedule))
        if estimate is not None:
            jaxpp.set_stage_estimate(module, _estimate_record(estimate))


class _Choice:
    """One run's decision: the schedule, the split and the planner's estimate of it."""

    def __init__(self, options: ChooseStages, module: ir.Operation, loop: ir.Operation | None):
        self.options = options
        self.module = module
        # Located at the treduce call; without a loop, at the line that lowered the step.
        self.blamed = (
            loop
            if loop is not None
            else diagnostics.step_call_location(ir_utils.get_main(module), "the step")
        )
        self.block = (
            jaxpp.loop_body(loop) if loop is not None else ir_utils.body(ir_utils.get_main(module))
        )
        self.num_segments = jaxpp.get_int_attr(module, jaxpp.NUM_SEGMENTS_ATTR) or 0
        self.num_microbatches = (
            jaxpp.get_int_attr(loop, jaxpp.LOOP_NUM_MICROBATCHES_ATTR) if loop else None
        )
        self.requested = jaxpp.loop_schedule(loop) if loop is not None else None
        self._costs: Any = None

    def fail(self, message: str) -> diagnostics.PassFailed:
        return diagnostics.error(self.blamed, message, ScheduleError)

    def decide(self) -> tuple[Schedule | None, tuple[int, ...], Any]:
        try:
            if self.options.schedule.strip() == AUTO:
                return self._auto()
            return self._given()
        except ScheduleError as error:  # the schedules' and the planner's own checks
            raise self.fail(str(error)) from None

    def record(self, schedule: Schedule) -> Record:
        try:
            return schedule_record(schedule)
        except ScheduleError as error:
            raise self.fail(str(error)) from None

    def _auto(self) -> tuple[Schedule, tuple[int, ...], Any]:
        from jaxpp_mlir.planner.plan_pipeline import plan_module
        from jaxpp_mlir.planner.stage_split import estimate_split

        if self.options.stage_split:
            raise self.fail(
                'schedule="auto" chooses the stage split: give stage_split= only with a schedule'
            )
        if self.options.mpmd_dim < 1:
            raise self.fail('schedule="auto" plans for a number of ranks: give mpmd-dim')
        best = plan_module(
            self.module,
            self.options.mpmd_dim,
            costs=self._segment_costs(),
            memory_limit_bytes=self.options.memory_limit or None,
            machine=self._machine(),
        ).best_fitting()
        if self.requested is not None:  # treduce's schedule must be the one chosen
            self._schedule(schedule_record(best.schedule), ())
        schedule, split = self._fused(best.schedule), best.stage_split
        if split == (1,) * len(split):
            return schedule, split, None
        machine = self._machine()
        return (
            schedule,
            split,
            estimate_split(
                best.schedule, split, self._segment_costs(), self.num_microbatches, machine
            ),
        )

    def _given(self) -> tuple[Schedule | None, tuple[int, ...], Any]:
        forced = self.options.stage_split
        given = self._given_record()
        if self.num_microbatches is None:
            if given is not None:
                raise self.fail(
                    "a schedule orders the microbatches of a treduce loop, but the step has none"
                )
            split = self._checked_sum(forced or (1,) * self.num_segments)
            if self.options.mpmd_dim and len(split) > self.options.mpmd_dim:
                raise self._more_stages_than_ranks(
                    split, "use a mesh with at least as many submeshes as stages"
                )
            return None, split, None
        schedule = self._schedule(given, forced)
        if schedule is None:
            schedule = self._default(len(forced) if forced else self.num_segments)
        split, estimate = self._split(schedule, forced)
        mpmd_dim = self.options.mpmd_dim
        if mpmd_dim and schedule.mpmd_dim > mpmd_dim:
            raise self.fail(
                f"the schedule {schedule!r} needs {schedule.mpmd_dim} ranks but the mesh has "
                f"{mpmd_dim} submeshes along the mpmd axis"
            )
        return self._fused(schedule), split, estimate

    def _given_record(self) -> Record | None:
        text = self.options.schedule.strip()
        if not text:
            return None
        if not text.startswith("{"):
            return name_record(text, auto=True)
        try:
            return parse_record(text)
        except ValueError as error:
            raise self.fail(f"jaxpp-choose-stages: option 'schedule': {error}") from None

    def _schedule(self, given: Record | None, forced: tuple[int, ...]) -> Schedule | None:
        """``partition``'s schedule, else treduce's: a bare name takes the other's stage
        count, else the forced split's, else the segment count."""
        named = [r for r in (given, self.requested) if r is not None]
        full = [schedule_from_record(r) for r in named if not is_bare_name(r)]
        num_stages = full[0].num_stages if full else len(forced) or self.num_segments
        mpmd_dim = self.options.mpmd_dim or None
        built = [schedule_from_record(r, num_stages=num_stages, mpmd_dim=mpmd_dim) for r in named]
        if len(built) == 2 and schedule_record(built[0]) != schedule_record(built[1]):
            raise self.fail(
                f"treduce was given the schedule {built[1]!r} but partition was given "
                f"{built[0]!r}: give the schedule in one place, or the same in both"
            )
        return built[0] if built else None

    def _default(self, num_stages: int) -> Schedule:
        mpmd_dim = self.options.mpmd_dim
        if mpmd_dim and num_stages > mpmd_dim:
            raise self._more_stages_than_ranks(
                (1,) * num_stages if num_stages == self.num_segments else None,
                "pass a schedule that places several stages per rank (Interleaved1F1B, "
                "DualPipeV) or use a larger mesh",
                num_stages,
            )
        return Std1F1B(num_stages)

    def _more_stages_than_ranks(
        self, split: tuple[int, ...] | None, advice: str, num_stages: int = 0
    ) -> diagnostics.PassFailed:
        """The error for stages beyond the mesh's ranks, at the marker that ends the first
        stage without a rank (``split``: segments per stage, None if not known)."""
        mpmd_dim = self.options.mpmd_dim
        num_stages = num_stages or len(split or ())
        marker = None
        if split is not None:
            marker = _forward_marker_of(self.block, sum(split[: mpmd_dim + 1]) - 1)
        located = (
            f" (the marker here ends stage {mpmd_dim}, the first without a rank)"
            if marker is not None
            else ""
        )
        return diagnostics.error(
            marker if marker is not None else self.blamed,
            f"the program has {num_stages} stages but the mesh has only {mpmd_dim} "
            f"submeshes along the mpmd axis{located}: {advice}",
            ScheduleError,
        )

    def _split(self, schedule: Schedule, forced: tuple[int, ...]) -> tuple[tuple[int, ...], Any]:
        from jaxpp_mlir.planner.stage_split import choose_split

        assert self.num_microbatches is not None
        if forced:
            if len(forced) != schedule.num_stages:
                raise self.fail(
                    f"stage_split {forced} makes {len(forced)} stages but the schedule "
                    f"{schedule!r} has {schedule.num_stages}"
                )
            split = self._checked_sum(forced)
            return split, self._within_limit(schedule, split)
        if schedule.num_stages > self.num_segments:
            cut_by = (
                "one per pipeline_enter_stage marker"
                if jaxpp.segmenter(self.module) is None
                else f"cut by {jaxpp.segmenter(self.module)}, starting at "
                + ", ".join(["the step", *jaxpp.segment_starts(self.module)])
            )
            raise self.fail(
                f"the schedule {schedule!r} has {schedule.num_stages} stages but the program "
                f"has {self.num_segments} ({cut_by})"
            )
        if schedule.num_stages == self.num_segments:
            split = (1,) * self.num_segments
            limited = self.options.memory_limit > 0
            return split, self._within_limit(schedule, split) if limited else None
        best = choose_split(
            schedule,
            self._segment_costs(),
            self.num_microbatches,
            memory_limit_bytes=self.options.memory_limit or None,
            machine=self._machine(),
        )
        return best.split, best

    def _within_limit(self, schedule: Schedule, split: tuple[int, ...]) -> Any:
        """The planner's estimate of ``split``, checked against ``memory-limit`` if given."""
        from jaxpp_mlir.planner.stage_split import check_fits, estimate_split

        assert self.num_microbatches is not None
        estimate = estimate_split(
            schedule, split, self._segment_costs(), self.num_microbatches, self._machine()
        )
        if self.options.memory_limit:
            check_fits(schedule, estimate, self.options.memory_limit)
        return estimate

    def _checked_sum(self, split: tuple[int, ...]) -> tuple[int, ...]:
        if sum(split) != self.num_segments:
            raise self.fail(
                f"stage split {list(split)} covers {sum(split)} marked segments but the "
                f"program has {self.num_segments}: give each stage's segment count so that "
                f"they sum to {self.num_segments}"
            )
        return split

    def _fused(self, schedule: Schedule) -> Schedule:
        if self.options.fuse_tasks and not isinstance(schedule, AutoFused):
            return AutoFused(schedule)
        return schedule

    def _segment_costs(self) -> Any:
        from jaxpp_mlir.planner.segment_costs import segment_costs

        if self._costs is None:
            self._costs = segment_costs(self.module)
        return self._costs

    def _machine(self) -> Any:
        from jaxpp_mlir.planner.stage_split import DEFAULT_MACHINE

        return dataclasses.replace(
            DEFAULT_MACHINE, parallel_ranks=self.options.parallel_ranks or None
        )


def _forward_marker_of(block: ir.Block, segment: int) -> ir.Operation | None:
    """The forward stage marker that ends ``segment`` (None if JAX dropped it)."""
    for op in ir_utils.block_ops(block):
        if (
            op.name in jaxpp.MARKER_OP_NAMES
            and jaxpp.is_stage_marker(op)
            and jaxpp.marker_direction(op) == jaxpp.FORWARD
            and jaxpp.get_segment(op) == segment
        ):
            return op
    return None


def _set_stages(top_ops: list[ir.Operation], split: tuple[int, ...]) -> None:
    """Replaces each op's ``jaxpp.segment`` by the ``jaxpp.stage`` of its segment (the
    attribute of a stage built once); a loop of layers gets its stage rows."""
    stage_of = [stage for stage, count in enumerate(split) for _ in range(count)]
    stage_attrs: dict[int, ir.Attribute] = {}
    for op in top_ops:
        attributes = op.attributes
        span = jaxpp.segment_range(op)
        if span is not None:
            _set_loop_stages(op, span, stage_of)
            continue
        stage = stage_of[ir.IntegerAttr(attributes[jaxpp.SEGMENT_ATTR]).value]
        attr = stage_attrs.get(stage)
        if attr is None:
            jaxpp.set_int_attr(op, jaxpp.STAGE_ATTR, stage)
            stage_attrs[stage] = attributes[jaxpp.STAGE_ATTR]
        else:
            attributes[jaxpp.STAGE_ATTR] = attr
        del attributes[jaxpp.SEGMENT_ATTR]


def _set_loop_stages(op: ir.Operation, span: tuple[int, int], stage_of: list[int]) -> None:
    """A loop of layers: which stage takes which of its segments (``jaxpp.stage_rows``),
    and as its ``jaxpp.stage`` the stage its first iteration runs in (jaxpp-split-layer-scans
    makes one loop per stage of it)."""
    first, count = span
    rows: list[tuple[int, int, int]] = []
    for offset in range(count):
        stage = stage_of[first + offset]
        if rows and rows[-1][0] == stage:
            rows[-1] = (stage, rows[-1][1], rows[-1][2] + 1)
        else:
            rows.append((stage, offset, 1))
    jaxpp.set_stage_rows(op, rows)
    starts = rows[0] if jaxpp.get_kind(op) == jaxpp.FORWARD else rows[-1]
    jaxpp.set_int_attr(op, jaxpp.STAGE_ATTR, starts[0])
    del op.attributes[jaxpp.SEGMENT_ATTR]


def _estimate_record(estimate: Any) -> Record:
    """A ``planner.stage_split.SplitEstimate`` as a record (plain ints and floats)."""
    return {
        "split": tuple(int(n) for n in estimate.split),
        "step_s": float(estimate.step_s),
        "bubble": float(estimate.bubble),
        "peak_bytes": tuple(int(n) for n in estimate.peak_bytes),
        "stage_forward_s": tuple(float(s) for s in estimate.stage_forward_s),
        "stage_backward_s": tuple(float(s) for s in estimate.stage_backward_s),
        "launches": int(estimate.launches),
    }
