"""Value numbering: every value of every microbatch gets one value id of the plan.

Program input ``i`` is value ``i``; the microbatch indices come next (one per
microbatch and rank that reads it); every other value is numbered when an
instruction defines it, or, for a ``jaxpp.chunk`` (rows of an input, placed as their
own value on the ranks that read them), when the builder meets it. A value the loop
body defines gets one id per microbatch; loop state read by microbatch ``m`` is what
microbatch ``m - 1`` yielded (the loop's initial value for the first)."""

from __future__ import annotations

from collections.abc import Iterable

from jax.interpreters.mlir import ir

from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.errors import PartitionError, ScheduleError
from jaxpp_mlir.runtime import records

from .refs import BodyValue, Fixed, LoopArgument, Ref

_NOTHING_DEFINED: dict[int, int] = {}  # the body ids of a microbatch not begun (never written)


@records.frozen(slots=True)
class Chunk:
    """A ``jaxpp.chunk``: rows ``[start, start + rows)`` of program input ``argument``,
    placed on ``ranks`` (its ``jaxpp.rank``, if any, and every rank reading it)."""

    argument: int
    start: int
    op: ir.Operation
    ranks: set[int]


@records.frozen(slots=True)
class Reads:
    """A loop task's inputs, sorted by how each is found in a microbatch."""

    fixed: tuple[int, ...]  # the value id of each input the same in every microbatch (or 0)
    this_microbatch: tuple[tuple[int, int], ...]  # (position, body index) of body values
    # (position, loop argument, body index) of loop states whose next version the body
    # yields: in a microbatch after the first, what the previous one yielded.
    previous: tuple[tuple[int, int, int], ...]
    others: tuple[tuple[int, int], ...]  # (position, loop argument) of the other inputs


