"""The execution plan: everything the runtime needs, as plain data.

The compiler side (``jaxpp_mlir.program``) builds an ``ExecutionPlan`` from a
partitioned module; the runtime executes it and never sees MLIR passes.

Values are named by integers. Input ``i`` of the program is value ``i`` and is
placed on every rank listed in its ``InputBinding``; an input split along its
leading axis (a stacked layer parameter whose layers are split into stages) also
arrives as ``Piece``s, each its own value on its rank. Every other value is defined
exactly once, on one rank, by an instruction (a run's output, a receive). An output
is one value on one rank, a value with equal copies on several ranks (``replicas``),
or the rows of pieces on their ranks (``pieces``). ``instructions`` is a global
order in which a single dispatcher may issue all ranks' work: every send precedes
its receive, every value is defined before its uses on its rank. ``rank_program(r)``
is rank r's own ordered list; ``values`` says, per rank and value, its spec, layout
and where it is defined.

Instructions are of the kinds in ``runtime/instructions`` (one module each: its
data, slot resolution and dispatch code); this module holds what every kind
answers (``Instruction``) and the data they share.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from functools import cached_property
from typing import ClassVar

import numpy as np

from . import records


@records.frozen
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


@records.frozen
class TensorSpec:
    shape: tuple[int, ...]
    dtype: str  # a numpy dtype name: "float32", "int32", "bool", "bfloat16"...
    # Its layout on the rank's submesh where the compiler fixed one; None: unknown
    # (XLA chooses). Not part of equality: two layouts of one value are one spec.
    layout: Layout | None = dataclasses.field(default=None, compare=False)

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(str(d) for d in self.shape)}]"


@records.frozen
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
    # The compiler's estimate of one run's floating-point operations (0: none made). On
    # a GPU the program with the most compiles first, alone (see ``compile_stages``).
    flops: float = 0.0


@records.frozen(slots=True)
class TaskRef:
    """One task a run executes: ``kind`` (``fwd``, ``bwd``, ``bwd_i``, ``bwd_w``; ``pre`` and
    ``post`` for the code before and after the microbatch loop) of ``stage`` for
    ``microbatch``; ``microbatch`` is None for code that runs once per step (``pre``,
    ``post``). Its string form is the task's label, ``fwd_1__0``."""

    stage: int
    kind: str
    microbatch: int | None

    def __str__(self) -> str:
        return f"{self.kind}_{self.stage}__{self.microbatch or 0}"


class Instruction:
    """What every instruction of a plan answers, so that slots, liveness, memory, traces,
    summaries and the multi-process ordering never ask for its class.

    Each kind is a frozen dataclass deriving from this class in its own module of
    ``runtime/instructions`` (with its slot resolution and dispatch code;
    ``runtime/instructions/registry.py`` lists them). It sets ``kind``, ``rank`` and
    ``peer`` and overrides what differs from these defaults: work on one rank that
    reads, writes, sends and receives nothing and runs no task.
    """

    kind: ClassVar[str]  # "run", "send", "recv": its name in the registry, traces, listings
    rank: int  # the rank it runs on
    peer: int | None  # the rank at the other end of a transfer (None: local work)
    sends_on: int | None = None  # the channel it puts a value on
    receives_on: int | None = None  # the channel it takes a value from
    tasks: tuple[TaskRef, ...] = ()  # the stage tasks it executes
    # Whether its executable's boundary fixes the layout of what it reads and writes (a
    # transfer takes any layout).
    fixes_layouts: bool = False

    def reads(self) -> tuple[int, ...]:
        """The values it reads on ``rank``."""
        return ()

    def writes(self) -> tuple[int, ...]:
        """The values it defines on ``rank``."""
        return ()

    def read_specs(self, executables: Mapping[str, StageExecutable]) -> tuple[TensorSpec, ...]:
        """The specs (with layouts) it reads ``reads()`` in, in order (() where it takes
        any layout)."""
        return ()

    def written_specs(self, executables: Mapping[str, StageExecutable]) -> tuple[TensorSpec, ...]:
        """The specs of ``writes()``, in order."""
        return ()

    def reused_buffers(
        self, executables: Mapping[str, StageExecutable]
    ) -> tuple[tuple[int, int], ...]:
        """(read value, written value) pairs whose buffer the written value takes over."""
        return ()

    def describe(self) -> str:
        """One line for error messages."""
        return f"{self.kind} on rank {self.rank}"

    def listing(self) -> str:
        """One line for plan dumps."""
        return self.describe()


@records.frozen
class Piece:
    """Rows ``[start, start + rows)`` along axis 0 of a program input or output, held
    as value ``value`` on ``rank``; ``spec`` is the piece's own (``rows`` leading)."""

    value: int
    rank: int
    start: int
    spec: TensorSpec

    @property
    def rows(self) -> int:
        return self.spec.shape[0]

    @property
    def stop(self) -> int:
        return self.start + self.spec.shape[0]

    def describe(self) -> str:
        return f"rows [{self.start}, {self.stop}) as value {self.value} on rank {self.rank}"


