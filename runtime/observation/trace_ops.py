"""What each generated dispatch operation of a compiled plan does, for the tracer.

``describe_ops`` turns a ``CompiledPlan``'s operations into ``OpInfo`` records
(rank, task fields, output slots, the transfers it sends or receives) once per
plan, and ``live_bytes_after`` models the bytes each rank holds after every
instruction, so that recording a step costs nothing per operation beyond a
timestamp.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np

from ..execution.slots import CopyStep
from ..plan import ExecutionPlan, Recv, RunStage, Send, TensorSpec

_LABEL = re.compile(r"(fwd|bwd_i|bwd_w|bwd)_(\d+)__(\d+)")


def spec_bytes(spec: TensorSpec) -> int:
    return int(np.prod(spec.shape, dtype=np.int64)) * np.dtype(spec.dtype).itemsize


def task_fields(label: str) -> list[dict[str, Any]]:
    """``[{"stage", "kind", "microbatch"}]`` of each task a run label names (fused: several)."""
    return [
        {"kind": kind, "stage": int(stage), "microbatch": int(mb)}
        for kind, stage, mb in _LABEL.findall(label)
    ]


@dataclasses.dataclass
class OpInfo:
    """What one generated dispatch operation does, for the trace."""

    kind: str  # "run", "send", "copy", "reshard", "free"
    rank: int
    name: str
    args: dict[str, Any]
    output_slots: tuple[int, ...]
    recvs: tuple[Recv, ...] = ()
    sends: tuple[Send, ...] = ()
    live_after: int = 0  # bytes its rank holds after it (see live_bytes_after)


def describe_ops(plan: Any) -> list[OpInfo]:
    """One ``OpInfo`` per generated operation of a ``CompiledPlan`` (``plan._ops``).

    Operations cover the plan's instructions in order (``plan._op_end[i]`` is how
    many are done after operation i); a run of receives may become several
    operations (reshards, then one batched copy), all ending at the same count.
    """
    execution: ExecutionPlan = plan.plan
    steps = plan._steps
    live = live_bytes_after(execution)
    infos: list[OpInfo] = []
    group_start = previous_end = 0
    group_end = -1
    group_recvs_given = False
    for op, end in zip(plan._ops, plan._op_end, strict=True):
        kind = op.kind
        if kind in ("run", "send"):
            group_start = previous_end = end
            inst = execution.instructions[end - 1]
            if isinstance(inst, RunStage):
                parts = task_fields(inst.label)
                for part in parts:
                    if part["stage"] in execution.stage_names:
                        part["stage_name"] = execution.stage_names[part["stage"]]
                args = {"executable": inst.executable, "label": inst.label}
                if len(parts) == 1:
                    args.update(parts[0])
                elif parts:
                    args["tasks"] = parts
                outs = tuple(steps[end - 1].outputs)
                name = _run_name(inst)
                infos.append(OpInfo("run", inst.rank, name, args, outs))
            else:
                assert isinstance(inst, Send)
                args = {"channel": inst.channel, "to_rank": inst.peer}
                infos.append(OpInfo("send", inst.rank, "send", args, (), sends=(inst,)))
            continue
        if end != group_end:  # a new run of receives
            group_start, group_end, group_recvs_given = previous_end, end, False
        previous_end = end
        recvs = tuple(execution.instructions[k] for k in range(group_start, end))
        recvs = tuple(r for r in recvs if isinstance(r, Recv))
        outs = tuple(
            steps[k].destination for k in range(group_start, end) if isinstance(steps[k], CopyStep)
        )
        rank = recvs[0].rank if recvs else 0
        total = sum(spec_bytes(r.spec) for r in recvs)
        given = () if group_recvs_given else recvs
        group_recvs_given = True
        args = {"values": len(recvs), "bytes": total}
        infos.append(OpInfo(kind, rank, f"recv {total} B", args, outs, recvs=given))
    for info, end in zip(infos, plan._op_end, strict=True):
        info.live_after = live[end - 1][info.rank] if end > 0 else 0
    return infos


def _run_name(inst: RunStage) -> str:
    parts = task_fields(inst.label)
    short = {"fwd": "F", "bwd": "B", "bwd_i": "I", "bwd_w": "W"}
    if parts:
        return "+".join(f"{short[p['kind']]}{p['stage']}.{p['microbatch']}" for p in parts)
    return inst.label or inst.executable


def live_bytes_after(plan: ExecutionPlan) -> list[list[int]]:
    """Per instruction, the bytes each rank holds right after it.

    The runtime's own bookkeeping (as ``memory.peak_bytes_per_rank`` models it):
    inputs live from the start on the ranks that read them, a value dies after its
    last use on its rank (outputs live to the end), a value in flight counts on its
    sender until received. Computed once per plan, so the counter costs nothing per
    operation.
    """
    specs: dict[int, TensorSpec] = {b.index: b.spec for b in plan.inputs}
    last_use: dict[tuple[int, int], int] = {}
    for at, inst in enumerate(plan.instructions):
        if isinstance(inst, RunStage):
            stage = plan.executables[inst.executable]
            specs.update(zip(inst.outputs, stage.output_specs, strict=True))
            for value in inst.inputs:
                last_use[(inst.rank, value)] = at
        elif isinstance(inst, Send):
            last_use[(inst.rank, inst.value)] = at
        else:
            specs[inst.value] = inst.spec
    end = len(plan.instructions)
    for output in plan.outputs:
        last_use[(output.rank, output.value)] = end
    live = [0] * plan.num_ranks
    held: dict[tuple[int, int], int] = {}
    for binding in plan.inputs:
        for rank in binding.ranks:
            if (rank, binding.index) in last_use:
                held[(rank, binding.index)] = spec_bytes(binding.spec)
                live[rank] += held[(rank, binding.index)]
    in_flight: dict[int, tuple[int, int]] = {}
    result: list[list[int]] = []
    for at, inst in enumerate(plan.instructions):
        defined: list[tuple[int, int]] = []
        read: list[tuple[int, int]] = []
        if isinstance(inst, RunStage):
            defined = [(inst.rank, v) for v in inst.outputs]
            read = [(inst.rank, v) for v in inst.inputs]
        elif isinstance(inst, Send):
            size = spec_bytes(specs[inst.value])
            in_flight[inst.channel] = (inst.rank, size)
            live[inst.rank] += size
            read = [(inst.rank, inst.value)]
        else:
            sender, size = in_flight.pop(inst.channel, (inst.peer, 0))
            live[sender] -= size
            defined = [(inst.rank, inst.value)]
        for key in defined:
            held[key] = spec_bytes(specs[key[1]])
            live[key[0]] += held[key]
        for key in read + defined:
            if last_use.get(key, at) <= at and key in held:
                live[key[0]] -= held.pop(key)
        result.append(list(live))
    return result
