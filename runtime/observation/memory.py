"""How many bytes each rank holds at peak while a plan runs in its dispatch order."""

from __future__ import annotations

import numpy as np

from ..plan import ExecutionPlan, Recv, RunStage, Send, TensorSpec


def spec_bytes(spec: TensorSpec) -> int:
    return int(np.prod(spec.shape, dtype=np.int64)) * np.dtype(spec.dtype).itemsize


def peak_bytes_per_rank(plan: ExecutionPlan) -> list[int]:
    """Peak live bytes per rank when every value is freed right after its last use.

    A model of the runtime's own bookkeeping (which drops each value after its
    last use on its rank, in ``plan.instructions`` order): inputs are live from
    the start, outputs to the end, a value in flight counts on its sender until
    the receive. An output an executable writes into an input's buffer
    (``StageExecutable.aliases``) takes that buffer over instead of adding its
    bytes. Temporary buffers inside an executable are not counted.
    """
    sizes: dict[tuple[int, int], int] = {}
    for binding in plan.inputs:
        for rank in binding.ranks:
            sizes[(rank, binding.index)] = spec_bytes(binding.spec)
    specs, last_use = _specs_and_last_uses(plan)
    live = [0] * plan.num_ranks
    peak = [0] * plan.num_ranks
    for (rank, _), size in sizes.items():
        live[rank] += size
    peak = list(live)
    pending_sends: dict[int, tuple[int, int]] = {}
    for at, inst in enumerate(plan.instructions):
        if isinstance(inst, RunStage):
            defined = [(inst.rank, v) for v in inst.outputs]
            for position, output in plan.executables[inst.executable].aliases:
                consumed = (inst.rank, inst.inputs[position])
                if consumed in sizes:  # the output takes its buffer over: no new bytes
                    sizes[defined[output]] = sizes.pop(consumed)
        elif isinstance(inst, Recv):
            defined = [(inst.rank, inst.value)]
            sender, size = pending_sends.pop(inst.channel, (None, 0))
            if sender is not None:
                live[sender] -= size
        else:
            size = spec_bytes(specs[inst.value])
            pending_sends[inst.channel] = (inst.rank, size)
            live[inst.rank] += size
            defined = []
        for key in defined:
            if key not in sizes:
                sizes[key] = spec_bytes(specs[key[1]])
                live[key[0]] += sizes[key]
        peak[inst.rank] = max(peak[inst.rank], live[inst.rank])
        for key in [(inst.rank, v) for v in _read(inst)] + defined:
            if last_use.get(key, at) <= at and key in sizes:
                live[key[0]] -= sizes.pop(key)
    return peak


def _specs_and_last_uses(
    plan: ExecutionPlan,
) -> tuple[dict[int, TensorSpec], dict[tuple[int, int], int]]:
    """Each value's spec, and the index of each (rank, value)'s last use (outputs: the end)."""
    last_use: dict[tuple[int, int], int] = {}
    end = len(plan.instructions)
    specs = {b.index: b.spec for b in plan.inputs}
    for at, inst in enumerate(plan.instructions):
        if isinstance(inst, RunStage):
            stage = plan.executables[inst.executable]
            for value in inst.inputs:
                last_use[(inst.rank, value)] = at
            for value, spec in zip(inst.outputs, stage.output_specs, strict=True):
                specs[value] = spec
        elif isinstance(inst, Send):
            last_use[(inst.rank, inst.value)] = at
        elif isinstance(inst, Recv):
            specs[inst.value] = inst.spec
    for output in plan.outputs:
        for value, rank in ((output.value, output.rank), *output.replicas):
            last_use[(rank, value)] = end
    return specs, last_use


def _read(inst: RunStage | Send | Recv) -> tuple[int, ...]:
    if isinstance(inst, RunStage):
        return inst.inputs
    if isinstance(inst, Send):
        return (inst.value,)
    return ()
