"""When each value of a plan lives: the one model shared by slots, memory and traces.

The runtime drops its reference to a value right after the value's last use on its
rank, in ``plan.instructions`` order: a value nobody reads dies where it is defined,
a program output (each of its replicas, each of its pieces) lives to the end, a
program input (each piece of one, on its rank) lives from the start. A value in
flight counts on its sender from the instruction that sends it until the one that
receives it. An output an executable writes into an input's buffer takes that buffer
over instead of adding bytes. Only the instructions' own answers (``reads``,
``writes``, ``sends_on``...) and the plan's value table (``ExecutionPlan.values``)
are used, never their class."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from . import records
from .plan import ExecutionPlan, Instruction, TensorSpec

Key = tuple[int, int]  # (rank, value)


def spec_bytes(spec: TensorSpec) -> int:
    """Bytes of one tensor of ``spec`` (sub-byte types round up to a byte each)."""
    return int(np.prod(spec.shape, dtype=np.int64)) * _itemsize(spec.dtype)


def _itemsize(dtype: str) -> int:
    try:
        return np.dtype(dtype).itemsize
    except TypeError:  # bfloat16, float8_*: numpy knows them through ml_dtypes only
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, dtype)).itemsize


def received_bytes(plan: ExecutionPlan, inst: Instruction) -> int:
    """The bytes ``inst`` receives from another rank (0 if it receives nothing)."""
    if inst.receives_on is None:
        return 0
    return sum(spec_bytes(plan.values[(inst.rank, value)].spec) for value in inst.writes())


def last_uses(plan: ExecutionPlan, defined: Mapping[Key, int] | None = None) -> dict[Key, int]:
    """``(rank, value)`` -> the index of the instruction after which it dies.

    ``len(plan.instructions)`` for outputs and their replicas; the defining
    instruction for a value nobody reads; -1 for an input nobody reads. ``defined``
    maps every value to its defining instruction where the caller has worked that out
    already (slot resolution); by default ``plan.values`` says.
    """
    if defined is None:
        defined = {key: info.defined_at for key, info in plan.values.items()}
    result: dict[Key, int] = dict(defined)
    for at, inst in enumerate(plan.instructions):
        for value in inst.reads():
            result[(inst.rank, value)] = at
    end = len(plan.instructions)
    for output in plan.outputs:
        for value, rank in output.held():
            result[(rank, value)] = end
    return result


@records.frozen
class LiveBytes:
    """Bytes each rank holds: ``after[i][r]`` right after instruction i, ``peak[r]`` at most."""

    after: list[list[int]]
    peak: list[int]


def live_bytes(plan: ExecutionPlan) -> LiveBytes:
    """Bytes each rank holds through the plan (temporaries inside executables not counted)."""
    values, dies = plan.values, last_uses(plan)
    held: dict[Key, int] = {}
    live = [0] * plan.num_ranks
    for binding in plan.inputs:
        placed = [((rank, binding.index), binding.spec) for rank in binding.ranks]
        placed += [((piece.rank, piece.value), piece.spec) for piece in binding.pieces]
        for key, spec in placed:  # a piece counts its own rows only
            held[key] = spec_bytes(spec)
            live[key[0]] += held[key]
    peak = list(live)
    in_flight: dict[int, tuple[int, int]] = {}  # channel -> (sender, bytes)
    after: list[list[int]] = []
    for at, inst in enumerate(plan.instructions):
        if inst.sends_on is not None:
            (value,) = inst.reads()
            in_flight[inst.sends_on] = (inst.rank, spec_bytes(values[(inst.rank, value)].spec))
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
                held[key] = spec_bytes(values[key].spec)
                live[inst.rank] += held[key]
        peak[inst.rank] = max(peak[inst.rank], live[inst.rank])
        for key in [(inst.rank, v) for v in inst.reads()] + written:
            if dies.get(key, at) <= at and key in held:
                live[key[0]] -= held.pop(key)
        after.append(list(live))
    return LiveBytes(after, peak)
