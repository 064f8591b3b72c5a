"""Slot resolution: a plan's values and transfers as numbered slots, checked.

A slot holds one value on one rank, or one value in flight on a channel.
``resolve_slots`` walks the plan's instructions once, in the global order, and
decides everything a call needs: each instruction's kind (``instructions.registry``)
resolves it into a step (the slots a run reads and writes, a reader that needs
another layout reading a copy; the channel slot a send fills and its receive
empties); here are the program's inputs and outputs, the executables' layouts,
the channels, the donation checks and the slots that die after each instruction
(a value's last use on its rank, ``liveness``). A malformed plan raises
``PlanError`` naming the instruction.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Protocol

import jax
from jax.sharding import Mesh, Sharding

from .. import _jax_compat as jc
from .. import records
from .. import transfer as _transfer
from ..errors import PlanError
from ..executable import Executable
from ..instructions import registry
from ..liveness import last_uses
from ..named_shardings import as_named, layout_sharding
from ..plan import ExecutionPlan, Instruction, OutputBinding, Piece, TensorSpec
from .slot_table import ChannelKey, Slot, SlotTable, ValueKey, free_after


class Step(Protocol):
    """An instruction resolved to slots, as its kind's ``resolve`` makes it."""

    inst: Instruction
    consumed: tuple[tuple[int, int], ...]  # (input position, slot) of each input it donates


@records.frozen
class ResolvedPlan:
    """A plan as slots: what ``dispatch`` turns into code and ``placement`` fills."""

    slots: list[Slot]
    where: dict[tuple[int, int], int]  # (rank, value) -> slot
    steps: list[Step]  # one per instruction
    output_slots: tuple[int, ...]
    free_after: list[list[int]]  # per instruction, the slots that die after it


def resolve_slots(
    plan: ExecutionPlan,
    rank_devices: Sequence[Sequence[jax.Device]],
    executables: Mapping[str, Executable],
    rank_meshes: Sequence[Mesh] | None = None,
) -> ResolvedPlan:
    """``plan`` as slots, on ``rank_devices`` with the compiled ``executables``.

    With ``rank_meshes`` (rank r's submesh), values carry ``NamedSharding``s on them.
    """
    resolver = Resolver(plan, rank_devices, executables, rank_meshes)
    return resolver.resolve()


class Channels:
    """Values in flight: each send's channel slot, until the next receive on its channel."""

    def __init__(self, table: SlotTable):
        self.table = table
        self.pending: dict[int, deque[tuple[Instruction, int]]] = {}  # channel -> in flight
        self.source: dict[int, int] = {}  # channel slot -> the sent slot

    def put(self, send: Instruction, source: int, spec: TensorSpec, at: int) -> int:
        """A new channel slot holding slot ``source`` (of ``spec``), filled by ``send``."""
        slot = self.table.add_slot(ChannelKey(send.sends_on), spec, None, at)
        self.source[slot] = source
        self.pending.setdefault(send.sends_on, deque()).append((send, slot))
        return slot

    def take(self, receive: Instruction, at: int) -> tuple[Instruction, int]:
        """The send and channel slot the next receive on ``receive``'s channel empties."""
        queue = self.pending.get(receive.receives_on)
        if not queue:
            raise PlanError(
                f"instruction {at} ({receive.describe()}) waits on channel "
                f"{receive.receives_on}, but no send on it precedes it"
            )
        return queue.popleft()

    def check_all_received(self) -> None:
        for channel, queue in self.pending.items():
            if queue:
                send, _ = queue[0]
                (value,) = send.reads()
                raise PlanError(
                    f"the send of value {value} from rank {send.rank} on channel "
                    f"{channel} is never received"
                )


