"""Donation aliasing: which donated input buffer each executable may write a result into."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from jax.extend.mlir import ir

from jaxpp_mlir.runtime import plan as rt

from .emission import Shardings


def donation_aliases(
    instructions: Sequence[rt.Instruction],
    donated: frozenset[int],
    specs: Mapping[str, tuple[tuple[rt.TensorSpec, ...], tuple[rt.TensorSpec, ...]]],
    shardings: Callable[[str], Shardings],
) -> dict[str, dict[int, int]]:
    """Per executable, its input position -> the output that reuses that input's buffer.

    The last task reading a donated input on a rank may write a result in its
    place. Only a task that runs once per step (code before or after the loop,
    the optimizer update) may consume the buffer, and only where the input is
    its argument once and a result has the same shape, dtype and sharding (XLA
    updates a buffer in place only shard for shard; without a match the input
    is just freed after its last use, as ``jax.jit`` does with a donation it
    cannot use). ``specs`` gives each executable's input and output specs,
    ``shardings`` its boundary shardings.
    """
    if not donated:
        return {}
    readers, runs_per_executable = _last_readers(instructions, donated)
    aliases: dict[str, dict[int, int]] = {}
    for index in sorted(readers):
        for inst in readers[index]:
            if runs_per_executable[inst.executable] != 1 or inst.inputs.count(index) != 1:
                continue
            input_specs, output_specs = specs[inst.executable]
            position = inst.inputs.index(index)
            taken = set(aliases.get(inst.executable, {}).values())
            in_shardings, out_shardings = shardings(inst.executable)
            for output, spec in enumerate(output_specs):
                if (
                    spec == input_specs[position]
                    and _same_sharding(out_shardings[output], in_shardings[position])
                    and output not in taken
                ):
                    aliases.setdefault(inst.executable, {})[position] = output
                    break
    return aliases


def _last_readers(
    instructions: Sequence[rt.Instruction], donated: frozenset[int]
) -> tuple[dict[int, list[rt.RunStage]], dict[str, int]]:
    """Per donated input, the last task reading it on each rank (unless a send of the
    input follows it there), in order of first reading; and the runs of each executable."""
    runs_per_executable: dict[str, int] = {}
    last_reader: dict[tuple[int, int], rt.RunStage] = {}
    for inst in instructions:
        if isinstance(inst, rt.RunStage):
            runs_per_executable[inst.executable] = runs_per_executable.get(inst.executable, 0) + 1
            for index in donated.intersection(inst.inputs):
                last_reader[(index, inst.rank)] = inst
        elif isinstance(inst, rt.Send) and inst.value in donated:
            last_reader.pop((inst.value, inst.rank), None)
    readers: dict[int, list[rt.RunStage]] = {}
    for (index, _), inst in last_reader.items():
        readers.setdefault(index, []).append(inst)
    return readers, runs_per_executable


def _same_sharding(a: ir.Attribute | None, b: ir.Attribute | None) -> bool:
    """Whether two boundary shardings are the same (both absent on an unsharded step)."""
    if a is None or b is None:
        return a is None and b is None
    return a == b
