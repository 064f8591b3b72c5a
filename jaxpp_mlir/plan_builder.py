"""Building the runtime's ``ExecutionPlan`` from a partitioned module and a schedule.

The module's ``@main`` is a task graph; a ``jaxpp.loop`` in it is one
microbatch's task graph. Here the loop is expanded per microbatch in the
order the schedule gives (the IR never is): each scheduled task becomes one
``RunStage`` with its receives before it and its sends after it, and the
global dispatch order follows the schedule's simulated start times. Loop
state is threaded through the microbatches: microbatch m reads what
microbatch m-1 yielded, the first reads the loop's initial value.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from jax.extend.mlir import ir

from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.errors import PartitionError, ScheduleError
from jaxpp_mlir.runtime import plan as rt
from jaxpp_mlir.schedules import FusedTask, Schedule, ScheduleItem
from jaxpp_mlir.stage_modules import (
    Source,
    boundary_shardings,
    donated_arguments,
    fused_boundary_shardings,
    fused_module,
    standalone_module,
)

_FLOAT_TYPES = (
    (ir.F32Type, "float32"),
    (ir.F64Type, "float64"),
    (ir.F16Type, "float16"),
    (ir.BF16Type, "bfloat16"),
)


@dataclasses.dataclass(frozen=True)
class IndexInput:
    """An extra program input: microbatch ``microbatch``'s index, as int32, on ``rank``."""

    microbatch: int
    rank: int

    def array(self) -> np.ndarray:
        return np.asarray(self.microbatch, dtype=np.int32)


@dataclasses.dataclass
class BuiltPlan:
    plan: rt.ExecutionPlan
    index_inputs: list[IndexInput]  # appended, in order, after the program's own inputs
    donated_inputs: frozenset[int]  # program inputs consumed by a call


def tensor_spec(value_type: ir.Type) -> rt.TensorSpec:
    tensor = ir.RankedTensorType(value_type)
    return rt.TensorSpec(tuple(tensor.shape), dtype_name(tensor.element_type))


def dtype_name(element_type: ir.Type) -> str:
    for type_class, name in _FLOAT_TYPES:
        if isinstance(element_type, type_class):
            return name
    if isinstance(element_type, ir.IntegerType):
        if element_type.width == 1:
            return "bool"
        return f"{'uint' if element_type.is_unsigned else 'int'}{element_type.width}"
    if isinstance(element_type, ir.ComplexType):
        inner = dtype_name(element_type.element_type)
        return {"float32": "complex64", "float64": "complex128"}[inner]
    raise PartitionError(f"unsupported element type {element_type}")


def build_plan(
    module: ir.Module,
    stage_modules: dict[str, str],
    *,
    num_ranks: int,
    schedule: Schedule | None,
) -> BuiltPlan:
    with module.context:
        return _Builder(module, stage_modules, num_ranks, schedule).build()


# How a templated instruction names a value: a value id fixed for every microbatch, a
# value the loop body defines (its index in the body, one id per microbatch), or a
# block argument of the loop body (its position: 0 is the microbatch index).
_FIXED, _LOCAL, _LOOP_ARGUMENT = 0, 1, 2


@dataclasses.dataclass(frozen=True)
class _RunTemplate:
    rank: int
    executable: str
    inputs: tuple[tuple[int, int], ...]
    outputs: tuple[int, ...]  # body-local indices
    label: str  # "fwd_2" (the microbatch is appended)


@dataclasses.dataclass(frozen=True)
class _SendTemplate:
    rank: int
    peer: int
    channel: int  # the IR's channel (numbered per microbatch when expanded)
    value: tuple[int, int]


@dataclasses.dataclass(frozen=True)
class _RecvTemplate:
    rank: int
    peer: int
    channel: int
    value: int  # body-local index
    spec: rt.TensorSpec


