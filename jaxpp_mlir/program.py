"""PartitionedProgram: what ``partition()`` returns.

It holds the partitioned module (pure-StableHLO stage functions plus the
``@main`` task graph of jaxpp ops), one standalone StableHLO module per stage
function, and the ``ExecutionPlan`` the runtime executes.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

import jax
from jax.interpreters.mlir import ir

from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.errors import CallError
from jaxpp_mlir.ir.utils import find_loop, find_main
from jaxpp_mlir.mesh import MpmdMesh
from jaxpp_mlir.plan import build_plan
from jaxpp_mlir.runtime import records
from jaxpp_mlir.runtime.executable import PlanExecutable
from jaxpp_mlir.runtime.host_heap import collector_paused
from jaxpp_mlir.runtime.observation import phases
from jaxpp_mlir.runtime.observation.memory import peak_bytes_per_rank
from jaxpp_mlir.schedules import Schedule
from jaxpp_mlir.schedules.record import schedule_from_record

if TYPE_CHECKING:
    from jaxpp_mlir.runtime.multiprocess.distributed import DistributedOptions


@records.frozen
class TreeInfo:
    """How a lowered step's pytrees map onto the module's flat arguments and results
    (all None for MLIR text: positional arrays in, a list out)."""

    in_tree: jax.tree_util.PyTreeDef | None = None
    out_tree: jax.tree_util.PyTreeDef | None = None
    kept_inputs: tuple[int, ...] | None = None  # the leaves jax kept (None: all)
    # Per output, the PRNG implementation of a typed key (its data runs as uint32), or None.
    output_key_impls: tuple[Any, ...] | None = None


class PartitionedProgram:
    """A step split into stage programs and a task graph over ranks.

    Built from the module ``partition``'s pipeline left: its stage functions, ``@main``
    task graph, and the decisions the passes recorded on it (the schedule
    jaxpp-choose-stages chose, ``jaxpp.schedule``; the stage split and its estimate).
    """

    def __init__(self, module: ir.Module, mesh: MpmdMesh, *, tree: TreeInfo | None = None):
        tree = tree or TreeInfo()
        self._module = module
        self.mesh = mesh
        self.in_tree = tree.in_tree
        self.out_tree = tree.out_tree
        self.kept_inputs = tree.kept_inputs
        self.output_key_impls = tree.output_key_impls
        record = jaxpp.get_schedule(module.operation)
        self.schedule: Schedule | None = schedule_from_record(record) if record else None
        self.num_stages = jaxpp.get_int_attr(module.operation, jaxpp.NUM_STAGES_ATTR) or 0
        self.num_ranks = jaxpp.get_int_attr(module.operation, jaxpp.NUM_RANKS_ATTR) or 0
        self.num_microbatches = _num_microbatches(module)  # None without a treduce loop
        # Segments per stage (one each unless the stages merge segments).
        self.stage_split: tuple[int, ...] = jaxpp.get_stage_split(module.operation) or (
            (1,) * self.num_stages
        )
        # Where the step was cut by module paths (split points, repeated blocks): the
        # module each segment after the first starts at (empty otherwise).
        self.segment_starts: tuple[str, ...] = tuple(jaxpp.segment_starts(module.operation))
        # The planner's estimate of the split (a planner.stage_split.SplitEstimate), where
        # jaxpp-choose-stages chose or checked it with the planner.
        self.stage_estimate: Any = _stage_estimate(module)
        built = build_plan(module, num_ranks=self.num_ranks, schedule=self.schedule)
        self.stage_modules = built.stage_modules
        self._task_of = built.task_of  # stage function -> its task's (stage, kind)
        self.plan = built.plan
        self.index_inputs = built.plan.constants  # the microbatch indices
        self.donated_inputs = built.donated_inputs

    def ir(self) -> str:
        """The whole partitioned module: stage functions and the ``@main`` task graph."""
        return str(self._module)

    def stage_ir(self, stage: int) -> str:
        """The standalone StableHLO module(s) of ``stage`` (forward, then backward)."""
        if not 0 <= stage < self.num_stages:
            raise IndexError(f"stage {stage} is outside [0, {self.num_stages})")
        texts = self.stage_module_texts(stage)
        if any(count > 1 for count in self.stage_split):
            texts.insert(0, self._merged_stage_note(stage))
        return "\n".join(texts)

    def stage_module_texts(self, stage: int) -> list[str]:
        """The standalone StableHLO module of each task function of ``stage``."""
        return [self.stage_modules[name] for name in self._stage_function_names(stage)]

    def stage_functions(self, stage: int) -> list[ir.Operation]:
        """The ``func.func`` op, in the partitioned module, of each task function of ``stage``."""
        symbols = ir.SymbolTable(self._module.operation)
        return [symbols[name].operation for name in self._stage_function_names(stage)]

    def _stage_function_names(self, stage: int) -> list[str]:
        return [
            name
            for name in self.stage_modules
            if self._task_of[name][0] == stage and self._task_of[name][1] in jaxpp.KINDS
        ]

    def _merged_stage_note(self, stage: int) -> str:
        """``// stage 1: marked segments 2-3 of 8; estimated ...`` for a merged program."""
        first = sum(self.stage_split[:stage])
        last = first + self.stage_split[stage] - 1
        note = f"// stage {stage}: marked segments {first}-{last} of {sum(self.stage_split)}"
        estimate = self.stage_estimate
        if estimate is not None:
            note += (
                f"; estimated forward {estimate.stage_forward_s[stage] * 1e3:.3g} ms, "
                f"backward {estimate.stage_backward_s[stage] * 1e3:.3g} ms"
            )
        return note

    def schedule_text(self) -> str:
        """Each rank's ordered instructions, one per line."""
        lines = []
        for rank in range(self.num_ranks):
            lines.append(f"rank {rank}:")
            for inst in self.plan.rank_program(rank):
                lines.append(f"  {inst.listing()}")
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

    def placement(self, tree: Any) -> Any:
        """``tree`` (say this program's outputs) with each array replaced by where it lives.

        Each leaf prints like JaxPP's ``MpmdArray``: shape, dtype, ranks, sharding.
        """
        from jaxpp_mlir.placement import placement

        return placement(tree, self.mesh)

    def peak_bytes_per_rank(self) -> list[int]:
        """Bytes each rank holds at peak during a step (values freed after their last use)."""
        return peak_bytes_per_rank(self.plan)

    def compile(self, *, options: DistributedOptions | None = None) -> CompiledProgram:
        """Compiles every stage module on its rank's submesh (one PJRT executable each).

        With several processes (``jax.process_count() > 1``) each process compiles
        and runs only its own ranks (``jaxpp_mlir.runtime.multiprocess.distributed``; ``options``
        is a ``DistributedOptions``).
        """
        with collector_paused():
            from jaxpp_mlir.runtime.execution.executor import compile_plan

            devices = [self.mesh.rank_devices(rank) for rank in range(self.num_ranks)]
            if jax.process_count() > 1:
                return self._compile_distributed(devices, options)
            compiled = compile_plan(
                self.plan,
                devices,
                rank_meshes=self.mesh.unstack,
                mpmd_axis=self.mesh.mpmd_axis_name,
            )
            with phases.timed("compile: place constants"):
                constants = compiled.place_constants()
            return CompiledProgram(self, compiled, constants)

    def _compile_distributed(
        self, devices: list, options: DistributedOptions | None
    ) -> CompiledProgram:
        from jaxpp_mlir.runtime.multiprocess.distributed import compile_distributed

        executable = compile_distributed(
            self.plan,
            devices,
            options=options,
            rank_meshes=self.mesh.unstack,
            mpmd_axis=self.mesh.mpmd_axis_name,
        )
        return CompiledProgram(self, executable, executable.place_constants())

    def summary(self) -> str:
        """Stages, ranks and devices, bytes per stage, tasks and transfers per step,
        executables, the simulated makespan and bubble, peak bytes per rank."""
        from jaxpp_mlir.observe.summary import summary_text

        return summary_text(self)

    def __repr__(self) -> str:
        from jaxpp_mlir.observe.summary import short_repr

        return short_repr(self)


