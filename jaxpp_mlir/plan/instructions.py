"""The plan builder's op table: each op of ``@main`` as a plan instruction, and a task
as a pending executable.

An op becomes an instruction of its kind (``runtime/instructions``): a task a run, a
``jaxpp.send`` a send, a ``jaxpp.recv`` a receive. Outside the loop (and for fused
tasks) ``instruction`` reads the op directly; in the loop body ``template`` reads it
once, as a microbatch-independent template whose ``expand`` gives the instruction of
one microbatch. A new instruction kind adds its op here (both forms). Both read MLIR
only; the value numbering gives the value ids.
"""

from __future__ import annotations

from collections.abc import Callable

from jax.interpreters.mlir import ir

from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.runtime import plan as rt
from jaxpp_mlir.runtime import records
from jaxpp_mlir.runtime.instructions.receive import Recv
from jaxpp_mlir.runtime.instructions.run import RunStage
from jaxpp_mlir.runtime.instructions.send import Send

from .emission import ModuleSource, Standalone
from .refs import Ref
from .specs import TensorSpecs, tensor_spec
from .values import Reads, ValueNumbering


@records.frozen
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


def task_ref(task: ir.Operation, microbatch: int | None) -> rt.TaskRef:
    """The task ``task`` runs for ``microbatch``: a stage's task has one (0 outside the
    loop); the code before and after the loop (``pre``, ``post``) has none."""
    kind = jaxpp.get_kind(task)
    return rt.TaskRef(
        jaxpp.get_stage(task), kind, (microbatch or 0) if kind in jaxpp.KINDS else None
    )


def instruction(
    op: ir.Operation, values: ValueNumbering, microbatch: int | None = None
) -> rt.Instruction | None:
    """``op`` (a task, send or receive of ``@main`` outside the loop, or of a fused loop
    task) as an instruction, its values numbered in ``values``; None for any other op."""
    rank = jaxpp.get_rank(op)
    if jaxpp.is_task(op):
        inputs = tuple(values.use(v, rank, microbatch) for v in op.operands)
        outputs = tuple(values.define(v, rank, microbatch) for v in op.results)
        tasks = (task_ref(op, microbatch),)
        return RunStage(rank, jaxpp.task_callee(op), inputs, outputs, tasks)
    if jaxpp.is_send(op):
        value = values.use(op.operands[0], rank, microbatch)
        channel = values.channel(jaxpp.get_channel(op), microbatch)
        return Send(rank, jaxpp.get_peer(op), channel, value)
    if jaxpp.is_recv(op):
        value = values.define(op.results[0], rank, microbatch)
        channel = values.channel(jaxpp.get_channel(op), microbatch)
        spec = tensor_spec(op.results[0].type)
        return Recv(rank, jaxpp.get_peer(op), channel, value, spec)
    return None


@records.frozen
class RunTemplate:
    rank: int
    executable: str
    inputs: Reads
    outputs: tuple[int, ...]  # body-local indices
    stage: int
    kind: str

    def expand(self, values: ValueNumbering, microbatch: int | None) -> RunStage:
        inputs = values.resolve_all(self.inputs, self.rank, microbatch)
        outputs = values.define_slots(self.outputs, self.rank, microbatch)
        task = rt.TaskRef(self.stage, self.kind, microbatch or 0)
        return RunStage(self.rank, self.executable, inputs, outputs, (task,))


@records.frozen
class SendTemplate:
    rank: int
    peer: int
    channel: int  # the IR's channel (numbered per microbatch when expanded)
    value: Ref

    def expand(self, values: ValueNumbering, microbatch: int | None) -> Send:
        value = values.resolve(self.value, self.rank, microbatch)
        return Send(self.rank, self.peer, values.channel(self.channel, microbatch), value)


@records.frozen
class RecvTemplate:
    rank: int
    peer: int
    channel: int
    value: int  # body-local index
    spec: rt.TensorSpec

    def expand(self, values: ValueNumbering, microbatch: int | None) -> Recv:
        (value,) = values.define_slots((self.value,), self.rank, microbatch)
        channel = values.channel(self.channel, microbatch)
        return Recv(self.rank, self.peer, channel, value, self.spec)


Template = RunTemplate | SendTemplate | RecvTemplate


def template(
    values: ValueNumbering,
    op: ir.Operation,
    specs: Callable[[ir.Type], rt.TensorSpec] = tensor_spec,
) -> Template:
    """A loop body op as a microbatch-independent instruction (MLIR is read once)."""
    rank = jaxpp.get_rank(op)
    if jaxpp.is_task(op):
        return RunTemplate(
            rank,
            jaxpp.task_callee(op),
            values.reads(op.operands, rank),
            tuple(values.local[v] for v in op.results),
            jaxpp.get_stage(op),
            jaxpp.get_kind(op),
        )
    if jaxpp.is_send(op):
        return SendTemplate(
            rank, jaxpp.get_peer(op), jaxpp.get_channel(op), values.ref(op.operands[0], rank)
        )
    result = op.results[0]
    return RecvTemplate(
        rank,
        jaxpp.get_peer(op),
        jaxpp.get_channel(op),
        values.local[result],
        specs(result.type),
    )
