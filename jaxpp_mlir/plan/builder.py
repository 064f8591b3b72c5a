"""Building the runtime's ``ExecutionPlan`` from a partitioned module and a schedule.

The module's ``@main`` is a task graph; a ``jaxpp.loop`` in it is one
microbatch's task graph. Here the loop is expanded per microbatch in the
order the schedule gives (the IR never is, see ``expansion``): each scheduled
task becomes one ``RunStage`` with its receives before it and its sends after
it, or tasks run fused (see ``fusion``). Those modules return instructions and
executables; only the builder adds them to the plan. Loop state is threaded through the
microbatches (see ``values``). Once every instruction is known, donation
decides which executables reuse input buffers (see ``donation``) and every
module is emitted, once (see ``emission``).
"""

from __future__ import annotations

import dataclasses

from jax.interpreters.mlir import ir

from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.errors import PartitionError
from jaxpp_mlir.ir.utils import find_main
from jaxpp_mlir.plan.stage_modules import StageFunctions, donated_arguments
from jaxpp_mlir.planner.segment_costs import nested_flops
from jaxpp_mlir.runtime import plan as rt
from jaxpp_mlir.schedules import Schedule

from . import emission, expansion, fusion, layouts
from .carried import loop_state_versions
from .donation import donation_aliases
from .emission import Fused, Standalone
from .instructions import PendingExecutable, instruction, standalone_executable
from .specs import TensorSpecs, argument_name
from .values import ValueNumbering


@dataclasses.dataclass
class BuiltPlan:
    plan: rt.ExecutionPlan  # its constants: the microbatch indices, after the own inputs
    donated_inputs: frozenset[int]  # program inputs consumed by a call
    # One standalone module per stage function, in task order (the plan's own text
    # where the plan runs the function alone).
    stage_modules: dict[str, str]
    task_of: dict[str, tuple[int, str]]  # stage function -> its task's (stage, kind)


def build_plan(module: ir.Module, *, num_ranks: int, schedule: Schedule | None) -> BuiltPlan:
    with module.context:
        return PlanBuilder(module, num_ranks, schedule).build()