class Resolver:
    """One pass over a plan's instructions, in the global order: what each kind's
    ``resolve`` reads and updates (the slot table, the channels, the executables'
    shardings)."""

    def __init__(
        self,
        plan: ExecutionPlan,
        rank_devices: Sequence[Sequence[jax.Device]],
        executables: Mapping[str, Executable],
        rank_meshes: Sequence[Mesh] | None = None,
    ):
        self.plan = plan
        self.rank_devices = rank_devices
        self.executables = executables
        self.rank_meshes = rank_meshes
        self.table = SlotTable(plan)
        self.channels = Channels(self.table)
        self.in_shardings: dict[str, list[Sharding]] = {}
        self.out_shardings: dict[str, list[Sharding]] = {}
        # (mesh id, sharding, ndim) -> its NamedSharding; None: the sharding itself.
        self._named: dict[tuple[int, Sharding, int], Sharding | None] = {}

    def resolve(self) -> ResolvedPlan:
        plan, table = self.plan, self.table
        self._define_inputs()
        self._executable_shardings()
        steps = [self._resolve(at, inst) for at, inst in enumerate(plan.instructions)]
        self.channels.check_all_received()
        output_slots = self._output_slots()
        slots, where = table.slots, table.where
        # Every value is defined once (``define`` checks): the slots say where.
        dies = last_uses(plan, {key: slots[slot].defined_at for key, slot in where.items()})
        end, copied = len(plan.instructions), table.copied
        for key, slot in where.items():
            if slot in copied and dies[key] < end:
                # Readers of another layout read the copy, made from this slot before the
                # first of them: the slot dies after its last direct read or copy.
                slots[slot].last_use = table.last_direct_read[slot]
            else:
                slots[slot].last_use = dies[key]
        self._check_donations(steps)
        self._default_shardings()
        return ResolvedPlan(
            slots=table.slots,
            where=table.where,
            steps=steps,
            output_slots=tuple(output_slots),
            free_after=free_after(table.slots, len(plan.instructions)),
        )

    def check_rank(self, rank: int, what: str) -> None:
        if not 0 <= rank < len(self.rank_devices):
            raise PlanError(
                f"{what} refers to rank {rank}, but the plan runs on {len(self.rank_devices)} ranks"
            )

    def _define_inputs(self) -> None:
        """Program inputs: value i on every rank of its binding, each piece on its rank."""
        for i, binding in enumerate(self.plan.inputs):
            if binding.index != i:
                raise PlanError(f"plan.inputs[{i}] binds input {binding.index}, not {i}")
            for rank in binding.ranks:
                self.check_rank(rank, f"input {i}")
                self.table.define(rank, i, binding.spec, None, -1)
            for piece in binding.pieces:
                what = f"input {i}'s piece, {piece.describe()},"
                self.check_rank(piece.rank, what)
                check_piece(piece, binding.spec, what)
                self.table.define(piece.rank, piece.value, piece.spec, None, -1)

    def _executable_shardings(self) -> None:
        """Shardings each executable takes and gives."""
        for name, stage in self.plan.executables.items():
            devices = self.rank_devices[stage.rank]
            exe = self.executables[name]
            self.in_shardings[name] = _transfer.executable_shardings(
                exe, devices, len(stage.input_specs), outputs=False
            )
            self.out_shardings[name] = _transfer.executable_shardings(
                exe, devices, len(stage.output_specs), outputs=True
            )
            self._check_layouts(name, devices)
            if self.rank_meshes is not None:
                self._name_shardings(name, self.rank_meshes[stage.rank])

    def _check_layouts(self, name: str, devices: Sequence[jax.Device]) -> None:
        """Raises ``PlanError`` where executable ``name`` lays a boundary value out
        otherwise than the plan says."""
        if len(devices) == 1:
            return
        stage = self.plan.executables[name]
        for what, specs, shardings in (
            ("input", stage.input_specs, self.in_shardings[name]),
            ("output", stage.output_specs, self.out_shardings[name]),
        ):
            for position, (spec, actual) in enumerate(zip(specs, shardings, strict=True)):
                check_layout(spec, actual, devices, f"{what} {position} of {name!r}")

    def _name_shardings(self, name: str, mesh: Mesh) -> None:
        """Executable ``name``'s shardings as ``NamedSharding``s on its rank's ``mesh``."""
        stage = self.plan.executables[name]
        for shardings, specs in (
            (self.in_shardings[name], stage.input_specs),
            (self.out_shardings[name], stage.output_specs),
        ):
            shardings[:] = [
                self._as_named(sh, mesh, len(spec.shape))
                for sh, spec in zip(shardings, specs, strict=True)
            ]

    def _as_named(self, sharding: Sharding, mesh: Mesh, ndim: int) -> Sharding:
        """``as_named``, worked out once per distinct sharding, mesh and rank (executables
        share a few shardings; their values then share the ``NamedSharding`` objects)."""
        key = (id(mesh), sharding, ndim)
        if key not in self._named:
            named = as_named(sharding, mesh, ndim)
            self._named[key] = None if named is sharding else named
        named = self._named[key]
        return sharding if named is None else named

    def _resolve(self, at: int, inst: Instruction) -> Step:
        kind = registry.KINDS.get(getattr(inst, "kind", None)) or registry.kind_of(inst, at)
        if not 0 <= inst.rank < len(self.rank_devices):
            self.check_rank(inst.rank, f"instruction {at}")
        return kind.resolve(self, at, inst)

    def _output_slots(self) -> list[int]:
        """The outputs' slots, which stay alive to the end."""
        slots, where = self.table.slots, self.table.where
        output_slots = []
        for k, out in enumerate(self.plan.outputs):
            slot = where.get((out.rank, out.value))
            if slot is None:
                raise PlanError(
                    f"output {k} is value {out.value} on rank {out.rank}, which is never "
                    f"defined there"
                )
            if slots[slot].spec != (out.pieces[0].spec if out.pieces else out.spec):
                raise PlanError(
                    f"output {k} is declared {out.spec} but value {out.value} is {slots[slot].spec}"
                )
            output_slots.append(slot)
            if out.pieces:
                self._check_pieces(k, out)
            for value, rank in out.replicas:  # its copies on other ranks stay alive too
                replica = where.get((rank, value))
                if replica is None or slots[replica].spec != out.spec:
                    raise PlanError(
                        f"output {k} has a copy, value {value} on rank {rank}, that is never "
                        f"defined there as {out.spec}"
                    )
        return output_slots

    def _check_pieces(self, k: int, out: OutputBinding) -> None:
        """An assembled output's pieces: defined on their ranks as stated, and their rows
        one after another from 0 to the whole output's."""
        slots, where = self.table.slots, self.table.where
        start = 0
        for piece in out.pieces:
            what = f"output {k}'s piece, {piece.describe()},"
            check_piece(piece, out.spec, what)
            if piece.start != start:
                raise PlanError(f"{what} does not start at row {start}, where the one before ends")
            start = piece.stop
            slot = where.get((piece.rank, piece.value))
            if slot is None or slots[slot].spec != piece.spec:
                raise PlanError(f"{what} is never defined there as {piece.spec}")
        if start != out.spec.shape[0]:
            raise PlanError(f"output {k}'s pieces end at row {start} of {out.spec.shape[0]}")

    def _check_donations(self, steps: list[Step]) -> None:
        """An input a step consumes (a run's executable aliases it to an output) must die
        there: no later reader, no send still in flight, not a program output."""
        slots, plan = self.table.slots, self.plan
        channels_of: dict[int, list[int]] = {}
        for channel, source in self.channels.source.items():
            channels_of.setdefault(source, []).append(channel)
        for at, step in enumerate(steps):
            for position, slot in step.consumed:
                value = step.inst.reads()[position]
                in_flight = [
                    slots[c].last_use for c in channels_of.get(slot, ()) if slots[c].last_use > at
                ]
                last = max([slots[slot].last_use, *in_flight])
                if last != at:
                    later = (
                        "the program's outputs"
                        if last >= len(plan.instructions)
                        else f"instruction {last} ({plan.instructions[last].describe()})"
                    )
                    raise PlanError(
                        f"instruction {at} ({step.inst.describe()}) consumes input {position} "
                        f"(value {value}, donated to its output), but "
                        f"{later} still reads that value"
                    )

    def _default_shardings(self) -> None:
        """Values nobody consumed: replicated over their rank's devices."""
        slots = self.table.slots
        for info in slots:
            if info.sharding is None and isinstance(info.key, ValueKey):
                info.sharding = _transfer.replicated_sharding(self.rank_devices[info.key.rank])
        for chan, src in self.channels.source.items():
            slots[chan].sharding = slots[src].sharding


def check_piece(piece: Piece, whole: TensorSpec, what: str) -> None:
    """Raises ``PlanError`` unless ``piece`` is rows inside ``whole``, with its other
    dimensions and dtype."""
    if (
        not whole.shape
        or piece.spec.dtype != whole.dtype
        or tuple(piece.spec.shape[1:]) != tuple(whole.shape[1:])
        or piece.start < 0
        or piece.rows < 1
        or piece.stop > whole.shape[0]
    ):
        raise PlanError(f"{what} {piece.spec}, is not rows of {whole}")


def check_layout(
    spec: TensorSpec, actual: Sharding, devices: Sequence[jax.Device], what: str
) -> None:
    """Raises ``PlanError`` naming ``what`` and both layouts unless ``actual`` is the
    layout ``spec`` gives (an unknown one takes any)."""
    if spec.layout is None:
        return
    expected = layout_sharding(spec.layout, devices)
    ndim = len(spec.shape)
    if expected is None or not _transfer.same_layout(expected, actual, ndim):
        got = jc.hlo_sharding(actual, ndim)
        raise PlanError(
            f"{what} is laid out as {got} by its compiled executable, but the plan "
            f"says {spec.layout}"
        )
