"""jaxpp-insert-transfers: a jaxpp.send/jaxpp.recv pair for every value crossing ranks."""

from __future__ import annotations

import dataclasses

from jax.interpreters.mlir import ir

from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.ir.utils import find_main
from jaxpp_mlir.passes.base import Evidence, ModulePass, register_pass
from jaxpp_mlir.runtime import records


@register_pass
@records.frozen
class InsertTransfers(ModulePass):
    """Insert a jaxpp.send/jaxpp.recv pair (one channel id) for every value crossing ranks.

    A value goes to each rank that reads it once, however many tasks there
    read it: the send follows its producer, the receive precedes the first
    task that reads it. Arguments of ``@main`` are placed on every rank that
    reads them by the runtime, and results of ``@main`` stay on the rank that
    computes them, so neither needs a transfer.

    Inside a ``jaxpp.loop`` the pair sits in the loop body (one transfer per
    microbatch); a value from outside the loop is received once, before it.
    The loop's state lives on the ranks ``jaxpp.state_ranks`` names; the
    microbatch index is available on every rank.

    Precondition: every ``jaxpp.task`` carries ``jaxpp.rank`` (jaxpp-place-stages
    and, with a loop, jaxpp-outline-outer-code) and there is no transfer yet.
    Postcondition: every operand of a task (and every initial state of the
    loop) is an argument of ``@main``, the microbatch index, or a value held
    by the consuming rank (a task result, loop state or a ``jaxpp.recv``).
    A transfer in the loop body records the task it belongs to in
    ``jaxpp.for_task`` (the receive: the first task it feeds; the send: the
    task whose result it sends), so the plan builder runs each task with its
    transfers without walking the body again.
    """

    name = "jaxpp-insert-transfers"
    requires = ("jaxpp-place-stages",)

    @classmethod
    def finished(cls, module: ir.Operation) -> Evidence | None:
        main = find_main(module)
        if main is None:
            return None
        for op in ir_utils.walk(main):
            if jaxpp.is_send(op) or jaxpp.is_recv(op):
                has_channel = jaxpp.CHANNEL_ATTR in op.attributes
                channel = f" on channel {jaxpp.get_channel(op)}" if has_channel else ""
                found = f"found {op.name}{channel}"
                return Evidence(op, f"the transfers are already inserted ({found})")
        return None

    def run(self, module: ir.Operation) -> None:
        main = ir_utils.get_main(module)
        loop = ir_utils.find_loop(main)
        inserter = _Inserter(loop, jaxpp.get_state_ranks(loop) if loop is not None else [])
        for op in ir_utils.block_ops(ir_utils.body(main)):
            if loop is not None and op == loop:
                operands = op.operands
                for index, rank in enumerate(inserter.state_ranks):
                    value = operands[index]
                    received = inserter.on_rank(value, rank, op)
                    if received is not value:
                        operands[index] = received
                for nested in ir_utils.block_ops(jaxpp.loop_body(op)):
                    inserter.visit(nested)
            else:
                inserter.visit(op)


@dataclasses.dataclass
class _Inserter:
    """The state of one run: channels handed out, values already received."""

    loop: ir.Operation | None
    state_ranks: list[int]
    received: dict[tuple[ir.Value, int], ir.Value] = dataclasses.field(default_factory=dict)
    channel: int = 0
    last_send: dict[ir.Operation, ir.Operation] = dataclasses.field(
        default_factory=dict
    )  # keeps sends in channel order
    ranks: dict[ir.Value, int | None] = dataclasses.field(default_factory=dict)  # rank_of's

    def visit(self, op: ir.Operation) -> None:
        if not jaxpp.is_task(op):
            return
        rank = jaxpp.get_rank(op)
        operands = op.operands
        for index, value in enumerate(operands):
            received = self.on_rank(value, rank, op)
            if received is not value:
                operands[index] = received

    def rank_of(self, value: ir.Value) -> int | None:
        """The rank holding ``value``; None for what every rank has (arguments, the index)."""
        if value in self.ranks:
            return self.ranks[value]  # no rank changes during the pass
        producer = ir_utils.defining_op(value)
        rank = None
        if producer is None:
            if self.loop is not None and value.owner == jaxpp.loop_body(self.loop):
                position = ir.BlockArgument(value).arg_number
                if position > 0:
                    rank = self.state_ranks[position - 1]
        elif self.loop is not None and producer == self.loop:
            rank = self.state_ranks[ir.OpResult(value).result_number]
        elif jaxpp.has_rank(producer):
            rank = jaxpp.get_rank(producer)
        self.ranks[value] = rank
        return rank

    def on_rank(self, value: ir.Value, rank: int, consumer: ir.Operation) -> ir.Value:
        source = self.rank_of(value)
        if source is None or source == rank:
            return value
        key = (value, rank)
        if key not in self.received:
            producer = ir_utils.defining_op(value)
            with ir.InsertionPoint(consumer), producer.location:
                send = jaxpp.create_send(value, channel=self.channel, rank=source, peer=rank)
            send.move_after(self.last_send.get(producer, producer))
            self.last_send[producer] = send
            receive_before = ir_utils.top_level_user(consumer, producer.block)
            with ir.InsertionPoint(receive_before), consumer.location:
                recv = jaxpp.create_recv(value.type, channel=self.channel, rank=rank, peer=source)
            if self.loop is not None and producer.block == jaxpp.loop_body(self.loop):
                jaxpp.set_for_task(send, jaxpp.get_stage(producer), jaxpp.get_kind(producer))
                jaxpp.set_for_task(recv, jaxpp.get_stage(consumer), jaxpp.get_kind(consumer))
            self.received[key] = recv.results[0]
            self.channel += 1
        return self.received[key]