@records.frozen
class InputBinding:
    """Program input ``index`` (value id ``index``), needed whole on ``ranks``.

    ``pieces``: the rows that ranks read as their own values (``jaxpp.chunk``); the
    caller's array is split into them (an array already split so moves nothing).
    """

    index: int
    spec: TensorSpec
    ranks: tuple[int, ...]
    name: str = ""  # where the caller passes it, e.g. "params['w'][0]", for messages
    pieces: tuple[Piece, ...] = ()

    def describe(self) -> str:
        """``argument params['w'][0] (input 3)``, or ``argument 3`` without a name."""
        if self.name:
            return f"argument {self.name} (input {self.index})"
        return f"argument {self.index}"


@records.frozen
class OutputBinding:
    """Program output: ``value`` as held by ``rank``.

    ``replicas`` lists other ``(value, rank)`` pairs holding equal copies (each
    computed on its rank): the output is then one array over all those ranks.
    ``pieces`` (``jaxpp.assemble``): the output is their rows concatenated along axis 0,
    in order, each piece staying on its rank; ``value`` and ``rank`` are then the first
    piece's and ``spec`` is the whole output's.
    """

    value: int
    rank: int
    spec: TensorSpec
    replicas: tuple[tuple[int, int], ...] = ()
    pieces: tuple[Piece, ...] = ()

    def held(self) -> tuple[tuple[int, int], ...]:
        """Every ``(value, rank)`` the output keeps alive to the end of a call."""
        if self.pieces:
            return tuple((p.value, p.rank) for p in self.pieces)
        return ((self.value, self.rank), *self.replicas)


@records.frozen
class Constant:
    """Input ``input`` is not the caller's: the plan gives its value (a microbatch
    index read on ``rank``). The runtime places it once (``place_constants``)."""

    input: int
    rank: int
    value: int
    dtype: str = "int32"

    def array(self) -> np.ndarray:
        return np.asarray(self.value, dtype=np.dtype(self.dtype))


@records.frozen
class ValueInfo:
    """One value as one rank holds it (``ExecutionPlan.values``).

    ``spec`` is how its definition gives it (an input binding, a run's output, a
    receive); ``defined_at`` the index of the instruction that defines it there (-1: a
    program input). ``layout_at`` is the instruction whose executable fixes how the rank
    lays the value out (the run defining it, else the first run reading it; None: no run
    does, so it stays replicated), and ``layout`` that layout as the plan states it
    (None: XLA chooses, or no run fixes it).
    """

    spec: TensorSpec
    defined_at: int
    layout: Layout | None = None
    layout_at: int | None = None


@records.frozen
class ExecutionPlan:
    num_ranks: int
    executables: dict[str, StageExecutable]
    inputs: tuple[InputBinding, ...]
    outputs: tuple[OutputBinding, ...]
    instructions: tuple[Instruction, ...]  # each of a kind in runtime/instructions
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

    @cached_property
    def values(self) -> Mapping[tuple[int, int], ValueInfo]:
        """``(rank, value)`` -> its ``ValueInfo``, for every value the plan holds: worked
        out once per plan from its bindings and instructions, and read by liveness, slot
        resolution and the multi-process setup. A value defined twice on a rank keeps its
        first definition here (slot resolution rejects the plan)."""
        return _value_table(self)

    def __getstate__(self) -> dict:
        """A pickled plan leaves its value table behind (it is worked out again)."""
        state = dict(self.__dict__)
        state.pop("values", None)
        return state


def _value_table(plan: ExecutionPlan) -> dict[tuple[int, int], ValueInfo]:
    found: dict[tuple[int, int], list] = {}  # key -> [spec, defined_at, layout, layout_at]
    for binding in plan.inputs:
        for rank in binding.ranks:
            found.setdefault((rank, binding.index), [binding.spec, -1, None, None])
        for piece in binding.pieces:
            found.setdefault((piece.rank, piece.value), [piece.spec, -1, None, None])
    readers: list[tuple[int, tuple[int, int], TensorSpec]] = []
    executables = plan.executables
    for at, inst in enumerate(plan.instructions):
        rank, fixes = inst.rank, inst.fixes_layouts
        try:
            read, written = inst.read_specs(executables), inst.written_specs(executables)
        except KeyError:  # an unknown executable: slot resolution names it
            continue
        if fixes:
            for value, spec in zip(inst.reads(), read, strict=False):
                readers.append((at, (rank, value), spec))
        for value, spec in zip(inst.writes(), written, strict=False):
            if (rank, value) not in found:
                fixed = (spec.layout, at) if fixes else (None, None)
                found[(rank, value)] = [spec, at, *fixed]
    for at, key, spec in readers:
        entry = found.get(key)
        if entry is not None and entry[3] is None:
            entry[2], entry[3] = spec.layout, at
    return {key: ValueInfo(*entry) for key, entry in found.items()}
