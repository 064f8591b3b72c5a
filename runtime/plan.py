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
from collections.abc import Mapping
from typing import ClassVar

import numpy as np


@dataclasses.dataclass(frozen=True)
class Layout:
    """How a value is laid out on its rank's submesh, as the compiler fixed it.

    ``mesh_axes`` are the submesh's ``(name, size)`` axes over the rank's devices in
    partition order; dimension ``d`` is split over the axes ``dims[d]`` (major
    first; () for a whole dimension). The ``PartitionSpec`` of a ``NamedSharding``.
    """

    mesh_axes: tuple[tuple[str, int], ...]
    dims: tuple[tuple[str, ...], ...]

    def __str__(self) -> str:
        axes = ", ".join(f"{n}={s}" for n, s in self.mesh_axes)
        dims = ", ".join("{" + ", ".join(d) + "}" for d in self.dims)
        return f"[{dims}] on <{axes}>"


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int, ...]
    dtype: str  # a numpy dtype name: "float32", "int32", "bool", "bfloat16"...
    # Its layout on the rank's submesh where the compiler fixed one; None: unknown
    # (XLA chooses). Not part of equality: two layouts of one value are one spec.
    layout: Layout | None = dataclasses.field(default=None, compare=False)

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


# Every instruction answers the same questions, so that slots, liveness, memory,
# traces and the multi-process ordering never dispatch on its class:
#   kind                       "run", "send", "recv": its name in traces and listings
#   rank, peer                 the rank it runs on; the rank at the other end (None: none)
#   reads(), writes()          the values it reads and defines on ``rank``
#   written_specs(executables) the specs of ``writes()``, in order
#   sends_on, receives_on      the channel it puts a value on / takes a value from (None)
#   reused_buffers(executables) (read value, written value) pairs whose buffer is reused
#   describe(), listing()      one line for error messages; one line for plan dumps


@dataclasses.dataclass(frozen=True)
class RunStage:
    """Runs ``executable`` on ``rank`` with ``inputs``, defining ``outputs``."""

    rank: int
    executable: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    label: str = ""  # e.g. "fwd_1__0", for traces and errors

    kind: ClassVar[str] = "run"
    peer: ClassVar[None] = None
    sends_on: ClassVar[None] = None
    receives_on: ClassVar[None] = None

    def reads(self) -> tuple[int, ...]:
        return self.inputs

    def writes(self) -> tuple[int, ...]:
        return self.outputs

    def written_specs(self, executables: Mapping[str, StageExecutable]) -> tuple[TensorSpec, ...]:
        return executables[self.executable].output_specs

    def reused_buffers(
        self, executables: Mapping[str, StageExecutable]
    ) -> tuple[tuple[int, int], ...]:
        return tuple(
            (self.inputs[i], self.outputs[o]) for i, o in executables[self.executable].aliases
        )

    def describe(self) -> str:
        label = f" ({self.label})" if self.label else ""
        return f"run {self.executable!r}{label} on rank {self.rank}"

    def listing(self) -> str:
        return f"run {self.executable} ({self.label}) {list(self.inputs)} -> {list(self.outputs)}"


@dataclasses.dataclass(frozen=True)
class Send:
    """Sends ``value`` (held by ``rank``) to ``peer`` on ``channel``."""

    rank: int
    peer: int
    channel: int
    value: int

    kind: ClassVar[str] = "send"
    receives_on: ClassVar[None] = None

    @property
    def sends_on(self) -> int:
        return self.channel

    def reads(self) -> tuple[int, ...]:
        return (self.value,)

    def writes(self) -> tuple[int, ...]:
        return ()

    def written_specs(self, executables: Mapping[str, StageExecutable]) -> tuple[TensorSpec, ...]:
        return ()

    def reused_buffers(
        self, executables: Mapping[str, StageExecutable]
    ) -> tuple[tuple[int, int], ...]:
        return ()

    def describe(self) -> str:
        return f"send of value {self.value} from rank {self.rank} to rank {self.peer}"

    def listing(self) -> str:
        return f"send %{self.value} -> rank {self.peer} (channel {self.channel})"


@dataclasses.dataclass(frozen=True)
class Recv:
    """Defines ``value`` on ``rank`` as what ``peer`` sent on ``channel``."""

    rank: int
    peer: int
    channel: int
    value: int
    spec: TensorSpec

    kind: ClassVar[str] = "recv"
    sends_on: ClassVar[None] = None

    @property
    def receives_on(self) -> int:
        return self.channel

    def reads(self) -> tuple[int, ...]:
        return ()

    def writes(self) -> tuple[int, ...]:
        return (self.value,)

    def written_specs(self, executables: Mapping[str, StageExecutable]) -> tuple[TensorSpec, ...]:
        return (self.spec,)

    def reused_buffers(
        self, executables: Mapping[str, StageExecutable]
    ) -> tuple[tuple[int, int], ...]:
        return ()

    def describe(self) -> str:
        return f"recv of value {self.value} on rank {self.rank} from rank {self.peer}"

    def listing(self) -> str:
        return f"recv %{self.value} <- rank {self.peer} (channel {self.channel}) {self.spec}"


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
class Constant:
    """Input ``input`` is not the caller's: the plan gives its value (a microbatch
    index read on ``rank``). The runtime places it once (``place_constants``)."""

    input: int
    rank: int
    value: int
    dtype: str = "int32"

    def array(self) -> np.ndarray:
        return np.asarray(self.value, dtype=np.dtype(self.dtype))


@dataclasses.dataclass(frozen=True)
class ExecutionPlan:
    num_ranks: int
    executables: dict[str, StageExecutable]
    inputs: tuple[InputBinding, ...]
    outputs: tuple[OutputBinding, ...]
    instructions: tuple[Instruction, ...]
    # Stage -> the name mark_stage_end(x, name=...) gave it (named stages only).
    stage_names: dict[int, str] = dataclasses.field(default_factory=dict)
    # The last inputs, in order: values the plan fixes, not the caller's arguments.
    constants: tuple[Constant, ...] = ()

    @property
    def num_user_inputs(self) -> int:
        """The inputs a caller passes (the constants follow them)."""
        return len(self.inputs) - len(self.constants)

    def rank_program(self, rank: int) -> list[Instruction]:
        return [inst for inst in self.instructions if inst.rank == rank]
