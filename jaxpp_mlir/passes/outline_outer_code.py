"""jaxpp-outline-outer-code: place and outline the code before and after the loop."""

from __future__ import annotations

import dataclasses
import math

from jax.interpreters.mlir import ir

from jaxpp_mlir import diagnostics
from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.passes import outlining
from jaxpp_mlir.passes.base import ModulePass, register_pass
from jaxpp_mlir.plan.specs import tensor_spec
from jaxpp_mlir.runtime import records
from jaxpp_mlir.runtime.observation.memory import spec_bytes


@register_pass
@records.frozen
class OutlineOuterCode(ModulePass):
    """Place the code before and after the microbatch loop on ranks and outline it into tasks.

    Code after the loop (the optimizer update, loss reductions) runs where its
    inputs live: an op goes to the rank, among those holding its operands (a
    loop result lives on the rank of its state), that receives the fewest
    elements from other ranks (on a tie, the rank of its earliest operand);
    broadcasts count as the value they broadcast and run on the ranks of
    their consumers. So ``p - lr * g`` runs where ``g`` lives even when the
    scalar ``lr`` comes from another rank, and only ``lr`` is sent.

    Code that reads only arguments of ``@main`` (before the loop: casts
    of parameters; after it: an optimizer's step count and bias corrections)
    runs on the ranks that consume it; an op consumed on several ranks is
    recomputed on each of them when that costs no more than sending its
    result: an elementwise or data-movement op (work linear in its result,
    like a transfer), or any op on at most 1024 elements. Other ops
    (contractions, reductions, sorts...) run once, on the lowest consuming
    rank, and their results are sent. Constants are copied where needed.
    Ops are grouped into one task per (before/after, phase, rank), where the
    phase grows by one each time a value crosses ranks, so tasks stay in a
    topological order.

    A result of ``@main`` that such a recomputed op gives (an optimizer's new
    step count) and that is at most ``replicate-max-bytes`` bytes (default
    1024; 0 turns this off; ``partition`` takes it from ``PartitionOptions``,
    ``JAXPP_MLIR_REPLICATE_MAX_BYTES`` in the environment) is returned from every rank holding a
    copy: the return reads a ``jaxpp.replicated`` of the copies, so the step's
    output lives on every rank that reads it and comes back as an input
    without being copied again.

    A ``jaxpp.chunk`` (rows of an input, jaxpp-split-stacked-values) is read
    like an argument of ``@main`` held by its rank (jaxpp-place-stages): ops
    reading pieces of a stacked parameter run on the rank of those pieces. A
    ``jaxpp.assemble`` stays read only by the return, its operands computed on
    their ranks.

    Precondition: the stage block is outlined and placed (jaxpp.loop carries
    ``jaxpp.state_ranks``, every ``jaxpp.chunk`` ``jaxpp.rank``); without a
    ``jaxpp.loop`` there is nothing to do.
    Postcondition: ``@main`` holds only ``jaxpp.chunk`` ops, ``jaxpp.task`` ops
    (kind ``pre`` before the loop, ``post`` after it), the loop,
    ``jaxpp.replicated`` and ``jaxpp.assemble`` ops read only by the return, and
    the return.
    """

    name = "jaxpp-outline-outer-code"
    replicate_max_bytes: int = dataclasses.field(
        default=1024,
        metadata={
            "help": "largest step output returned from every rank holding a copy (0: off)",
            "min": 0,
        },
    )

    def run(self, module: ir.Operation) -> None:
        main = ir_utils.get_main(module)
        loop = ir_utils.find_loop(main)
        if loop is None:
            return
        block = ir_utils.body(main)
        all_ops = ir_utils.block_ops(block)
        terminator = all_ops[-1]
        # Chunks of inputs stay as they are (placed already), assembled outputs too.
        outer_ops = [op for op in all_ops[:-1] if op != loop and not _stays(op)]
        for op in outer_ops:
            if jaxpp.is_jaxpp_op(op):
                raise diagnostics.error(op, f"'{op.name}' outside the loop is already outlined")
        state_ranks = jaxpp.get_state_ranks(loop)
        if len(state_ranks) != len(list(loop.results)):
            raise diagnostics.error(
                loop, "the loop has no jaxpp.state_ranks: run jaxpp-place-stages"
            )
        keep = set(loop.operands) | set(terminator.operands)
        copyable = outlining.copyable_ops(outer_ops, keep)
        max_bytes = self.replicate_max_bytes
        placeable = [op for op in outer_ops if op not in copyable]
        _assign_ranks(placeable, loop, state_ranks, block, terminator, max_bytes)
        members, others = _group_placed(ir_utils.block_ops(block), loop, copyable)
        keys = sorted(members)
        groups = [
            outlining.Group(
                members[(after, phase, rank)],
                insert_before=terminator if after else loop,
                name=f"{kind}{phase}_r{rank}",
                stage=phase,
                kind=kind,
            )
            for after, phase, rank in keys
            for kind in [jaxpp.POST if after else jaxpp.PRE]
        ]
        outlined = outlining.outline_groups(module, groups, copyable, others)
        for (_, _, rank), result in zip(keys, outlined, strict=True):
            jaxpp.set_rank(result.task, rank)
        for op in reversed(copyable):
            if outlining.unused(op):
                op.erase()
        for op in ir_utils.block_ops(block):
            if jaxpp.is_replicated(op) or jaxpp.is_assemble(op):
                op.move_before(terminator)  # after the tasks computing its operands