class _Builder:
    def __init__(
        self,
        module: ir.Module,
        stage_modules: dict[str, str],
        num_ranks: int,
        schedule: Schedule | None,
    ):
        self.module = module
        self.block = _main(module).regions[0].blocks[0]
        self.stage_modules = stage_modules
        self.num_ranks = num_ranks
        self.schedule = schedule
        self.ids: dict[ir.Value, int] = {}  # values outside the loop body
        self.home: dict[int, int] = {}  # value id -> rank; absent for program inputs
        self.num_inputs = len(list(self.block.arguments))
        self.input_ranks: dict[int, set[int]] = {i: set() for i in range(self.num_inputs)}
        self.index_ids = _number_index_inputs(self.block, first_id=self.num_inputs)
        self.next_id = self.num_inputs + len(self.index_ids)
        self.instructions: list[rt.Instruction] = []
        self.executables: dict[str, rt.StageExecutable] = {}
        # fused executable -> its callees, their wiring and its input types
        self.fused: dict[str, tuple[list[str], list[list[Source]], list[ir.Type]]] = {}
        self.fused_names: dict[tuple, str] = {}  # (callees, wiring, input types) -> name
        self.channels: dict[tuple[int, int | None], int] = {}
        self.loop: ir.Operation | None = None
        self.loop_arguments: dict[ir.Value, int] = {}
        self.local: dict[ir.Value, int] = {}  # loop body value -> its index in the body
        self.local_ids: dict[tuple[int, int], int] = {}  # (body index, microbatch) -> id
        self.state_sources: list[tuple[int, int]] = []  # what the body yields, as refs
        self.initial_state: dict[tuple[int, int], int] = {}  # (state, rank) -> id
        for index, argument in enumerate(self.block.arguments):
            self.ids[argument] = index

    # --------------------------------------------------------------- values

    def define(self, value: ir.Value, rank: int, microbatch: int | None = None) -> int:
        value_id = self.next_id
        self.next_id += 1
        if value in self.local:
            self.local_ids[(self.local[value], microbatch)] = value_id
        else:
            self.ids[value] = value_id
        self.home[value_id] = rank
        return value_id

    def use(self, value: ir.Value, rank: int, microbatch: int | None = None) -> int:
        return self.resolve(self.ref(value, rank), rank, microbatch)

    def ref(self, value: ir.Value, rank: int) -> tuple[int, int]:
        """How ``value``, read on ``rank``, is named in every microbatch."""
        if value in self.loop_arguments:
            return (_LOOP_ARGUMENT, self.loop_arguments[value])
        if value in self.local:
            return (_LOCAL, self.local[value])
        if value not in self.ids:
            raise ScheduleError(
                f"the schedule runs a task on rank {rank} before the task that computes "
                "one of its inputs"
            )
        value_id = self.ids[value]
        if value_id < self.num_inputs:
            self.input_ranks[value_id].add(rank)
        return (_FIXED, value_id)

    def resolve(self, ref: tuple[int, int], rank: int, microbatch: int | None) -> int:
        """The value id of ``ref`` in ``microbatch``."""
        kind, index = ref
        if kind == _FIXED:
            return index
        if kind == _LOCAL:
            value_id = self.local_ids.get((index, microbatch))
            if value_id is None:
                raise ScheduleError(
                    f"the schedule runs a task of microbatch {microbatch} on rank {rank} "
                    "before the task that computes one of its inputs"
                )
            return value_id
        if index == 0:
            return self.index_ids[(microbatch, rank)]
        if microbatch == 0:
            key = (index, rank)
            if key not in self.initial_state:
                initial = self.ref(self.loop.operands[index - 1], rank)
                self.initial_state[key] = self.resolve(initial, rank, None)
            return self.initial_state[key]
        source = self.state_sources[index - 1]
        if source[0] == _FIXED and source[1] < self.num_inputs:
            self.input_ranks[source[1]].add(rank)
        if source[0] == _LOCAL and (source[1], microbatch - 1) not in self.local_ids:
            raise ScheduleError(
                f"the schedule runs microbatch {microbatch} before microbatch {microbatch - 1} "
                f"on rank {rank}, but both update the same accumulator (loop state "
                f"{index - 1}): tasks of one stage must run in microbatch order"
            )
        return self.resolve(source, rank, microbatch - 1)

    def _state_source(self, value: ir.Value) -> tuple[int, int]:
        """What the loop body yields for one state, as a ref (no input use recorded)."""
        if value in self.loop_arguments:
            return (_LOOP_ARGUMENT, self.loop_arguments[value])
        if value in self.local:
            return (_LOCAL, self.local[value])
        return (_FIXED, self.ids[value])

    def channel(self, channel: int, microbatch: int | None) -> int:
        key = (channel, microbatch)
        if key not in self.channels:
            self.channels[key] = len(self.channels)
        return self.channels[key]

    # -------------------------------------------------------------- emitting

    def emit(self, op: ir.Operation, microbatch: int | None = None) -> None:
        """Emits one op of ``@main`` outside the loop, or one op of a fused loop task."""
        rank = jaxpp.get_rank(op)
        if jaxpp.is_task(op):
            callee = self._register(op, rank)
            inputs = tuple(self.use(v, rank, microbatch) for v in op.operands)
            outputs = tuple(self.define(v, rank, microbatch) for v in op.results)
            label = _label(op, microbatch)
            self.instructions.append(rt.RunStage(rank, callee, inputs, outputs, label))
        elif jaxpp.is_send(op):
            value = self.use(op.operands[0], rank, microbatch)
            channel = self.channel(jaxpp.get_channel(op), microbatch)
            self.instructions.append(rt.Send(rank, jaxpp.get_peer(op), channel, value))
        elif jaxpp.is_recv(op):
            value = self.define(op.results[0], rank, microbatch)
            channel = self.channel(jaxpp.get_channel(op), microbatch)
            spec = tensor_spec(op.results[0].type)
            self.instructions.append(rt.Recv(rank, jaxpp.get_peer(op), channel, value, spec))

    def _register(self, task: ir.Operation, rank: int) -> str:
        """The callee of ``task``, registered as an executable on first sight."""
        callee = jaxpp.task_callee(task)
        if callee not in self.executables:
            self.executables[callee] = rt.StageExecutable(
                name=callee,
                rank=rank,
                mlir_module=self.stage_modules[callee],
                input_specs=tuple(tensor_spec(v.type) for v in task.operands),
                output_specs=tuple(tensor_spec(v.type) for v in task.results),
            )
        return callee

    def template(self, op: ir.Operation) -> _RunTemplate | _SendTemplate | _RecvTemplate:
        """A loop body op as a microbatch-independent instruction (MLIR is read once)."""
        rank = jaxpp.get_rank(op)
        if jaxpp.is_task(op):
            return _RunTemplate(
                rank,
                self._register(op, rank),
                tuple(self.ref(v, rank) for v in op.operands),
                tuple(self.local[v] for v in op.results),
                f"{jaxpp.get_kind(op)}_{jaxpp.get_stage(op)}",
            )
        if jaxpp.is_send(op):
            return _SendTemplate(
                rank, jaxpp.get_peer(op), jaxpp.get_channel(op), self.ref(op.operands[0], rank)
            )
        result = op.results[0]
        return _RecvTemplate(
            rank,
            jaxpp.get_peer(op),
            jaxpp.get_channel(op),
            self.local[result],
            tensor_spec(result.type),
        )

    def expand(self, templates: list, microbatch: int | None) -> None:
        """Appends the instructions of ``templates`` for ``microbatch``."""
        append = self.instructions.append
        resolve = self.resolve
        for template in templates:
            rank = template.rank
            if type(template) is _RunTemplate:
                inputs = tuple(
                    ref[1] if ref[0] == _FIXED else resolve(ref, rank, microbatch)
                    for ref in template.inputs
                )
                outputs = self._define_slots(template.outputs, rank, microbatch)
                label = f"{template.label}__{microbatch or 0}"
                append(rt.RunStage(rank, template.executable, inputs, outputs, label))
            elif type(template) is _SendTemplate:
                value = resolve(template.value, rank, microbatch)
                channel = self.channel(template.channel, microbatch)
                append(rt.Send(rank, template.peer, channel, value))
            else:
                (value,) = self._define_slots((template.value,), rank, microbatch)
                channel = self.channel(template.channel, microbatch)
                append(rt.Recv(rank, template.peer, channel, value, template.spec))

    def _define_slots(
        self, slots: tuple[int, ...], rank: int, microbatch: int | None
    ) -> tuple[int, ...]:
        first = self.next_id
        self.next_id += len(slots)
        value_ids = tuple(range(first, self.next_id))
        self.local_ids.update(zip([(slot, microbatch) for slot in slots], value_ids, strict=True))
        self.home.update(dict.fromkeys(value_ids, rank))
        return value_ids

    def emit_loop(self, loop: ir.Operation) -> None:
        body = jaxpp.loop_body(loop)
        self.loop = loop
        self.loop_arguments = {a: i for i, a in enumerate(body.arguments)}
        body_ops = [op.operation for op in body.operations]
        for op in body_ops:
            for result in op.results:
                self.local[result] = len(self.local)
        self.state_sources = [self._state_source(v) for v in body_ops[-1].operands]
        num_microbatches = jaxpp.get_int_attr(loop, jaxpp.LOOP_NUM_MICROBATCHES_ATTR)
        units = _task_units(body)
        templates: dict[tuple[int, str], list] = {}
        if self.schedule is None:
            raise ScheduleError("a program with a microbatch loop needs a schedule")
        scheduled: set[tuple[int, str]] = set()
        for item in _dispatch_order(self.schedule, num_microbatches):
            parts = item.tasks if isinstance(item, FusedTask) else (item,)
            # A task the program lacks (no backward in an inference loop) is skipped; a
            # program task the schedule lacks is an error, below. A whole backward runs
            # as its two halves when the program's backward is split.
            selected = []
            for task in parts:
                kinds = [task.kind]
                if task.kind == jaxpp.BACKWARD and (task.stage, task.kind) not in units:
                    kinds = [jaxpp.BACKWARD_INPUT, jaxpp.BACKWARD_WEIGHT]
                for kind in kinds:
                    scheduled.add((task.stage, kind))
                    if (task.stage, kind) in units:
                        selected.append(((task.stage, kind), task.microbatch))
            if len(selected) > 1 and isinstance(item, FusedTask):
                self.emit_fused([(units[key], microbatch) for key, microbatch in selected])
                continue
            for key, microbatch in selected:
                if key not in templates:
                    templates[key] = [self.template(op) for op in units[key]]
                self.expand(templates[key], microbatch)
        missing = sorted(set(units) - scheduled)
        if missing:
            stage, kind = missing[0]
            raise ScheduleError(
                f"the program has a {kind} task for stage {stage} that the schedule "
                f"{self.schedule!r} never runs (does the schedule split the backward?)"
            )
        last = num_microbatches - 1
        for index, result in enumerate(loop.results):
            kind, source = self.state_sources[index]
            if kind == _LOOP_ARGUMENT:
                raise PartitionError(
                    f"loop state {index} is yielded straight from a loop argument: the loop "
                    "state must be computed by the loop's tasks"
                )
            self.ids[result] = self.local_ids[(source, last)] if kind == _LOCAL else source

    def emit_fused(self, parts: list[tuple[list[ir.Operation], int]]) -> None:
        """Runs the tasks of ``parts`` as one executable: receives, one run, then sends."""
        tasks = [next(op for op in unit if jaxpp.is_task(op)) for unit, _ in parts]
        rank = jaxpp.get_rank(tasks[0])
        for unit, microbatch in parts:
            for op in unit:
                if jaxpp.is_recv(op):
                    self.emit(op, microbatch)
        defined_by: dict[int, tuple[int, int]] = {}
        inputs: list[int] = []
        input_types: list[ir.Type] = []
        wiring: list[list[tuple]] = []
        outputs: list[int] = []
        for part, (task, (_, microbatch)) in enumerate(zip(tasks, parts, strict=True)):
            sources: list[tuple] = []
            for value in task.operands:
                value_id = self.use(value, rank, microbatch)
                if value_id in defined_by:
                    sources.append(("part", *defined_by[value_id]))
                else:
                    if value_id not in inputs:
                        inputs.append(value_id)
                        input_types.append(value.type)
                    sources.append(("input", inputs.index(value_id)))
            wiring.append(sources)
            for index, value in enumerate(task.results):
                value_id = self.define(value, rank, microbatch)
                defined_by[value_id] = (part, index)
                outputs.append(value_id)
        callees = [jaxpp.task_callee(t) for t in tasks]
        # One executable per way of wiring the parts: a schedule may fuse the same tasks
        # with different values shared between them (within a microbatch or across two).
        key = (tuple(callees), tuple(map(tuple, wiring)), tuple(map(str, input_types)))
        if key not in self.fused_names:
            base = "fused__" + "__".join(callees)
            taken = sum(1 for other in self.fused_names if other[0] == key[0])
            self.fused_names[key] = base if not taken else f"{base}__v{taken + 1}"
        name = self.fused_names[key]
        if name not in self.executables:
            self.fused[name] = (callees, wiring, input_types)
            self.executables[name] = rt.StageExecutable(
                name=name,
                rank=rank,
                mlir_module=fused_module(self.module, callees, wiring, input_types),
                input_specs=tuple(tensor_spec(t) for t in input_types),
                output_specs=tuple(tensor_spec(v.type) for t in tasks for v in t.results),
            )
        labels = [
            _label(task, microbatch) for task, (_, microbatch) in zip(tasks, parts, strict=True)
        ]
        label = f"FusedTask({', '.join(labels)})"
        self.instructions.append(rt.RunStage(rank, name, tuple(inputs), tuple(outputs), label))
        for unit, microbatch in parts:
            for op in unit:
                if jaxpp.is_send(op):
                    self.emit(op, microbatch)

    def build(self) -> BuiltPlan:
        terminator = None
        for op in self.block.operations:
            op = op.operation
            if op.name == "func.return":
                terminator = op
            elif jaxpp.is_loop(op):
                self.emit_loop(op)
            else:
                self.emit(op)
        outputs = []
        for value in terminator.operands:
            value_id = self.ids[value]
            rank = self.home.get(value_id, 0)
            outputs.append(rt.OutputBinding(self.use(value, rank), rank, tensor_spec(value.type)))
        inputs = [
            rt.InputBinding(
                index,
                tensor_spec(argument.type),
                tuple(sorted(self.input_ranks[index])),
                _argument_name(argument),
            )
            for index, argument in enumerate(self.block.arguments)
        ]
        scalar = rt.TensorSpec((), "int32")
        for (_, rank), value_id in self.index_ids.items():
            inputs.append(rt.InputBinding(value_id, scalar, (rank,)))
        donated = frozenset(donated_arguments(self.module))
        self._alias_donated_inputs(donated)
        plan = rt.ExecutionPlan(
            num_ranks=self.num_ranks,
            executables=self.executables,
            inputs=tuple(inputs),
            outputs=tuple(outputs),
            instructions=tuple(self.instructions),
        )
        return BuiltPlan(plan, [IndexInput(m, r) for m, r in self.index_ids], donated)

    def _alias_donated_inputs(self, donated: frozenset[int]) -> None:
        """Lets the last task reading a donated input on a rank write a result in its place.

        Only a task that runs once per step (code before or after the loop,
        the optimizer update) may consume the buffer, and only where the input
        is its argument once and a result has the same shape, dtype and
        sharding (XLA updates a buffer in place only shard for shard; without
        a match the input is just freed after its last use, as ``jax.jit``
        does with a donation it cannot use).
        """
        if not donated:
            return
        runs_per_executable: dict[str, int] = {}
        # (input, rank) -> the last task on that rank reading the input, unless a send of
        # the input follows it there; in order of first reading.
        last_reader: dict[tuple[int, int], rt.RunStage] = {}
        for inst in self.instructions:
            if isinstance(inst, rt.RunStage):
                runs_per_executable[inst.executable] = (
                    runs_per_executable.get(inst.executable, 0) + 1
                )
                for index in donated.intersection(inst.inputs):
                    last_reader[(index, inst.rank)] = inst
            elif isinstance(inst, rt.Send) and inst.value in donated:
                last_reader.pop((inst.value, inst.rank), None)
        readers: dict[int, list[rt.RunStage]] = {}
        for (index, _), inst in last_reader.items():
            readers.setdefault(index, []).append(inst)
        aliases: dict[str, dict[int, int]] = {}
        for index in sorted(readers):
            for inst in readers[index]:
                if runs_per_executable[inst.executable] != 1 or inst.inputs.count(index) != 1:
                    continue
                stage = self.executables[inst.executable]
                position = inst.inputs.index(index)
                taken = set(aliases.get(inst.executable, {}).values())
                in_shardings, out_shardings = self._boundary_shardings(inst.executable)
                for output, spec in enumerate(stage.output_specs):
                    if (
                        spec == stage.input_specs[position]
                        and _same_sharding(out_shardings[output], in_shardings[position])
                        and output not in taken
                    ):
                        aliases.setdefault(inst.executable, {})[position] = output
                        break
        for name, mapping in aliases.items():
            stage = self.executables[name]
            if name in self.fused:
                callees, wiring, input_types = self.fused[name]
                text = fused_module(self.module, callees, wiring, input_types, mapping)
            else:
                text = standalone_module(self.module, name, mapping)
            self.executables[name] = dataclasses.replace(stage, mlir_module=text)

    def _boundary_shardings(
        self, name: str
    ) -> tuple[list[ir.Attribute | None], list[ir.Attribute | None]]:
        """The ``sdy.sharding`` of each input and output of executable ``name``."""
        if name in self.fused:
            callees, wiring, input_types = self.fused[name]
            return fused_boundary_shardings(self.module, callees, wiring, len(input_types))
        return boundary_shardings(self.module, name)


