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
from typing import TYPE_CHECKING, Any

from ..execution.slots import CopyStep
from ..liveness import live_bytes, spec_bytes
from ..plan import ExecutionPlan, Recv, RunStage, Send

if TYPE_CHECKING:  # the executor imports the tracer
    from ..execution.executor import DispatchView

_LABEL = re.compile(r"(fwd|bwd_i|bwd_w|bwd)_(\d+)__(\d+)")


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


def describe_ops(dispatch: DispatchView) -> list[OpInfo]:
    """One ``OpInfo`` per generated operation of a compiled plan (``dispatch.ops``).

    Operations cover the plan's instructions in order (``dispatch.op_end[i]`` is how
    many are done after operation i); a run of receives may become several
    operations (reshards, then one batched copy), all ending at the same count.
    """
    execution = dispatch.plan
    steps = dispatch.steps
    live = live_bytes_after(execution)
    infos: list[OpInfo] = []
    group_start = previous_end = 0
    group_end = -1
    group_recvs_given = False
    for op, end in zip(dispatch.ops, dispatch.op_end, strict=True):
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
    for info, end in zip(infos, dispatch.op_end, strict=True):
        info.live_after = live[end - 1][info.rank] if end > 0 else 0
    return infos


def _run_name(inst: RunStage) -> str:
    parts = task_fields(inst.label)
    short = {"fwd": "F", "bwd": "B", "bwd_i": "I", "bwd_w": "W"}
    if parts:
        return "+".join(f"{short[p['kind']]}{p['stage']}.{p['microbatch']}" for p in parts)
    return inst.label or inst.executable


def live_bytes_after(plan: ExecutionPlan) -> list[list[int]]:
    """Per instruction, the bytes each rank holds right after it (``liveness.live_bytes``,
    the model ``memory.peak_bytes_per_rank`` uses too). Computed once per plan, so the
    counter costs nothing per operation."""
    return live_bytes(plan).after
