"""One op of ``@main`` as a plan instruction, and a task as a pending executable.

Both read MLIR only; the value numbering gives the value ids.
"""

from __future__ import annotations

import dataclasses

from jax.extend.mlir import ir

from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.runtime import plan as rt

from .emission import ModuleSource, Standalone
from .specs import TensorSpecs, tensor_spec
from .values import ValueNumbering


@dataclasses.dataclass(frozen=True)
class PendingExecutable:
    """An executable whose module is not emitted yet."""

    rank: int
    source: ModuleSource
    input_specs: tuple[rt.TensorSpec, ...]
    output_specs: tuple[rt.TensorSpec, ...]


def standalone_executable(task: ir.Operation, specs: TensorSpecs) -> PendingExecutable:
    """The executable that runs ``task``'s callee alone, with the task's value types
    (``specs``: the plan's spec of each type)."""
    return PendingExecutable(
        jaxpp.get_rank(task),
        Standalone(jaxpp.task_callee(task)),
        specs.all([v.type for v in task.operands]),
        specs.all(task.results.types),
    )


def task_label(task: ir.Operation, microbatch: int | None) -> str:
    return f"{jaxpp.get_kind(task)}_{jaxpp.get_stage(task)}__{microbatch or 0}"


def instruction(
    op: ir.Operation, values: ValueNumbering, microbatch: int | None = None
) -> rt.Instruction | None:
    """``op`` (a task, send or receive of ``@main`` outside the loop, or of a fused loop
    task) as an instruction, its values numbered in ``values``; None for any other op."""
    rank = jaxpp.get_rank(op)
    if jaxpp.is_task(op):
        inputs = tuple(values.use(v, rank, microbatch) for v in op.operands)
        outputs = tuple(values.define(v, rank, microbatch) for v in op.results)
        label = task_label(op, microbatch)
        return rt.RunStage(rank, jaxpp.task_callee(op), inputs, outputs, label)
    if jaxpp.is_send(op):
        value = values.use(op.operands[0], rank, microbatch)
        channel = values.channel(jaxpp.get_channel(op), microbatch)
        return rt.Send(rank, jaxpp.get_peer(op), channel, value)
    if jaxpp.is_recv(op):
        value = values.define(op.results[0], rank, microbatch)
        channel = values.channel(jaxpp.get_channel(op), microbatch)
        spec = tensor_spec(op.results[0].type)
        return rt.Recv(rank, jaxpp.get_peer(op), channel, value, spec)
    return None
