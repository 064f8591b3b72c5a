"""``PartitionedProgram.summary()``: what a partitioned program holds and does per step.

Input bytes of a stage: the program inputs (parameters, data) its forward and backward
tasks read, each once (of an input split into pieces, the rows it reads). Activation
bytes of a stage: what one microbatch's forward task defines (the boundary value and the
residuals kept for the backward). Transfers are counted per step with the bytes they
move; the executable size is the length of its StableHLO text. The simulated makespan
and bubble use the schedule's default costs (a backward costs two forwards).
"""

from __future__ import annotations

from typing import Any

from jaxpp_mlir.dialect.vocabulary import FORWARD
from jaxpp_mlir.runtime.instructions import receive, registry, run
from jaxpp_mlir.runtime.liveness import received_bytes, spec_bytes
from jaxpp_mlir.runtime.observation.memory import peak_bytes_per_rank
from jaxpp_mlir.runtime.plan import ExecutionPlan, Instruction, TaskRef


def _stage_tasks(inst: Instruction) -> list[TaskRef]:
    """The tasks of a stage for a microbatch that ``inst`` runs (not pre/post code)."""
    return [task for task in inst.tasks if task.microbatch is not None]


def num_microbatches(plan: ExecutionPlan) -> int:
    """The number of microbatches the plan's tasks cover (0 without a loop)."""
    found = [task.microbatch for inst in plan.instructions for task in _stage_tasks(inst)]
    return max(found) + 1 if found else 0


def stage_bytes(plan: ExecutionPlan, num_stages: int) -> list[dict[str, int]]:
    """Per stage: ``{"param_bytes", "activation_bytes"}`` (see the module docstring)."""
    values = plan.values
    inputs = {binding.index for binding in plan.inputs}
    inputs |= {piece.value for binding in plan.inputs for piece in binding.pieces}
    params: list[set[tuple[int, int]]] = [set() for _ in range(num_stages)]
    activations = [0] * num_stages
    for inst in plan.instructions:
        tasks = _stage_tasks(inst)
        for task in tasks:
            if task.stage >= num_stages:
                continue
            params[task.stage].update((inst.rank, v) for v in inst.reads() if v in inputs)
            if task.kind == FORWARD and task.microbatch == 0 and len(tasks) == 1:
                written = inst.writes()
                activations[task.stage] = sum(
                    spec_bytes(values[(inst.rank, v)].spec) for v in written
                )
    return [
        {"param_bytes": sum(spec_bytes(values[key].spec) for key in _each_value(params[s])),
         "activation_bytes": activations[s]}
        for s in range(num_stages)
    ]  # fmt: skip


def _each_value(keys: set[tuple[int, int]]) -> list[tuple[int, int]]:
    """One ``(rank, value)`` per value among ``keys`` (an input read on several ranks once)."""
    return list({value: (rank, value) for rank, value in sorted(keys)}.values())


def _size(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(count) < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count} B"


def summary_text(program: Any) -> str:
    """The multi-line summary of a ``PartitionedProgram``."""
    plan: ExecutionPlan = program.plan
    lines = [short_repr(program)]
    schedule = program.schedule
    microbatches = num_microbatches(plan)
    lines.append(f"  schedule: {schedule!r}, {microbatches} microbatches")
    lines.append("  ranks:")
    for rank in range(program.num_ranks):
        devices = ", ".join(f"{d.platform}:{d.id}" for d in program.mesh.rank_devices(rank))
        stages = sorted({t.stage for inst in plan.rank_program(rank) for t in _stage_tasks(inst)})
        lines.append(f"    rank {rank} [{devices}]: stages {stages}")
    lines.append("  stages (inputs: parameters and data read; activations: one forward's outputs):")
    first_segments = [sum(program.stage_split[:s]) for s in range(program.num_stages)]
    merged = any(n > 1 for n in program.stage_split)
    estimate = program.stage_estimate
    for stage, sizes in enumerate(stage_bytes(plan, program.num_stages)):
        first, count = first_segments[stage], program.stage_split[stage]
        segments = (
            ""
            if not merged
            else f" (segment {first})"
            if count == 1
            else f" (segments {first}-{first + count - 1})"
        )
        if first > 0 and program.segment_starts:  # cut by module paths: where it starts
            segments += f" from {program.segment_starts[first - 1]}"
        cost = (
            f", estimated fwd {estimate.stage_forward_s[stage] * 1e3:.3g} ms "
            f"bwd {estimate.stage_backward_s[stage] * 1e3:.3g} ms"
            if estimate is not None
            else ""
        )
        lines.append(
            f"    stage {stage}{_named(plan, stage)}{segments}: "
            f"params {_size(sizes['param_bytes'])}, "
            f"activations {_size(sizes['activation_bytes'])}{cost}"
        )
    counts = registry.count(plan.instructions)
    moved = sum(received_bytes(plan, inst) for inst in plan.instructions)
    lines.append(
        f"  per step: {counts[run.KIND]} tasks, {counts[receive.KIND]} transfers moving "
        f"{_size(moved)}"
    )
    sizes = {name: len(stage.mlir_module) for name, stage in plan.executables.items()}
    largest = max(sizes, key=sizes.get) if sizes else "-"
    lines.append(
        f"  executables: {len(sizes)} ({_size(sum(sizes.values()))} of StableHLO; "
        f"largest {largest}, {_size(sizes.get(largest, 0))})"
    )
    if schedule is not None and microbatches:
        result = schedule.simulate(microbatches)
        lines.append(
            f"  simulated: makespan {result.makespan:g} (forward = 1), "
            f"bubble {result.bubble_fraction:.1%}, peak in-flight microbatches "
            f"{result.peak_in_flight}"
        )
    peaks = peak_bytes_per_rank(plan)
    lines.append(f"  peak bytes per rank: {', '.join(_size(p) for p in peaks)}")
    return "\n".join(lines)


def short_repr(program: Any) -> str:
    """``PartitionedProgram(4 stages on 4 ranks, Std1F1B(num_stages=4), 12 stage functions)``."""
    return (
        f"PartitionedProgram({program.num_stages} stages on {program.num_ranks} ranks, "
        f"{program.schedule!r}, {len(program.stage_modules)} stage functions)"
    )


def _named(plan: Any, stage: int) -> str:
    """`` (name)`` of a stage named by ``mark_stage_end(x, name=...)``, else ""."""
    name = plan.stage_names.get(stage)
    return f" ({name})" if name else ""
