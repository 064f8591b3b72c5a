"""jaxpp-place-stages: put every jaxpp.task on a rank (a submesh along the mpmd axis)."""

from __future__ import annotations

import dataclasses

from jax.interpreters.mlir import ir

from jaxpp_mlir import diagnostics
from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.errors import ScheduleError
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.passes.base import (
    Evidence,
    ModulePass,
    find_in_stage_block,
    find_main,
    register_pass,
)
from jaxpp_mlir.runtime import records
from jaxpp_mlir.schedules.record import schedule_from_record


@register_pass
@records.frozen
class PlaceStages(ModulePass):
    """Place every stage on a rank: the rank the chosen schedule gives it, else s % mpmd-dim.

    The schedule is the one jaxpp-choose-stages recorded on the module
    (``jaxpp.schedule``); a step without a microbatch loop has none.

    Precondition: ``@main`` holds ``jaxpp.task`` ops (jaxpp-outline-stages), none
    of them placed yet, and the module carries ``jaxpp.num_stages``.
    Postcondition: every ``jaxpp.task`` of the stage block carries
    ``jaxpp.rank`` in ``[0, mpmd-dim)``; the module carries
    ``jaxpp.num_ranks``; a ``jaxpp.loop`` carries ``jaxpp.state_ranks``, the
    rank holding each piece of its state (an error if a piece of state is
    read or updated on two ranks); every ``jaxpp.chunk`` (an input's rows,
    jaxpp-split-stacked-values) carries ``jaxpp.rank``: the rank of the stage
    holding it (its ``jaxpp.stage``), else the lowest rank of the tasks reading it
    (rank 0 if none does). Without a
    schedule, more stages than ranks is an error (placing several
    stages on one rank is what interleaved schedules do, and they say so).
    """

    name = "jaxpp-place-stages"
    mpmd_dim: int = dataclasses.field(
        default=0, metadata={"help": "number of ranks (0: one rank per stage)", "min": 0}
    )

    requires = ("jaxpp-choose-stages", "jaxpp-outline-stages")

    @classmethod
    def unfinished(cls, module: ir.Operation) -> Evidence | None:
        main = find_main(module)
        if main is None:
            return None
        loop = ir_utils.find_loop(main)
        for op in ir_utils.body(main).operations:
            is_loop = loop is not None and op.operation == loop
            nested = jaxpp.loop_body(op.operation).operations if is_loop else [op]
            for task in (o.operation for o in nested):
                if jaxpp.is_task(task) and not jaxpp.has_rank(task):
                    return Evidence(task, "task has no rank")
        return None

    @classmethod
    def finished(cls, module: ir.Operation) -> Evidence | None:
        return find_in_stage_block(
            module,
            lambda op: (
                "the stages are already placed (found jaxpp.rank on jaxpp.task "
                f"@{jaxpp.task_callee(op)})"
                if jaxpp.is_task(op) and jaxpp.has_rank(op)
                else None
            ),
        )

    def run(self, module: ir.Operation) -> None:
        main = ir_utils.get_main(module)
        num_stages = jaxpp.get_int_attr(module, jaxpp.NUM_STAGES_ATTR) or 0
        if num_stages < 1:
            raise diagnostics.error(
                module, f"jaxpp.num_stages is {num_stages}: run jaxpp-choose-stages to set it"
            )
        num_ranks = self.mpmd_dim or num_stages  # mpmd-dim >= 0 (ModulePass.validate)
        record = jaxpp.get_schedule(module)
        if record is not None:
            placement = _schedule_placement(module, record, num_stages, num_ranks)
        else:
            if num_stages > num_ranks:
                raise diagnostics.error(
                    module,
                    f"the program has {num_stages} stages but the mesh has only {num_ranks} "
                    "submeshes along the mpmd axis: use a mesh with at least as many "
                    "submeshes as stages, or a schedule that places several stages per rank",
                )
            placement = [stage % num_ranks for stage in range(num_stages)]
        for op in ir_utils.stage_block(main).operations:
            op = op.operation
            if jaxpp.is_task(op):
                stage = jaxpp.get_stage(op)
                if not 0 <= stage < num_stages:
                    raise diagnostics.error(
                        op, f"task of stage {stage} in a program of {num_stages} stage(s)"
                    )
                jaxpp.set_rank(op, placement[stage])
        loop = ir_utils.find_loop(main)
        if loop is not None:
            jaxpp.set_state_ranks(loop, _state_ranks(loop))
        for op in ir_utils.body(main).operations:
            op = op.operation
            if jaxpp.is_chunk(op):
                jaxpp.set_rank(op, _chunk_rank(op, placement, num_stages))
        jaxpp.set_int_attr(module, jaxpp.NUM_RANKS_ATTR, num_ranks)


def _schedule_placement(
    module: ir.Operation, record: dict, num_stages: int, num_ranks: int
) -> list[int]:
    """The rank of each stage in the schedule the module records (a located error if it
    does not fit the program's stages or the ranks)."""
    try:
        schedule = schedule_from_record(record)
    except ScheduleError as error:
        raise diagnostics.error(module, f"the module's {jaxpp.SCHEDULE_ATTR}: {error}") from None
    if schedule.num_stages != num_stages:
        raise diagnostics.error(
            module,
            f"the schedule {schedule!r} places {schedule.num_stages} stages but the program "
            f"has {num_stages}",
        )
    placement = [schedule.stage_rank(stage) for stage in range(num_stages)]
    bad = [rank for rank in placement if rank >= num_ranks]
    if bad:
        raise diagnostics.error(
            module,
            f"the schedule {schedule!r} places a stage on rank {bad[0]}, outside [0, {num_ranks})",
        )
    return placement


def _chunk_rank(chunk: ir.Operation, placement: list[int], num_stages: int) -> int:
    """The rank of the stage holding ``chunk``, else of the first task reading it."""
    if jaxpp.has_stage(chunk):
        stage = jaxpp.get_stage(chunk)
        if not 0 <= stage < num_stages:
            raise diagnostics.error(
                chunk, f"'{chunk.name}' held by stage {stage} in a program of {num_stages} stage(s)"
            )
        return placement[stage]
    readers = [ir_utils.use_owner(use) for use in chunk.results[0].uses]
    ranks = [jaxpp.get_rank(r) for r in readers if jaxpp.is_task(r) and jaxpp.has_rank(r)]
    return min(ranks, default=0)


def _state_ranks(loop: ir.Operation) -> list[int]:
    """The rank holding each piece of loop state: the one task that reads and updates it."""
    body = jaxpp.loop_body(loop)
    terminator = body.operations[-1].operation
    ranks = []
    for index, (argument, update) in enumerate(
        zip(list(body.arguments)[1:], terminator.operands, strict=True)
    ):
        readers = {
            jaxpp.get_rank(ir_utils.top_level_user(ir_utils.use_owner(u), body))
            for u in argument.uses
            if ir_utils.use_owner(u) != terminator
        }
        producer = ir_utils.defining_op(update)
        writers = (
            {jaxpp.get_rank(producer)} if producer is not None and producer.block == body else set()
        )
        holders = readers | writers
        if len(holders) > 1:
            raise diagnostics.error(
                loop,
                f"loop state {index} is read or updated on ranks {sorted(holders)}: the state of "
                "the microbatch loop (an accumulator) must stay on one rank",
            )
        ranks.append(holders.pop() if holders else 0)
    return ranks
