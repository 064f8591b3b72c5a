"""Which values a plan sends between ranks without saying how they are laid out."""

from __future__ import annotations

from jaxpp_mlir.runtime.instructions import receive, run, send
from jaxpp_mlir.runtime.plan import ExecutionPlan


def unlaid_transfers(plan: ExecutionPlan) -> list[str]:
    """Each send whose value has no layout on the sender (its producer's output spec, else
    its first reader's input spec there) and each receive whose spec has none, described."""
    known: dict[tuple[int, int], bool] = {}
    for inst in plan.instructions:
        if inst.kind == run.KIND:
            stage = plan.executables[inst.executable]
            for value, spec in zip(inst.outputs, stage.output_specs, strict=True):
                known[(inst.rank, value)] = spec.layout is not None
    for inst in plan.instructions:
        if inst.kind == run.KIND:
            stage = plan.executables[inst.executable]
            for value, spec in zip(inst.inputs, stage.input_specs, strict=True):
                known.setdefault((inst.rank, value), spec.layout is not None)
    missing = []
    for inst in plan.instructions:
        if inst.kind == send.KIND and not known.get((inst.rank, inst.value), False):
            missing.append(str(inst))
        elif inst.kind == receive.KIND and inst.spec.layout is None:
            missing.append(str(inst))
    return missing
