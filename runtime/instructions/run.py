"""The run instruction: one executable launched on one rank.

A run executes one stage task, several fused ones (``FusedTask``), the code before or
after the microbatch loop, or, in a multi-process local plan, a transfer executable.
Resolved, it reads each input from the slot holding the value in the layout its
executable takes (a copy is made first where the rank holds it otherwise, see
``copy``) and defines one slot per output; its code is one straight-line function:
the copies, one launch with result handlers, the results stored, the dead slots freed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from .. import records
from ..errors import PlanError
from ..execution.codegen import CodeGen, Fields, OpFacts, OpShape
from ..plan import Instruction, StageExecutable, TaskRef, TensorSpec
from . import copy

if TYPE_CHECKING:
    from ..execution.slots import Resolver

KIND = "run"


@records.frozen
class RunStage(Instruction):
    """Runs ``executable`` on ``rank`` with ``inputs``, defining ``outputs``.

    ``tasks`` are the stage tasks it executes (several when fused); ``note`` names a
    run that executes none (a transfer of a multi-process plan).
    """

    rank: int
    executable: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    tasks: tuple[TaskRef, ...] = ()
    note: str = ""

    kind: ClassVar[str] = KIND
    peer: ClassVar[None] = None
    fixes_layouts: ClassVar[bool] = True

    @property
    def label(self) -> str:
        """``fwd_1__0``; ``FusedTask(fwd_1__0, bwd_2__1)`` for fused tasks; else the note."""
        if len(self.tasks) == 1:
            return str(self.tasks[0])
        if self.tasks:
            return f"FusedTask({', '.join(map(str, self.tasks))})"
        return self.note

    def reads(self) -> tuple[int, ...]:
        return self.inputs

    def writes(self) -> tuple[int, ...]:
        return self.outputs

    def read_specs(self, executables: Mapping[str, StageExecutable]) -> tuple[TensorSpec, ...]:
        return executables[self.executable].input_specs

    def written_specs(self, executables: Mapping[str, StageExecutable]) -> tuple[TensorSpec, ...]:
        return executables[self.executable].output_specs

    def reused_buffers(
        self, executables: Mapping[str, StageExecutable]
    ) -> tuple[tuple[int, int], ...]:
        return tuple(
            (self.inputs[i], self.outputs[o]) for i, o in executables[self.executable].aliases
        )

    def describe(self) -> str:
        label = self.label
        return f"run {self.executable!r}{f' ({label})' if label else ''} on rank {self.rank}"

    def listing(self) -> str:
        return f"run {self.executable} ({self.label}) {list(self.inputs)} -> {list(self.outputs)}"

    def trace_title(self) -> str:
        """Its name in traces: ``F1.0`` (``F1.0+B2.1`` fused) for stage tasks, else the
        label or executable."""
        tasks = [t for t in self.tasks if t.microbatch is not None]
        if tasks:
            return "+".join(f"{_SHORT.get(t.kind, t.kind)}{t.stage}.{t.microbatch}" for t in tasks)
        return self.label or self.executable


_SHORT = {"fwd": "F", "bwd": "B", "bwd_i": "I", "bwd_w": "W"}


@records.frozen
class RunStep:
    """A resolved ``RunStage``: the copies made just before it, its input and output slots,
    and ``(input position, slot)`` of each input the launch consumes (donated)."""

    inst: RunStage
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    copies: tuple[copy.CopyStep, ...]
    consumed: tuple[tuple[int, int], ...]


def resolve(resolver: Resolver, at: int, inst: RunStage) -> RunStep:
    """Instruction ``at``: its inputs read in its executable's layouts, its outputs defined."""
    stage = resolver.plan.executables.get(inst.executable)
    if stage is None:
        raise PlanError(f"instruction {at} runs unknown executable {inst.executable!r}")
    if stage.rank != inst.rank:
        raise PlanError(
            f"instruction {at} runs {inst.executable!r} on rank {inst.rank}, "
            f"but it is compiled for rank {stage.rank}"
        )
    if len(inst.inputs) != len(stage.input_specs) or len(inst.outputs) != len(stage.output_specs):
        raise PlanError(
            f"instruction {at} ({inst.describe()}) has {len(inst.inputs)} inputs "
            f"and {len(inst.outputs)} outputs; the executable takes "
            f"{len(stage.input_specs)} and gives {len(stage.output_specs)}"
        )
    table = resolver.table
    in_shardings = resolver.in_shardings[inst.executable]
    out_shardings = resolver.out_shardings[inst.executable]
    ins = [
        table.use(inst.rank, v, at, spec, sh)
        for v, spec, sh in zip(inst.inputs, stage.input_specs, in_shardings, strict=True)
    ]
    outs = [
        table.define(inst.rank, v, spec, sh, at)
        for v, spec, sh in zip(inst.outputs, stage.output_specs, out_shardings, strict=True)
    ]
    consumed = tuple([(p, ins[p]) for p, _ in stage.aliases]) if stage.aliases else ()
    for position, slot in consumed:
        if ins.count(slot) > 1:
            raise PlanError(
                f"instruction {at} ({inst.describe()}) consumes input {position} "
                f"(value {inst.inputs[position]}, donated to its output), but "
                "reads the same value as another input too"
            )
    copies = tuple(table.copies.get(at, ()))
    return RunStep(inst, tuple(ins), tuple(outs), copies, consumed)


def generate(gen: CodeGen, steps: Sequence[RunStep], at: int) -> int:
    """The operation of run ``steps[at]``; returns the next step's index."""
    step, slots = steps[at], gen.slots
    inst, outs = step.inst, step.outputs
    live = tuple(k for k, s in enumerate(outs) if slots[s].last_use != -1)  # results read
    free = gen.free_after[at]
    if len(live) < len(outs):
        dead = {s for s in outs if slots[s].last_use == -1}
        free = [s for s in free if s not in dead]
    key = (KIND, len(step.copies), len(step.inputs), live, len(free))
    shape = gen.shape(key, lambda: _shape(*key[1:]))
    fields = copy.fields(step.copies, slots) if step.copies else []
    fields += step.inputs
    for k in live:
        fields += (outs[k], slots[outs[k]].key)
    fields += free
    namespace = copy.constants(step.copies) if step.copies else {}
    namespace["exe"] = gen.executables[inst.executable]  # a PendingExecutable until compiled
    namespace["handlers"] = gen.result_handlers(inst.executable, outs)
    op = shape.make(inst.describe(), fields, namespace)
    gen.add(op, at + 1, OpFacts(KIND, inst.rank, "task", tuple([outs[k] for k in live]), (inst,)))
    return at + 1


def _shape(copies: int, inputs: int, live: tuple[int, ...], free: int) -> OpShape:
    """A run's code: its copies, one launch with result handlers, the results read stored
    (``live``: their positions), then ``free`` slots freed."""
    fields = Fields()
    code = [
        *copy.write(fields, copies),
        f"r = exe.execute_sharded(({fields.slots(inputs)})).consume_with_handlers(handlers)",
        *(f"{fields.slot()} = r[{k}]{fields.comment()}" for k in live),
    ]
    names = [*copy.constant_names(copies), "exe", "handlers"]
    return OpShape(KIND, code, fields, free, names)
