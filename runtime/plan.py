"""The execution plan: everything the runtime needs, as plain data.

The compiler side (``jaxpp_mlir.program``) builds an ``ExecutionPlan`` from a
partitioned module; the runtime executes it and never sees MLIR passes.

Values are named by integers. Input ``i`` of the program is value ``i`` and is
placed on every rank listed in its ``InputBinding``. Every other value is
defined exactly once, on one rank, by a ``RunStage`` output or a ``Recv``.
``instructions`` is a global order in which a single dispatcher may issue all
ranks' work: every ``Send`` precedes its ``Recv``, every value is defined
before its uses on its rank. ``rank_program(r)`` is rank r's own ordered list.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int, ...]
    dtype: str  # a numpy dtype name: "float32", "int32", "bool", "bfloat16"...

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(str(d) for d in self.shape)}]"


@dataclasses.dataclass(frozen=True)
class StageExecutable:
    """One standalone StableHLO module (public ``@main``) compiled for one rank."""

    name: str
    rank: int
    mlir_module: str
    input_specs: tuple[TensorSpec, ...]
    output_specs: tuple[TensorSpec, ...]
    # (input, output) pairs whose output the module writes into the input's buffer
    # (``tf.aliasing_output``): each run consumes those inputs.
    aliases: tuple[tuple[int, int], ...] = ()
    # The stage functions a fused executable runs, in order (``FusedTask``); () for one.
    fused_parts: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class RunStage:
    """Runs ``executable`` on ``rank`` with ``inputs``, defining ``outputs``."""

    rank: int
    executable: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    label: str = ""  # e.g. "fwd_1__0", for traces and errors


@dataclasses.dataclass(frozen=True)
class Send:
    """Sends ``value`` (held by ``rank``) to ``peer`` on ``channel``."""

    rank: int
    peer: int
    channel: int
    value: int


@dataclasses.dataclass(frozen=True)
class Recv:
    """Defines ``value`` on ``rank`` as what ``peer`` sent on ``channel``."""

    rank: int
    peer: int
    channel: int
    value: int
    spec: TensorSpec


Instruction = RunStage | Send | Recv


@dataclasses.dataclass(frozen=True)
class InputBinding:
    """Program input ``index`` (value id ``index``), needed on ``ranks``."""

    index: int
    spec: TensorSpec
    ranks: tuple[int, ...]
    name: str = ""  # where the caller passes it, e.g. "params['w'][0]", for messages

    def describe(self) -> str:
        """``argument params['w'][0] (input 3)``, or ``argument 3`` without a name."""
        if self.name:
            return f"argument {self.name} (input {self.index})"
        return f"argument {self.index}"


@dataclasses.dataclass(frozen=True)
class OutputBinding:
    """Program output: ``value`` as held by ``rank``.

    ``replicas`` lists other ``(value, rank)`` pairs holding equal copies (each
    computed on its rank): the output is then one array over all those ranks.
    """

    value: int
    rank: int
    spec: TensorSpec
    replicas: tuple[tuple[int, int], ...] = ()


@dataclasses.dataclass(frozen=True)
class ExecutionPlan:
    num_ranks: int
    executables: dict[str, StageExecutable]
    inputs: tuple[InputBinding, ...]
    outputs: tuple[OutputBinding, ...]
    instructions: tuple[Instruction, ...]
    # Stage -> the name mark_stage_end(x, name=...) gave it (named stages only).
    stage_names: dict[int, str] = dataclasses.field(default_factory=dict)

    def rank_program(self, rank: int) -> list[Instruction]:
        return [inst for inst in self.instructions if inst.rank == rank]
