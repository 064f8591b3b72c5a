"""Donation aliasing: which input buffer each executable may write a result into."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence

from jax.interpreters.mlir import ir

from jaxpp_mlir.runtime import plan as rt
from jaxpp_mlir.runtime.instructions import run
from jaxpp_mlir.runtime.instructions.run import RunStage

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
    step_buffers: bool = True,
) -> dict[str, dict[int, int]]:
    """Per executable, its input position -> the output that reuses that input's buffer.

    A buffer may be consumed by the task that reads it last on its rank: a
    program input the caller donated, or a value a task of the step computed
    (by a loop task, only a version of a loop state such as an accumulator:
    ``carried`` maps those value ids to their state; by the code before or
    after the loop, any). An executable runs once per microbatch and its module
    text is the same for every run, so an input is aliased only where every
    run of the executable may consume the value it reads there: the run is
    the value's last reader on its rank, reads it once, and the value is
    neither sent from that rank nor a program output (``outputs``: its
    ``(rank, value)`` pairs). A loop state's version aliases the output that
    defines the state's next version; an input of a task that runs once, the
    first free output (the caller's donated inputs served first).
    The output must have the input's shape, dtype and sharding (XLA updates a
    buffer in place only shard for shard; without a match the input is just
    freed after its last use, as ``jax.jit`` does with a donation it cannot
    use). ``specs`` gives each executable's input and output specs,
    ``shardings`` its boundary shardings. ``step_buffers=False`` consumes the
    caller's donated inputs only (the rule before loop-carried donation, kept
    for side-by-side measurements).
    """
    carried = carried or {}
    uses = _Uses.of(instructions, donated, outputs, step_buffers=step_buffers)
    runs: dict[str, list[tuple[int, RunStage]]] = {}
    for at, inst in enumerate(instructions):
        if inst.kind == run.KIND:
            runs.setdefault(inst.executable, []).append((at, inst))
    aliases: dict[str, dict[int, int]] = {}
    for name, executable_runs in runs.items():
        positions = _consumed_positions(executable_runs, uses, donated, carried)
        if positions:
            chosen = _choose_outputs(
                executable_runs, positions, specs[name], shardings(name), carried
            )
            if chosen:
                aliases[name] = chosen
    return aliases


def _consumed_positions(
    runs: Sequence[tuple[int, RunStage]],
    uses: _Uses,
    donated: frozenset[int],
    carried: Mapping[int, int],
) -> list[int]:
    """The input positions every run may consume, the caller's donated buffers first
    (updated in place, as ``jax.jit`` does); a loop task consumes loop state versions only."""
    first = runs[0][1]
    positions = sorted(range(len(first.inputs)), key=lambda p: first.inputs[p] not in donated)
    return uses.consumable(runs, positions, carried if len(runs) > 1 else None)


def _choose_outputs(
    runs: Sequence[tuple[int, RunStage]],
    positions: Sequence[int],
    specs: Specs,
    shardings: Shardings,
    carried: Mapping[int, int],
) -> dict[int, int]:
    """Input position -> output for each consumed input that an output can take over."""
    (input_specs, output_specs), (in_shardings, out_shardings) = specs, shardings
    output_states = [carried.get(value) for value in runs[0][1].outputs]
    chosen: dict[int, int] = {}
    for position in positions:
        for output in _output_choices(runs, position, carried, output_states):
            if (
                output not in chosen.values()
                and output_specs[output] == input_specs[position]
                and _same_sharding(out_shardings[output], in_shardings[position])
            ):
                chosen[position] = output
                break
    return chosen


@dataclasses.dataclass
class _Uses:
    """Who reads each value on each rank, and which values a run may consume."""

    donated: frozenset[int]  # the caller's buffers: consumable on every rank reading them
    # Per rank: the values a run defined there (consumable if step_buffers), those sent
    # from there or returned as program outputs (never consumed), and the index of
    # each value's last reader there.
    written: defaultdict[int, set[int]]
    kept: defaultdict[int, set[int]]
    last_read: defaultdict[int, dict[int, int]]

    @classmethod
    def of(
        cls,
        instructions: Sequence[rt.Instruction],
        donated: frozenset[int],
        outputs: Iterable[tuple[int, int]],
        *,
        step_buffers: bool,
    ) -> _Uses:
        uses = cls(donated, defaultdict(set), defaultdict(set), defaultdict(dict))
        for rank, value in outputs:
            uses.kept[rank].add(value)
        for at, inst in enumerate(instructions):
            if inst.kind == run.KIND:
                uses.last_read[inst.rank].update(dict.fromkeys(inst.inputs, at))
                if step_buffers:  # a buffer the step computed (never a caller's)
                    uses.written[inst.rank].update(inst.outputs)
            elif inst.sends_on is not None:
                uses.kept[inst.rank].update(inst.reads())
        return uses

    def consumable(
        self,
        runs: Sequence[tuple[int, RunStage]],
        positions: list[int],
        carried: Mapping[int, int] | None,
    ) -> list[int]:
        """The input ``positions`` that every run ``inst`` (instruction ``at``) of ``runs``
        may consume (reading there a value of ``carried`` only, unless None)."""
        donated = self.donated
        for at, inst in runs:
            inputs, rank = inst.inputs, inst.rank
            written, kept, last_read = self.written[rank], self.kept[rank], self.last_read[rank]
            read_once = len(set(inputs)) == len(inputs)
            positions = [
                p
                for p in positions
                if (carried is None or inputs[p] in carried)
                and (inputs[p] in donated or inputs[p] in written)
                and inputs[p] not in kept
                and last_read.get(inputs[p]) == at
                and (read_once or inputs.count(inputs[p]) == 1)
            ]
            if not positions:
                break
        return positions


def _output_choices(
    runs: Sequence[tuple[int, RunStage]],
    position: int,
    carried: Mapping[int, int],
    output_states: Sequence[int | None],
) -> Iterable[int]:
    """The outputs that may take input ``position``'s buffer, best first: the next
    version of the loop state it reads (in every run); for a task that runs once,
    then any output. ``output_states``: the loop state of each output of the first run."""
    first = runs[0][1]
    state = carried.get(first.inputs[position])
    next_versions = []
    if state is not None and {carried.get(inst.inputs[position]) for _, inst in runs} == {state}:
        next_versions = [
            output
            for output, output_state in enumerate(output_states)
            if output_state == state
            and {carried.get(inst.outputs[output]) for _, inst in runs} == {state}
        ]
    return next_versions + (list(range(len(first.outputs))) if len(runs) == 1 else [])


def _same_sharding(a: ir.Attribute | None, b: ir.Attribute | None) -> bool:
    """Whether two boundary shardings are the same (both absent on an unsharded step)."""
    if a is None or b is None:
        return a is None and b is None
    return a == b