class PlanBuilder:
    """The plan being built: value ids, instructions and executables."""

    def __init__(self, module: ir.Module, num_ranks: int, schedule: Schedule | None):
        self.module = module
        self.block = _main(module).regions[0].blocks[0]
        self.num_ranks = num_ranks
        self.schedule = schedule
        self.values = ValueNumbering(self.block)
        self.specs = TensorSpecs()
        self.instructions: list[rt.Instruction] = []
        self.executables: dict[str, PendingExecutable] = {}
        # Each stage function's (stage, kind), in task order (the loop body where the loop is).
        self.task_of: dict[str, tuple[int, str]] = {}

    def emit(self, op: ir.Operation) -> None:
        """Adds one op of ``@main`` outside the loop (and its executable, for a task)."""
        if jaxpp.is_task(op):
            callee = jaxpp.task_callee(op)
            self.task_of.setdefault(callee, (jaxpp.get_stage(op), jaxpp.get_kind(op)))
            if callee not in self.executables:
                self.executables[callee] = standalone_executable(op, self.specs)
        inst = instruction(op, self.values)
        if inst is not None:
            self.instructions.append(inst)

    def build(self) -> BuiltPlan:
        terminator = None
        for op in self.block.operations:
            op = op.operation
            if op.name == "func.return":
                terminator = op
            elif jaxpp.is_loop(op):
                expanded = expansion.expand_loop(op, self.values, self.schedule, self.specs)
                self.instructions += expanded.instructions
                for name, executable in expanded.executables.items():
                    self.executables.setdefault(name, executable)
                for callee, key in expanded.task_of.items():
                    self.task_of.setdefault(callee, key)
            elif jaxpp.is_replicated(op) or jaxpp.is_assemble(op):
                continue  # read by the return only (see _outputs)
            elif jaxpp.is_chunk(op):
                self.values.chunk(op)  # placed from the caller's array (see _inputs)
            else:
                self.emit(op)
        outputs = self._outputs(terminator)
        self.instructions, self.executables = fusion.prune_unread_outputs(
            self.instructions, self.executables, [v for o in outputs for v, _ in o.held()]
        )
        inputs = self._inputs()
        donated = frozenset(donated_arguments(self.module))
        # A donated argument's pieces are the caller's buffers too: consumable where read last.
        donated_values = donated | {p.value for i in donated for p in inputs[i].pieces}
        functions = StageFunctions(self.module)
        boundary = {
            name: emission.module_shardings(functions, e.source)
            for name, e in self.executables.items()
        }
        meshes = layouts.mesh_axes(self.module)
        aliases = donation_aliases(
            self.instructions,
            donated_values,
            {n: (e.input_specs, e.output_specs) for n, e in self.executables.items()},
            boundary.__getitem__,
            carried=loop_state_versions(self.values),
            outputs=[(rank, value) for output in outputs for value, rank in output.held()],
        )
        task_of = self.task_of
        sources = {name: e.source for name, e in self.executables.items()}
        stage_only = {c: Standalone(c) for c in task_of if c not in self.executables}
        texts = emission.emit_modules(functions, {**sources, **stage_only}, aliases)
        flops: dict[str, float] = {}  # by module text: copies of a program cost the same
        for name, e in self.executables.items():
            if texts[name] not in flops:
                flops[texts[name]] = _estimated_flops(functions, e.source)
        executables = {
            name: rt.StageExecutable(
                name,
                e.rank,
                texts[name],
                layouts.with_layouts(e.input_specs, boundary[name][0], meshes),
                layouts.with_layouts(e.output_specs, boundary[name][1], meshes),
                tuple(sorted(aliases.get(name, {}).items())),
                e.source.callees if isinstance(e.source, Fused) else (),
                flops[texts[name]],
            )
            for name, e in self.executables.items()
        }
        plan = rt.ExecutionPlan(
            num_ranks=self.num_ranks,
            executables=executables,
            inputs=tuple(inputs),
            outputs=tuple(outputs),
            instructions=tuple(layouts.with_receive_layouts(self.instructions, executables)),
            stage_names=_stage_names(self.module, task_of),
            constants=tuple(
                rt.Constant(value_id, rank, microbatch)
                for (microbatch, rank), value_id in self.values.index_ids.items()
            ),
        )
        stage_modules = {callee: texts[callee] for callee in task_of}
        return BuiltPlan(plan, donated, stage_modules, task_of)

    def _outputs(self, terminator: ir.Operation) -> list[rt.OutputBinding]:
        values = self.values
        outputs = []
        for position, value in enumerate(terminator.operands):
            producer = value.owner
            if isinstance(producer, ir.Operation | ir.OpView) and jaxpp.is_assemble(producer):
                outputs.append(self._assembled(producer, position))
                continue
            if isinstance(producer, ir.Operation | ir.OpView) and jaxpp.is_replicated(producer):
                ranks = jaxpp.get_replica_ranks(producer)
                (value, rank), *others = zip(producer.operands, ranks, strict=True)
                replicas = tuple((values.use(v, r), r) for v, r in others)
            else:
                rank, replicas = values.rank_of(values.ids[value]), ()
            spec = self.specs(value.type)
            outputs.append(rt.OutputBinding(values.use(value, rank), rank, spec, replicas))
        return outputs

    def _assembled(self, assemble: ir.Operation, position: int) -> rt.OutputBinding:
        """Output ``position``, a ``jaxpp.assemble``: its operands' rows in order, each piece
        where it is (a task's result on its rank, a chunk of an input on the chunk's)."""
        values = self.values
        pieces, start = [], 0
        for operand in assemble.operands:
            value_id = values.ids[operand]
            if value_id < values.first_defined:
                raise PartitionError(
                    f"jaxpp.assemble at {assemble.location} (output {position}) takes a whole "
                    "program input as a piece: only task results and chunks are pieces"
                )
            rank = values.rank_of(value_id)
            spec = self.specs(operand.type)
            pieces.append(rt.Piece(values.use(operand, rank), rank, start, spec))
            start += spec.shape[0]
        first = pieces[0]
        return rt.OutputBinding(
            first.value, first.rank, self.specs(assemble.results[0].type), pieces=tuple(pieces)
        )

    def _inputs(self) -> list[rt.InputBinding]:
        values = self.values
        pieces: dict[int, list[rt.Piece]] = {}
        for value_id, chunk in values.chunks.items():
            spec = self.specs(chunk.op.results[0].type)
            if not chunk.ranks:
                raise PartitionError(
                    f"jaxpp.chunk at {chunk.op.location} is read by no task and names no "
                    f"{jaxpp.RANK_ATTR}: no rank holds it"
                )
            pieces.setdefault(chunk.argument, []).extend(
                rt.Piece(value_id, rank, chunk.start, spec) for rank in sorted(chunk.ranks)
            )
        inputs = [
            rt.InputBinding(
                index,
                self.specs(argument.type),
                tuple(sorted(values.input_ranks[index])),
                argument_name(argument),
                tuple(sorted(pieces.get(index, ()), key=lambda p: (p.start, p.rank))),
            )
            for index, argument in enumerate(self.block.arguments)
        ]
        scalar = rt.TensorSpec((), "int32")
        for (_, rank), value_id in values.index_ids.items():
            inputs.append(rt.InputBinding(value_id, scalar, (rank,)))
        return inputs


def _estimated_flops(functions: StageFunctions, source: emission.ModuleSource) -> float:
    """The planner's FLOP estimate of one run of the executable ``source`` makes."""
    callees = source.callees if isinstance(source, Fused) else (source.callee,)
    return sum(nested_flops(functions.function(callee)) for callee in callees)


def _stage_names(module: ir.Module, task_of: dict[str, tuple[int, str]]) -> dict[int, str]:
    """Stage -> the ``jaxpp.stage_name`` that jaxpp-outline-stages put on its functions."""
    names: dict[int, str] = {}
    for op in module.body.operations:
        op = op.operation
        if op.name != "func.func" or jaxpp.STAGE_NAME_ATTR not in op.attributes:
            continue
        callee = ir.StringAttr(op.attributes["sym_name"]).value
        if callee in task_of:
            names[task_of[callee][0]] = ir.StringAttr(op.attributes[jaxpp.STAGE_NAME_ATTR]).value
    return dict(sorted(names.items()))


def _main(module: ir.Module) -> ir.Operation:
    main = find_main(module)
    if main is None:
        raise PartitionError("the partitioned module has no @main")
    return main