def _stays(op: ir.Operation) -> bool:
    """A ``jaxpp.chunk`` (an input's rows, on its rank) or ``jaxpp.assemble`` (an
    output of pieces): neither is outlined."""
    return jaxpp.is_chunk(op) or jaxpp.is_assemble(op)


def _group_placed(
    all_ops: list[ir.Operation], loop: ir.Operation, copyable: dict[ir.Operation, None]
) -> tuple[dict[tuple[int, int, int], list[ir.Operation]], list[ir.Operation]]:
    """The placed ops of the block (``all_ops``) by (after the loop, phase, rank), and
    the ops neither placed nor copyable.

    The phase grows by one each time a value crosses ranks.
    """
    loop_index = all_ops.index(loop)
    terminator = all_ops[-1]
    members: dict[tuple[int, int, int], list[ir.Operation]] = {}
    others = []
    placed_values: dict[ir.Value, tuple[int, int]] = {}  # (phase, rank) of placed results
    for position, op in enumerate(all_ops):
        if position == loop_index or op == terminator or not jaxpp.has_rank(op) or _stays(op):
            if op not in copyable:
                others.append(op)
            continue
        rank = jaxpp.get_rank(op)
        phase = 0
        for value in ir_utils.external_operands(op):
            producer = placed_values.get(value)
            if producer is not None:
                producer_phase, producer_rank = producer
                phase = max(phase, producer_phase + (0 if producer_rank == rank else 1))
        for result in op.results:
            placed_values[result] = (phase, rank)
        members.setdefault((0 if position < loop_index else 1, phase, rank), []).append(op)
    return members, others


def _assign_ranks(
    ops: list[ir.Operation],
    loop: ir.Operation,
    state_ranks: list[int],
    block: ir.Block,
    terminator: ir.Operation,
    replicate_max_bytes: int,
) -> None:
    """Sets ``jaxpp.rank`` on ``ops``; ops reading only arguments get one copy per rank.

    Copies are inserted into the block next to their original, with their rank;
    a returned result of at most ``replicate_max_bytes`` is returned from all of them.
    """
    # Broadcasts follow their consumers (placed by their users, per consuming rank):
    # sending the value they broadcast is cheaper than sending their result.
    follow_users = [op for op in ops if op.name == _BROADCAST]
    placement = _Placement(
        loop,
        state_ranks,
        block,
        terminator,
        _RankAttrs(),
        {op.results[0]: op.operands[0] for op in follow_users},
        dict(zip(loop.results, state_ranks, strict=True)),
        replicate_max_bytes,
    )
    for op in ops:
        if op.name != _BROADCAST:
            placement.place_by_operands(op)
    for op in reversed(ops):
        if op not in placement.ranks:
            placement.place_by_users(op)