def _same_sharding(a: ir.Attribute | None, b: ir.Attribute | None) -> bool:
    """Whether two boundary shardings are the same (both absent on an unsharded step)."""
    if a is None or b is None:
        return a is None and b is None
    return a == b


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


def _argument_name(argument: ir.Value) -> str:
    """The path jax's lowering names an argument of ``@main`` with (``params['w'][0]``)."""
    location = ir.Location.from_attr(argument.location.attr)
    return location.name_str if isinstance(location, ir.NameLoc) else ""


def _label(task: ir.Operation, microbatch: int | None) -> str:
    return f"{jaxpp.get_kind(task)}_{jaxpp.get_stage(task)}__{microbatch or 0}"


def _main(module: ir.Module) -> ir.Operation:
    for op in module.body.operations:
        if ir.StringAttr(op.attributes["sym_name"]).value == "main":
            return op.operation
    raise PartitionError("the partitioned module has no @main")


def _task_units(body: ir.Block) -> dict[tuple[int, str], list[ir.Operation]]:
    """Per (stage, kind): its receives, the task, then the sends of its results."""
    ops = [o.operation for o in body.operations][:-1]
    tasks = [op for op in ops if jaxpp.is_task(op)]
    position = {op: i for i, op in enumerate(ops)}
    units: dict[ir.Operation, list[ir.Operation]] = {task: [] for task in tasks}
    sends: dict[ir.Operation, list[ir.Operation]] = {task: [] for task in tasks}
    for op in ops:
        if jaxpp.is_recv(op):
            users = [
                u.owner.operation if isinstance(u.owner, ir.OpView) else u.owner
                for u in op.results[0].uses
            ]
            first = min((u for u in users if u in units), key=lambda u: position[u])
            units[first].append(op)
        elif jaxpp.is_send(op):
            producer = op.operands[0].owner
            producer = producer.operation if isinstance(producer, ir.OpView) else producer
            sends[producer].append(op)
    result = {}
    for task in tasks:
        key = (jaxpp.get_stage(task), jaxpp.get_kind(task))
        if key in result:
            raise PartitionError(f"two tasks for stage {key[0]} ({key[1]}) in the loop")
        result[key] = units[task] + [task] + sends[task]
    return result


def _dispatch_order(schedule: Schedule, num_microbatches: int) -> list[ScheduleItem]:
    """Every scheduled item once, ordered by simulated start time (ties: rank, position)."""
    per_rank = schedule.tasks(num_microbatches)
    simulation = schedule.simulate(num_microbatches)
    entries = []
    for rank, items in enumerate(per_rank):
        for position, item in enumerate(items):
            first = item.tasks[0] if isinstance(item, FusedTask) else item
            entries.append((simulation.start_times[first], rank, position, item))
    entries.sort(key=lambda entry: entry[:3])
    return [entry[-1] for entry in entries]