class ValueNumbering:
    """Value ids of a ``@main`` block, per microbatch, and the ranks reading each input."""

    def __init__(self, block: ir.Block):
        self.ids: dict[ir.Value, int] = {}  # values outside the loop body
        self.num_inputs = len(list(block.arguments))
        self.input_ranks: dict[int, set[int]] = {i: set() for i in range(self.num_inputs)}
        self.index_ids = _number_index_inputs(block, first_id=self.num_inputs)
        self.next_id = self.first_defined = self.num_inputs + len(self.index_ids)
        self.ranks: list[int] = []  # the rank of each defined value, from first_defined on
        self.channels: dict[tuple[int, int | None], int] = {}
        self.loop: ir.Operation | None = None
        self.loop_arguments: dict[ir.Value, int] = {}
        self.local: dict[ir.Value, int] = {}  # loop body value -> its index in the body
        # Microbatch -> body index -> value id, for the body values defined so far.
        self.body_ids: dict[int | None, dict[int, int]] = {}
        self.state_sources: list[Ref] = []  # what the body yields, per loop state
        self.initial_state: dict[tuple[int, int], int] = {}  # (state, rank) -> id
        self.chunks: dict[int, Chunk] = {}  # value id of a jaxpp.chunk -> its rows
        for index, argument in enumerate(block.arguments):
            self.ids[argument] = index

    def chunk(self, op: ir.Operation) -> int:
        """Numbers a ``jaxpp.chunk`` of an argument of ``@main``: a value no instruction
        defines, placed from the caller's array on its rank and on the ranks that read it."""
        source = op.operands[0]
        argument = self.ids.get(source)
        if argument is None or argument >= self.num_inputs:
            raise PartitionError(
                f"jaxpp.chunk at {op.location} takes rows of a value that is not an argument "
                "of @main: a chunk splits a program input"
            )
        start, rows = jaxpp.chunk_rows(op)
        length = ir.RankedTensorType(source.type).shape[0]
        if start < 0 or rows < 1 or start + rows > length:
            raise PartitionError(
                f"jaxpp.chunk at {op.location} takes rows [{start}, {start + rows}) of an "
                f"argument of {length} rows"
            )
        rank = jaxpp.get_rank(op) if jaxpp.has_rank(op) else None
        value_id = self.define(op.results[0], -1 if rank is None else rank)
        self.chunks[value_id] = Chunk(argument, start, op, set() if rank is None else {rank})
        return value_id

    def chunk_rank(self, value_id: int, where: str) -> int:
        """The one rank holding chunk ``value_id`` (its ``jaxpp.rank``, else its readers')."""
        chunk = self.chunks[value_id]
        if jaxpp.has_rank(chunk.op):
            return jaxpp.get_rank(chunk.op)
        if len(chunk.ranks) != 1:
            read = f"read on ranks {sorted(chunk.ranks)}" if chunk.ranks else "read by no task"
            raise PartitionError(
                f"jaxpp.chunk at {chunk.op.location} ({where}) is {read}: give it a "
                f"{jaxpp.RANK_ATTR} to say which rank holds it"
            )
        return next(iter(chunk.ranks))

    def enter_loop(self, loop: ir.Operation) -> list[ir.Operation]:
        """Numbers the loop body's values by position; returns the body's ops."""
        body = jaxpp.loop_body(loop)
        self.loop = loop
        self.loop_arguments = {a: i for i, a in enumerate(body.arguments)}
        body_ops = [op.operation for op in body.operations]
        for op in body_ops:
            for result in op.results:
                self.local[result] = len(self.local)
        self.state_sources = [self._state_source(v) for v in body_ops[-1].operands]
        return body_ops

    def bind_loop_results(self, loop: ir.Operation, last: int) -> None:
        """The loop's results are what its last microbatch ``last`` yielded."""
        for index, result in enumerate(loop.results):
            source = self.state_sources[index]
            if type(source) is LoopArgument:
                raise PartitionError(
                    f"loop state {index} is yielded straight from a loop argument: the loop "
                    "state must be computed by the loop's tasks"
                )
            if type(source) is BodyValue:
                self.ids[result] = self.body_ids[last][source.index]
            else:
                self.ids[result] = source.value

    def define(self, value: ir.Value, rank: int, microbatch: int | None = None) -> int:
        value_id = self.next_id
        self.next_id += 1
        if value in self.local:
            self._defined_in(microbatch)[self.local[value]] = value_id
        else:
            self.ids[value] = value_id
        self.ranks.append(rank)
        return value_id

    def define_slots(
        self, slots: tuple[int, ...], rank: int, microbatch: int | None
    ) -> tuple[int, ...]:
        """Fresh value ids for the body values ``slots`` in ``microbatch``."""
        first = self.next_id
        self.next_id += len(slots)
        value_ids = range(first, self.next_id)
        self._defined_in(microbatch).update(zip(slots, value_ids, strict=False))  # as many
        self.ranks += [rank] * len(slots)
        return tuple(value_ids)

    def _defined_in(self, microbatch: int | None) -> dict[int, int]:
        """Body index -> value id of the body values ``microbatch`` defined so far."""
        ids = self.body_ids.get(microbatch)
        if ids is None:
            ids = self.body_ids[microbatch] = {}
        return ids

    def rank_of(self, value_id: int) -> int:
        """The rank that defines ``value_id``; 0 for a program input or microbatch index;
        a chunk's rank for a chunk."""
        if value_id < self.first_defined:
            return 0
        if value_id in self.chunks:
            return self.chunk_rank(value_id, "returned")
        return self.ranks[value_id - self.first_defined]

    def use(self, value: ir.Value, rank: int, microbatch: int | None = None) -> int:
        value_id = self._fixed_id(value, rank)
        if value_id is None:  # a loop body value, or not computed yet
            return self.resolve(self.ref(value, rank), rank, microbatch)
        return value_id

    def _fixed_id(self, value: ir.Value, rank: int) -> int | None:
        """The id of ``value`` if it is the same in every microbatch (a program input's
        read on ``rank`` recorded), else None."""
        value_id = self.ids.get(value)
        if value_id is not None:
            if value_id < self.num_inputs:
                self.input_ranks[value_id].add(rank)
            elif value_id in self.chunks:
                self.chunks[value_id].ranks.add(rank)
        return value_id

    def ref(self, value: ir.Value, rank: int) -> Ref:
        """How ``value``, read on ``rank``, is named in every microbatch."""
        value_id = self._fixed_id(value, rank)
        if value_id is not None:
            return Fixed(value_id)
        position = self.loop_arguments.get(value)
        if position is not None:
            return LoopArgument(position)
        index = self.local.get(value)
        if index is not None:
            return BodyValue(index)
        raise ScheduleError(
            f"the schedule runs a task on rank {rank} before the task that computes "
            "one of its inputs"
        )

    def resolve(self, ref: Ref, rank: int, microbatch: int | None) -> int:
        """The value id of ``ref`` in ``microbatch``."""
        if type(ref) is Fixed:
            return ref.value
        if type(ref) is BodyValue:
            value_id = self.body_ids.get(microbatch, _NOTHING_DEFINED).get(ref.index)
            if value_id is None:
                raise ScheduleError(
                    f"the schedule runs a task of microbatch {microbatch} on rank {rank} "
                    "before the task that computes one of its inputs"
                )
            return value_id
        return self._loop_argument(ref.position, rank, microbatch)

    def reads(self, operands: Iterable[ir.Value], rank: int) -> Reads:
        """How a loop task on ``rank`` finds each of its ``operands`` in a microbatch (the
        inputs it reads are recorded, as by ``ref``)."""
        fixed: list[int] = []
        this_microbatch, previous, others = [], [], []
        for position, value in enumerate(operands):
            value_id = self._fixed_id(value, rank)
            if value_id is not None:
                fixed.append(value_id)
                continue
            fixed.append(0)
            index = self.local.get(value)
            if index is not None:
                this_microbatch.append((position, index))
                continue
            argument = self.ref(value, rank).position  # a loop argument (or the error)
            source = self.state_sources[argument - 1] if argument else None
            if type(source) is BodyValue:
                previous.append((position, argument, source.index))
            else:
                others.append((position, argument))
        return Reads(tuple(fixed), tuple(this_microbatch), tuple(previous), tuple(others))

    def resolve_all(self, reads: Reads, rank: int, microbatch: int | None) -> tuple[int, ...]:
        """The value ids of a loop task's inputs ``reads`` in ``microbatch``."""
        value_ids = list(reads.fixed)
        current = self.body_ids.get(microbatch, _NOTHING_DEFINED)
        for position, index in reads.this_microbatch:
            value_id = current.get(index)
            if value_id is None:  # not computed yet: the error
                value_id = self.resolve(BodyValue(index), rank, microbatch)
            value_ids[position] = value_id
        if reads.previous:
            before = (
                self.body_ids.get(microbatch - 1, _NOTHING_DEFINED)
                if microbatch
                else _NOTHING_DEFINED
            )
            for position, argument, index in reads.previous:
                value_id = before.get(index)
                if value_id is None:  # the loop's initial value, or the error
                    value_id = self._loop_argument(argument, rank, microbatch)
                value_ids[position] = value_id
        for position, argument in reads.others:
            value_ids[position] = self._loop_argument(argument, rank, microbatch)
        return tuple(value_ids)

    def _loop_argument(self, position: int, rank: int, microbatch: int | None) -> int:
        if position == 0:
            return self.index_ids[(microbatch, rank)]
        if microbatch == 0:
            key = (position, rank)
            if key not in self.initial_state:
                initial = self.ref(self.loop.operands[position - 1], rank)
                self.initial_state[key] = self.resolve(initial, rank, None)
            return self.initial_state[key]
        source = self.state_sources[position - 1]
        if type(source) is Fixed and source.value < self.num_inputs:
            self.input_ranks[source.value].add(rank)
        if type(source) is BodyValue and source.index not in self.body_ids.get(
            microbatch - 1, _NOTHING_DEFINED
        ):
            raise ScheduleError(
                f"the schedule runs microbatch {microbatch} before microbatch {microbatch - 1} "
                f"on rank {rank}, but both update the same accumulator (loop state "
                f"{position - 1}): tasks of one stage must run in microbatch order"
            )
        return self.resolve(source, rank, microbatch - 1)

    def _state_source(self, value: ir.Value) -> Ref:
        """What the loop body yields for one state, as a ref (no input use recorded)."""
        if value in self.loop_arguments:
            return LoopArgument(self.loop_arguments[value])
        if value in self.local:
            return BodyValue(self.local[value])
        return Fixed(self.ids[value])

    def channel(self, channel: int, microbatch: int | None) -> int:
        """The plan's channel for the IR's ``channel`` in ``microbatch``."""
        channels = self.channels
        return channels.setdefault((channel, microbatch), len(channels))


def _number_index_inputs(block: ir.Block, *, first_id: int) -> dict[tuple[int, int], int]:
    """Value ids for the microbatch index on each rank whose loop tasks read it."""
    for op in block.operations:
        if not jaxpp.is_loop(op):
            continue
        body = jaxpp.loop_body(op)
        ranks = set()
        for use in body.arguments[0].uses:
            owner = use.owner.operation if isinstance(use.owner, ir.OpView) else use.owner
            ranks.add(jaxpp.get_rank(owner))
        count = jaxpp.get_int_attr(op, jaxpp.LOOP_NUM_MICROBATCHES_ATTR)
        pairs = [(m, r) for m in range(count) for r in sorted(ranks)]
        return {pair: first_id + i for i, pair in enumerate(pairs)}
    return {}