@dataclasses.dataclass
class _Placement:
    loop: ir.Operation
    state_ranks: list[int]
    block: ir.Block
    terminator: ir.Operation
    ranks: _RankAttrs
    broadcast_operands: dict[ir.Value, ir.Value]  # the result of each follow-users op
    value_ranks: dict[ir.Value, int | None]  # the loop's results, then as they are read
    replicate_max_bytes: int
    type_elements: dict[ir.Type, int] = dataclasses.field(default_factory=dict)

    def value_rank(self, value: ir.Value) -> int | None:
        if value in self.value_ranks:
            return self.value_ranks[value]
        producer = ir_utils.defining_op(value)
        rank = None if producer is None else self.ranks.get(producer)
        self.value_ranks[value] = rank
        return rank

    def assign(self, op: ir.Operation, rank: int) -> None:
        self.ranks[op] = rank
        for result in op.results:
            self.value_ranks[result] = rank

    def num_elements(self, value: ir.Value) -> int:
        value_type = value.type
        count = self.type_elements.get(value_type)
        if count is None:
            count = self.type_elements[value_type] = _num_elements(value)
        return count

    def source(self, value: ir.Value) -> ir.Value:
        while value in self.broadcast_operands:
            value = self.broadcast_operands[value]
        return value

    def use_rank(self, use: ir.OpOperand) -> int | None:
        owner = ir_utils.use_owner(use)
        if owner == self.loop:
            return self.state_ranks[use.operand_number]
        below, top = owner, owner  # top: owner's ancestor in the block; below: the one in it
        while top.block != self.block:
            below, top = top, ir_utils.parent_op(top)
        if top == self.loop:
            return jaxpp.get_rank(below) if jaxpp.has_rank(below) else None
        return self.ranks.get(top)

    def place_by_operands(self, op: ir.Operation) -> None:
        """The rank of an operand that minimizes the elements received from other ranks;
        on a tie, the rank of the earliest such operand; none if no operand has a rank."""
        sources = map(self.source, ir_utils.external_operands(op))
        operands = [(self.value_rank(v), self.num_elements(v)) for v in sources]
        candidates = [rank for rank, _ in operands if rank is not None]
        if candidates:
            self.assign(
                op,
                min(
                    dict.fromkeys(candidates),
                    key=lambda rank: sum(
                        size for r, size in operands if r is not None and r != rank
                    ),
                ),
            )

    def place_by_users(self, op: ir.Operation) -> None:
        """The first rank using ``op``; a cheap op gets a copy on each other using rank."""
        uses_by_rank: dict[int, list[tuple[int, ir.OpOperand]]] = {}
        for index, result in enumerate(op.results):
            for use in result.uses:
                rank = self.use_rank(use)
                if rank is not None:
                    uses_by_rank.setdefault(rank, []).append((index, use))
        if not uses_by_rank:
            self.assign(op, 0)
            return
        first, *others = sorted(uses_by_rank)
        self.assign(op, first)
        if not _cheap_to_recompute(op):
            return  # computed once; jaxpp-insert-transfers sends it to the others
        copies = {first: op}
        for rank in others:
            copy = op.clone(ip=ir.InsertionPoint(op))
            copy = copy.operation  # an Operation's is itself
            self.assign(copy, rank)
            copies[rank] = copy
            for index, use in uses_by_rank[rank]:
                ir_utils.use_owner(use).operands[use.operand_number] = copy.results[index]
        if others:
            self.return_replicated(copies)

    def return_replicated(self, copies: dict[int, ir.Operation]) -> None:
        """Makes the return read each small result of ``copies`` (one op per rank) from
        every rank, through a ``jaxpp.replicated`` of its copies."""
        terminator = self.terminator
        ranks = sorted(copies)
        for index, result in enumerate(copies[ranks[0]].results):
            if spec_bytes(tensor_spec(result.type)) > self.replicate_max_bytes:
                continue
            returned = [
                u.operand_number for u in result.uses if ir_utils.use_owner(u) == terminator
            ]
            if not returned:
                continue
            with ir.InsertionPoint(terminator), terminator.location:
                replicated = jaxpp.create_replicated(
                    [copies[rank].results[index] for rank in ranks], ranks
                )
            for position in returned:
                terminator.operands[position] = replicated.results[0]


# Ops whose work is linear in the size of their result, like a transfer of it.
_ELEMENTWISE_OR_LAYOUT = frozenset(
    "stablehlo." + name
    for name in (
        "abs add and atan2 bitcast_convert broadcast_in_dim cbrt ceil clamp compare complex "
        "concatenate constant convert cosine divide dynamic_slice exponential "
        "exponential_minus_one floor get_tuple_element imag iota is_finite log log_plus_one "
        "logistic maximum minimum multiply negate not or pad popcnt power real "
        "reduce_precision remainder reshape reverse round_nearest_afz round_nearest_even "
        "rsqrt select shift_left shift_right_arithmetic shift_right_logical sign sine slice "
        "sqrt subtract tan tanh transpose tuple xor"
    ).split()
)
_TINY_ELEMENTS = 1024


_BROADCAST = "stablehlo.broadcast_in_dim"


def _num_elements(value: ir.Value) -> int:
    if isinstance(value.type, ir.RankedTensorType):
        tensor = ir.RankedTensorType(value.type)
        if tensor.has_static_shape:
            return math.prod(tensor.shape)
    return 1


def _cheap_to_recompute(op: ir.Operation) -> bool:
    """Whether recomputing ``op`` costs no more than sending its results."""
    if op.regions and any(len(region.blocks) for region in op.regions):
        return _max_elements(op) <= _TINY_ELEMENTS
    return op.name in _ELEMENTWISE_OR_LAYOUT or _max_elements(op) <= _TINY_ELEMENTS


def _max_elements(op: ir.Operation) -> int:
    return max((_num_elements(v) for v in (*op.operands, *op.results)), default=0)


class _RankAttrs:
    """The ranks being assigned, kept as ``jaxpp.rank`` attributes on the ops.

    Attributes rather than a dict keyed by op: a cloned op's Python wrapper does
    not compare equal to the wrapper the block later yields for it.
    """

    def get(self, op: ir.Operation | None) -> int | None:
        return jaxpp.get_rank(op) if op is not None and jaxpp.has_rank(op) else None

    def __contains__(self, op: ir.Operation) -> bool:
        return jaxpp.has_rank(op)

    def __setitem__(self, op: ir.Operation, rank: int) -> None:
        jaxpp.set_rank(op, rank)
