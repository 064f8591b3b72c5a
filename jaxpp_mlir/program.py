"""PartitionedProgram: what ``partition()`` returns.

It holds the partitioned module (pure-StableHLO stage functions plus the
``@main`` task graph of jaxpp ops), one standalone StableHLO module per stage
function, and the ``ExecutionPlan`` the runtime executes.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import jax
from jax.extend.mlir import ir

from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.errors import CallError, PartitionError
from jaxpp_mlir.mesh import MpmdMesh
from jaxpp_mlir.runtime import plan as rt

_MODULE_ATTRS = {"mhlo.num_partitions": 1, "mhlo.num_replicas": 1}


class PartitionedProgram:
    """A step split into stage programs and a task graph over ranks."""

    def __init__(
        self,
        module: ir.Module,
        mesh: MpmdMesh,
        *,
        in_tree: Any = None,
        out_tree: Any = None,
        kept_inputs: Sequence[int] | None = None,
        num_flat_inputs: int | None = None,
    ):
        self._module = module
        self.mesh = mesh
        self.in_tree = in_tree
        self.out_tree = out_tree
        self.kept_inputs = tuple(kept_inputs) if kept_inputs is not None else None
        self.num_flat_inputs = num_flat_inputs
        self.num_stages = jaxpp.get_int_attr(module.operation, jaxpp.NUM_STAGES_ATTR) or 0
        self.num_ranks = jaxpp.get_int_attr(module.operation, jaxpp.NUM_RANKS_ATTR) or 0
        self.stage_modules = _extract_stage_modules(module)
        self.plan = _build_plan(module, self.stage_modules)

    def ir(self) -> str:
        """The whole partitioned module: stage functions and the ``@main`` task graph."""
        return str(self._module)

    def stage_ir(self, stage: int) -> str:
        """The standalone StableHLO module(s) of ``stage`` (forward, then backward)."""
        if not 0 <= stage < self.num_stages:
            raise IndexError(f"stage {stage} is outside [0, {self.num_stages})")
        texts = [
            text
            for name, text in self.stage_modules.items()
            if _stage_of_name(name) == stage
        ]
        return "\n".join(texts)

    def schedule_text(self) -> str:
        """Each rank's ordered instructions, one per line."""
        lines = []
        for rank in range(self.num_ranks):
            lines.append(f"rank {rank}:")
            for inst in self.plan.rank_program(rank):
                lines.append(f"  {_describe(inst)}")
        return "\n".join(lines) + "\n"

    def dump(self, path: str | os.PathLike) -> list[str]:
        """Writes one ``.mlir`` file per stage module, the task graph and the schedule."""
        os.makedirs(path, exist_ok=True)
        written = []
        for name, text in self.stage_modules.items():
            written.append(_write(path, f"{name}.mlir", text))
        written.append(_write(path, "task_graph.mlir", self.ir()))
        written.append(_write(path, "schedule.txt", self.schedule_text()))
        return written

    def compile(self) -> CompiledProgram:
        """Compiles every stage module on its rank's submesh (one PJRT executable each)."""
        from jaxpp_mlir.runtime.executor import compile_plan

        devices = [self.mesh.rank_devices(rank) for rank in range(self.num_ranks)]
        return CompiledProgram(self, compile_plan(self.plan, devices))

    def __repr__(self) -> str:
        names = ", ".join(self.stage_modules)
        return (
            f"PartitionedProgram(num_stages={self.num_stages}, num_ranks={self.num_ranks}, "
            f"stage_functions=[{names}])"
        )


class CompiledProgram:
    """A compiled ``PartitionedProgram``: call it like the original jitted step."""

    def __init__(self, program: PartitionedProgram, executable: Any):
        self.program = program
        self.executable = executable

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        flat = self._flatten_inputs(args, kwargs)
        outputs = self.executable(*flat)
        if self.program.out_tree is None:
            return outputs
        return jax.tree_util.tree_unflatten(self.program.out_tree, outputs)

    def _flatten_inputs(self, args: tuple, kwargs: dict) -> list[Any]:
        program = self.program
        if program.in_tree is None:
            if kwargs:
                raise CallError("a program partitioned from MLIR text takes positional arrays only")
            return list(args)
        leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
        if tree != program.in_tree:
            raise CallError(
                f"the arguments do not have the structure the step was lowered with: "
                f"expected {program.in_tree}, got {tree}"
            )
        if program.kept_inputs is not None:
            leaves = [leaves[i] for i in program.kept_inputs]
        return leaves

    def __repr__(self) -> str:
        return f"CompiledProgram({self.program!r})"


# ------------------------------------------------------------- construction


def _stage_of_name(name: str) -> int:
    return int(name.removeprefix("stage").split("_")[0])


def _extract_stage_modules(module: ir.Module) -> dict[str, str]:
    """One standalone module (public ``@main``) per stage function, in task order."""
    main = _main(module)
    names: list[str] = []
    for op in main.regions[0].blocks[0].operations:
        if jaxpp.is_task(op) and jaxpp.task_callee(op) not in names:
            names.append(jaxpp.task_callee(op))
    symbols = ir.SymbolTable(module.operation)
    modules = {}
    with module.context, ir.Location.unknown():
        for name in names:
            standalone = ir.Module.create()
            for key, value in _MODULE_ATTRS.items():
                standalone.operation.attributes[key] = ir.IntegerAttr.get(
                    ir.IntegerType.get_signless(32), value
                )
            clone = symbols[name].operation.clone(ip=ir.InsertionPoint(standalone.body))
            clone.attributes["sym_name"] = ir.StringAttr.get("main")
            clone.attributes["sym_visibility"] = ir.StringAttr.get("public")
            modules[name] = str(standalone)
    return modules


