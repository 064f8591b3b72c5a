"""Donation aliasing: which input buffer each executable may write a result into."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence

from jax.extend.mlir import ir

from jaxpp_mlir.runtime import plan as rt

from .emission import Shardings

Specs = tuple[tuple[rt.TensorSpec, ...], tuple[rt.TensorSpec, ...]]


def donation_aliases(
    instructions: Sequence[rt.Instruction],
    donated: frozenset[int],
    specs: Mapping[str, Specs],
    shardings: Callable[[str], Shardings],
    *,
    carried: Mapping[int, int] | None = None,
    outputs: Iterable[tuple[int, int]] = (),
) -> dict[str, dict[int, int]]:
    """Per executable, its input position -> the output that reuses that input's buffer.

    A buffer may be consumed by the task that reads it last on its rank: a
    program input the caller donated, or a version of a loop state (an
    accumulator, ``carried`` maps its value ids to the state) that a task of
    the step computed. An executable runs once per microbatch and its module
    text is the same for every run, so an input is aliased only where every
    run of the executable may consume the value it reads there: the run is
    the value's last reader on its rank, reads it once, and the value is
    neither sent from that rank nor a program output (``outputs``: its
    ``(rank, value)`` pairs). A loop state's version aliases the output that
    defines the state's next version; a donated input, the first free output.
    The output must have the input's shape, dtype and sharding (XLA updates a
    buffer in place only shard for shard; without a match the input is just
    freed after its last use, as ``jax.jit`` does with a donation it cannot
    use). ``specs`` gives each executable's input and output specs,
    ``shardings`` its boundary shardings.
    """
    carried = carried or {}
    uses = _Uses.of(instructions, donated, carried, outputs)
    if not uses.candidates:
        return {}
    runs: dict[str, list[tuple[int, rt.RunStage]]] = {}
    for at, inst in enumerate(instructions):
        if isinstance(inst, rt.RunStage):
            runs.setdefault(inst.executable, []).append((at, inst))
    aliases: dict[str, dict[int, int]] = {}
    for name, executable_runs in runs.items():
        input_specs, output_specs = specs[name]
        in_shardings: list | None = None
        for position in range(len(input_specs)):
            if not all(uses.consumable(at, inst, position) for at, inst in executable_runs):
                continue
            if in_shardings is None:
                in_shardings, out_shardings = shardings(name)
            taken = set(aliases.get(name, {}).values())
            for output in _output_choices(executable_runs, position, carried):
                if (
                    output not in taken
                    and output_specs[output] == input_specs[position]
                    and _same_sharding(out_shardings[output], in_shardings[position])
                ):
                    aliases.setdefault(name, {})[position] = output
                    break
    return aliases


@dataclasses.dataclass
class _Uses:
    """Who reads each value on each rank, and which values a run may consume."""

    candidates: set[tuple[int, int]]  # (rank, value) a task may consume
    last_read: dict[tuple[int, int], int]  # (rank, value) -> index of its last reader
    kept: set[tuple[int, int]]  # sent from the rank, or a program output

    @classmethod
    def of(
        cls,
        instructions: Sequence[rt.Instruction],
        donated: frozenset[int],
        carried: Mapping[int, int],
        outputs: Iterable[tuple[int, int]],
    ) -> _Uses:
        candidates: set[tuple[int, int]] = set()
        last_read: dict[tuple[int, int], int] = {}
        kept = set(outputs)
        for at, inst in enumerate(instructions):
            if isinstance(inst, rt.RunStage):
                for value in inst.inputs:
                    last_read[(inst.rank, value)] = at
                    if value in donated:
                        candidates.add((inst.rank, value))
                # A loop state's version the step computed (never a caller's buffer).
                candidates.update((inst.rank, v) for v in inst.outputs if v in carried)
            elif isinstance(inst, rt.Send):
                kept.add((inst.rank, inst.value))
        return cls(candidates - kept, last_read, kept)

    def consumable(self, at: int, inst: rt.RunStage, position: int) -> bool:
        """Whether run ``inst`` (instruction ``at``) may consume its input ``position``."""
        key = (inst.rank, inst.inputs[position])
        return (
            key in self.candidates
            and self.last_read.get(key) == at
            and inst.inputs.count(key[1]) == 1
        )


def _output_choices(
    runs: Sequence[tuple[int, rt.RunStage]], position: int, carried: Mapping[int, int]
) -> Iterable[int]:
    """The outputs that may take input ``position``'s buffer, best first: the next
    version of the loop state it reads (in every run), else any output."""
    first = runs[0][1]
    state = carried.get(first.inputs[position])
    if state is None:
        return range(len(first.outputs))
    return [
        output
        for output in range(len(first.outputs))
        if all(
            carried.get(inst.inputs[position]) == state
            and carried.get(inst.outputs[output]) == state
            for _, inst in runs
        )
    ]


def _same_sharding(a: ir.Attribute | None, b: ir.Attribute | None) -> bool:
    """Whether two boundary shardings are the same (both absent on an unsharded step)."""
    if a is None or b is None:
        return a is None and b is None
    return a == b
