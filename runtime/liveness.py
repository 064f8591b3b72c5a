"""When each value of a plan lives: the one model shared by slots, memory and traces.

The runtime drops its reference to a value right after the value's last use on
its rank, in ``plan.instructions`` order: a value nobody reads dies where it is
defined, a program output (and each of its replicas) lives to the end, a program
input lives from the start. A value in flight counts on its sender from the
instruction that sends it until the one that receives it. An output an
executable writes into an input's buffer takes that buffer over instead of adding
bytes. Only the instructions' own answers (``reads``, ``writes``, ``sends_on``...)
are used, never their class.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .plan import ExecutionPlan, TensorSpec

Key = tuple[int, int]  # (rank, value)


def spec_bytes(spec: TensorSpec) -> int:
    return int(np.prod(spec.shape, dtype=np.int64)) * np.dtype(spec.dtype).itemsize


def last_uses(plan: ExecutionPlan) -> dict[Key, int]:
    """``(rank, value)`` -> the index of the instruction after which it dies.

    ``len(plan.instructions)`` for outputs and their replicas; the defining
    instruction for a value nobody reads; -1 for an input nobody reads.
    """
    result: dict[Key, int] = {}
    for binding in plan.inputs:
        for rank in binding.ranks:
            result[(rank, binding.index)] = -1
    for at, inst in enumerate(plan.instructions):
        for value in inst.writes():
            result.setdefault((inst.rank, value), at)
        for value in inst.reads():
            result[(inst.rank, value)] = at
    end = len(plan.instructions)
    for output in plan.outputs:
        for value, rank in ((output.value, output.rank), *output.replicas):
            result[(rank, value)] = end
    return result


def value_specs(plan: ExecutionPlan) -> dict[int, TensorSpec]:
    """Each value's spec, as its input binding or its defining instruction gives it."""
    specs = {b.index: b.spec for b in plan.inputs}
    for inst in plan.instructions:
        specs.update(zip(inst.writes(), inst.written_specs(plan.executables), strict=True))
    return specs


@dataclasses.dataclass(frozen=True)
class LiveBytes:
    """Bytes each rank holds: ``after[i][r]`` right after instruction i, ``peak[r]`` at most."""

    after: list[list[int]]
    peak: list[int]


def live_bytes(plan: ExecutionPlan) -> LiveBytes:
    """Bytes each rank holds through the plan (temporaries inside executables not counted)."""
    specs, dies = value_specs(plan), last_uses(plan)
    held: dict[Key, int] = {}
    live = [0] * plan.num_ranks
    for binding in plan.inputs:
        for rank in binding.ranks:
            held[(rank, binding.index)] = spec_bytes(binding.spec)
            live[rank] += held[(rank, binding.index)]
    peak = list(live)
    in_flight: dict[int, tuple[int, int]] = {}  # channel -> (sender, bytes)
    after: list[list[int]] = []
    for at, inst in enumerate(plan.instructions):
        if inst.sends_on is not None:
            (value,) = inst.reads()
            in_flight[inst.sends_on] = (inst.rank, spec_bytes(specs[value]))
            live[inst.rank] += in_flight[inst.sends_on][1]
        if inst.receives_on is not None:
            sender, size = in_flight.pop(inst.receives_on, (inst.rank, 0))
            live[sender] -= size
        for read, written in inst.reused_buffers(plan.executables):
            if (inst.rank, read) in held:  # the output takes its buffer over: no new bytes
                held[(inst.rank, written)] = held.pop((inst.rank, read))
        written = [(inst.rank, v) for v in inst.writes()]
        for key in written:
            if key not in held:
                held[key] = spec_bytes(specs[key[1]])
                live[inst.rank] += held[key]
        peak[inst.rank] = max(peak[inst.rank], live[inst.rank])
        for key in [(inst.rank, v) for v in inst.reads()] + written:
            if dies.get(key, at) <= at and key in held:
                live[key[0]] -= held.pop(key)
        after.append(list(live))
    return LiveBytes(after, peak)