def _main(module: ir.Module) -> ir.Operation:
    for op in module.body.operations:
        if ir.StringAttr(op.attributes["sym_name"]).value == "main":
            return op.operation
    raise PartitionError("the partitioned module has no @main")


def _spec(value_type: ir.Type) -> rt.TensorSpec:
    tensor = ir.RankedTensorType(value_type)
    return rt.TensorSpec(tuple(tensor.shape), _dtype_name(tensor.element_type))


_FLOAT_TYPES = (
    (ir.F32Type, "float32"),
    (ir.F64Type, "float64"),
    (ir.F16Type, "float16"),
    (ir.BF16Type, "bfloat16"),
)


def _dtype_name(element_type: ir.Type) -> str:
    for type_class, name in _FLOAT_TYPES:
        if isinstance(element_type, type_class):
            return name
    if isinstance(element_type, ir.IntegerType):
        integer = ir.IntegerType(element_type)
        if integer.width == 1:
            return "bool"
        return f"{'uint' if integer.is_unsigned else 'int'}{integer.width}"
    if isinstance(element_type, ir.ComplexType):
        inner = _dtype_name(ir.ComplexType(element_type).element_type)
        return {"float32": "complex64", "float64": "complex128"}[inner]
    raise PartitionError(f"unsupported element type {element_type}")


def _build_plan(module: ir.Module, stage_modules: dict[str, str]) -> rt.ExecutionPlan:
    main = _main(module)
    block = main.regions[0].blocks[0]
    num_ranks = jaxpp.get_int_attr(module.operation, jaxpp.NUM_RANKS_ATTR) or 1
    with module.context:
        ids: dict[ir.Value, int] = {}
        home: dict[ir.Value, int] = {}
        input_ranks: dict[int, set[int]] = {i: set() for i in range(len(block.arguments))}
        for index, argument in enumerate(block.arguments):
            ids[argument] = index
        instructions: list[rt.Instruction] = []
        executables: dict[str, rt.StageExecutable] = {}

        def define(value: ir.Value, rank: int) -> int:
            ids[value] = len(ids)
            home[value] = rank
            return ids[value]

        def use(value: ir.Value, rank: int) -> int:
            if value not in home:
                input_ranks[ids[value]].add(rank)
            return ids[value]

        terminator = None
        for op in block.operations:
            op = op.operation
            if op.name == "func.return":
                terminator = op
                continue
            rank = jaxpp.get_rank(op)
            if jaxpp.is_task(op):
                callee = jaxpp.task_callee(op)
                inputs = tuple(use(v, rank) for v in op.operands)
                outputs = tuple(define(v, rank) for v in op.results)
                if callee not in executables:
                    executables[callee] = rt.StageExecutable(
                        name=callee,
                        rank=rank,
                        mlir_module=stage_modules[callee],
                        input_specs=tuple(_spec(v.type) for v in op.operands),
                        output_specs=tuple(_spec(v.type) for v in op.results),
                    )
                label = f"{jaxpp.get_kind(op)}_{jaxpp.get_stage(op)}__0"
                instructions.append(rt.RunStage(rank, callee, inputs, outputs, label))
            elif jaxpp.is_send(op):
                value = use(op.operands[0], rank)
                instructions.append(
                    rt.Send(rank, jaxpp.get_peer(op), jaxpp.get_channel(op), value)
                )
            elif jaxpp.is_recv(op):
                value = define(op.results[0], rank)
                instructions.append(
                    rt.Recv(
                        rank,
                        jaxpp.get_peer(op),
                        jaxpp.get_channel(op),
                        value,
                        _spec(op.results[0].type),
                    )
                )
        outputs = []
        for value in terminator.operands:
            rank = home.get(value, 0)
            outputs.append(rt.OutputBinding(use(value, rank), rank, _spec(value.type)))
        inputs = tuple(
            rt.InputBinding(index, _spec(argument.type), tuple(sorted(input_ranks[index])))
            for index, argument in enumerate(block.arguments)
        )
    return rt.ExecutionPlan(
        num_ranks=num_ranks,
        executables=executables,
        inputs=inputs,
        outputs=tuple(outputs),
        instructions=tuple(instructions),
    )


def _describe(inst: rt.Instruction) -> str:
    if isinstance(inst, rt.RunStage):
        return f"run {inst.executable} ({inst.label}) {list(inst.inputs)} -> {list(inst.outputs)}"
    if isinstance(inst, rt.Send):
        return f"send %{inst.value} -> rank {inst.peer} (channel {inst.channel})"
    return f"recv %{inst.value} <- rank {inst.peer} (channel {inst.channel}) {inst.spec}"


def _write(directory: str | os.PathLike, name: str, text: str) -> str:
    path = os.path.join(directory, name)
    with open(path, "w") as handle:
        handle.write(text)
    return path
