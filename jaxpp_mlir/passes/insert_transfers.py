"""jaxpp-insert-transfers: a jaxpp.send/jaxpp.recv pair for every value crossing ranks."""

from __future__ import annotations

import dataclasses

from jax.extend.mlir import ir

from jaxpp_mlir import diagnostics
from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.passes import ir_utils
from jaxpp_mlir.passes.base import ModulePass, register_pass


@register_pass
@dataclasses.dataclass
class InsertTransfers(ModulePass):
    """Insert a jaxpp.send/jaxpp.recv pair (one channel id) for every value a rank needs from another.

    A value goes to each rank that reads it once, however many tasks there
    read it: the send follows its producer, the receive precedes the first
    task that reads it. Arguments of ``@main`` are placed on every rank that
    reads them by the runtime, and results of ``@main`` stay on the rank that
    computes them, so neither needs a transfer.

    Precondition: every ``jaxpp.task`` in ``@main`` carries ``jaxpp.rank``
    (jaxpp-place-stages) and ``@main`` holds no transfer yet.
    Postcondition: every operand of a task is an argument of ``@main`` or a
    value defined on the task's rank (a task result or a ``jaxpp.recv``).
    """

    name = "jaxpp-insert-transfers"

    def run(self, module: ir.Operation) -> None:
        main = ir_utils.get_main(module)
        received: dict[tuple[ir.Value, int], ir.Value] = {}
        channel = 0
        for op in [op.operation for op in ir_utils.body(main).operations]:
            if jaxpp.is_send(op) or jaxpp.is_recv(op):
                raise diagnostics.error(op, "the module already has transfers")
            if not jaxpp.is_task(op):
                continue
            if not jaxpp.has_rank(op):
                raise diagnostics.error(op, "task has no rank: run jaxpp-place-stages first")
            rank = jaxpp.get_rank(op)
            for index, value in enumerate(op.operands):
                producer = ir_utils.defining_op(value)
                if producer is None or jaxpp.get_rank(producer) == rank:
                    continue
                key = (value, rank)
                if key not in received:
                    source = jaxpp.get_rank(producer)
                    with ir.InsertionPoint(op), producer.location:
                        send = jaxpp.create_send(value, channel=channel, rank=source, peer=rank)
                    send.move_after(producer)
                    with ir.InsertionPoint(op), op.location:
                        recv = jaxpp.create_recv(
                            value.type, channel=channel, rank=rank, peer=source
                        )
                    received[key] = recv.results[0]
                    channel += 1
                op.operands[index] = received[key]