class CompiledProgram:
    """A compiled ``PartitionedProgram``: call it like the original jitted step."""

    def __init__(
        self, program: PartitionedProgram, executable: PlanExecutable, index_arrays: list[Any]
    ):
        self.program = program
        self.executable = executable
        self._index_arrays = index_arrays  # microbatch indices, placed once on their ranks
        # An input the step returns unchanged is that output: donated or not, it stays alive
        # (so does an input one of whose pieces is returned unchanged).
        plan = program.plan
        returned = {value for output in plan.outputs for value, _ in output.held()}
        returned |= {b.index for b in plan.inputs if any(p.value in returned for p in b.pieces)}
        self._donated_not_returned = tuple(
            index for index in sorted(program.donated_inputs) if index not in returned
        )
        # Calls from several threads dispatch one at a time (the devices still run them
        # asynchronously): a call sees the inputs an earlier call donated as deleted and
        # says so, instead of racing XLA for their buffers (jaxlib 0.10 can crash there).
        self._dispatching = threading.Lock()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self._dispatching:
            flat = self._flatten_inputs(args, kwargs)
            outputs = self.executable(*flat, *self._index_arrays)
            for index in self._donated_not_returned:
                donated = flat[index]
                if isinstance(donated, jax.Array) and not donated.is_deleted():
                    donated.delete()  # donated: the caller may not use it again, as jax.jit
        if self.program.output_key_impls is not None:
            outputs = [
                out
                if impl is None or not isinstance(out, jax.Array)
                else jax.random.wrap_key_data(out, impl=impl)
                for out, impl in zip(outputs, self.program.output_key_impls, strict=True)
            ]
        if self.program.out_tree is None:
            return outputs
        return jax.tree_util.tree_unflatten(self.program.out_tree, outputs)

    def placement(self, tree: Any) -> Any:
        """See ``PartitionedProgram.placement``."""
        return self.program.placement(tree)

    def gather(self, outputs: Any) -> Any:
        """``outputs`` (a pytree of this program's outputs) as host numpy arrays.

        With several processes, an output held by another process is fetched
        from it: every process must call ``gather`` with the same structure.
        """
        from jaxpp_mlir.runtime.multiprocess.distributed import gather

        return gather(outputs)

    def _flatten_inputs(self, args: tuple, kwargs: dict) -> list[Any]:
        program = self.program
        if program.in_tree is None:
            if kwargs:
                raise CallError("a program partitioned from MLIR text takes positional arrays only")
            expected = len(program.plan.inputs) - len(program.index_inputs)
            if len(args) != expected:
                raise CallError(f"the program takes {expected} arrays, got {len(args)}")
            return list(args)
        try:
            leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
        except (RecursionError, SystemError):  # SystemError: jax's C++ recursion guard
            raise CallError(
                "the arguments nest too deeply to be flattened (a pytree deeper than "
                "Python's recursion limit)"
            ) from None
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


def _write(directory: str | os.PathLike, name: str, text: str) -> str:
    path = os.path.join(directory, name)
    with open(path, "w") as handle:
        handle.write(text)
    return path


def _num_microbatches(module: ir.Module) -> int | None:
    main = find_main(module.operation)
    loop = find_loop(main) if main is not None else None
    return jaxpp.get_int_attr(loop, jaxpp.LOOP_NUM_MICROBATCHES_ATTR) if loop is not None else None


def _stage_estimate(module: ir.Module) -> Any:
    record = jaxpp.get_stage_estimate(module.operation)
    if record is None:
        return None
    from jaxpp_mlir.planner.stage_split import SplitEstimate

    return SplitEstimate(**record)
