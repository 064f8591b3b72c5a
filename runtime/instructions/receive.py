"""The receive instruction: a value defined on a rank as what a peer sent on a channel.

Resolved, it empties the channel slot its send filled into a new slot of the value
on the receiving rank, checked against the send (ranks, spec). Within one process
consecutive receives become one operation: a batched device-to-device copy of every
value whose layout stays the same (shard k to device k), preceded by a ``copy`` step
for each value that lands in another layout; a value nobody reads is dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from .. import records
from .. import transfer as _transfer
from ..errors import PlanError
from ..execution.codegen import CodeGen, Fields, OpFacts, OpShape
from ..plan import Instruction, StageExecutable, TensorSpec
from . import copy

if TYPE_CHECKING:
    from ..execution.slots import Resolver

KIND = "recv"


@records.frozen
class Recv(Instruction):
    """Defines ``value`` on ``rank`` as what ``peer`` sent on ``channel``."""

    rank: int
    peer: int
    channel: int
    value: int
    spec: TensorSpec

    kind: ClassVar[str] = KIND

    @property
    def receives_on(self) -> int:
        return self.channel

    def writes(self) -> tuple[int, ...]:
        return (self.value,)

    def written_specs(self, executables: Mapping[str, StageExecutable]) -> tuple[TensorSpec, ...]:
        return (self.spec,)

    def describe(self) -> str:
        return f"recv of value {self.value} on rank {self.rank} from rank {self.peer}"

    def listing(self) -> str:
        return f"recv %{self.value} <- rank {self.peer} (channel {self.channel}) {self.spec}"


@records.frozen
class ReceiveStep:
    """A resolved ``Recv``: the channel slot it empties into slot ``destination``."""

    inst: Recv
    channel: int
    destination: int

    consumed: ClassVar[tuple[tuple[int, int], ...]] = ()  # it consumes no buffer


def resolve(resolver: Resolver, at: int, inst: Recv) -> ReceiveStep:
    """Instruction ``at``: the channel its send filled emptied into the value's new slot."""
    send, channel = resolver.channels.take(inst, at)
    if send.rank != inst.peer or send.peer != inst.rank:
        raise PlanError(
            f"channel {inst.channel} carries a send from rank {send.rank} to "
            f"rank {send.peer}, but instruction {at} receives on rank "
            f"{inst.rank} from rank {inst.peer}"
        )
    slots = resolver.table.slots
    if slots[channel].spec != inst.spec:
        raise PlanError(
            f"instruction {at} ({inst.describe()}) expects {inst.spec} on channel "
            f"{inst.channel}, but the send carries {slots[channel].spec}"
        )
    slots[channel].last_use = at
    destination = resolver.table.define(inst.rank, inst.value, inst.spec, None, at)
    return ReceiveStep(inst, channel, destination)


def generate(gen: CodeGen, steps: Sequence[ReceiveStep], at: int) -> int:
    """The operations of the receives from ``steps[at]`` on: a copy step for each value
    landing in another layout, then one batched copy (or only the frees); returns the
    index of the first step after them."""
    end = at
    while end < len(steps) and steps[end].inst.kind == KIND:
        end += 1
    group, slots = steps[at:end], gen.slots
    receives = tuple(step.inst for step in group)
    rank = receives[0].rank
    destinations = tuple(step.destination for step in group)
    batch: list[ReceiveStep] = []
    free: list[int] = []
    flows = receives
    for k, step in enumerate(group):
        free += gen.free_after[at + k]
        if slots[step.destination].last_use == -1:
            continue  # nobody reads it: no copy, the channel just drops it
        source, target = slots[step.channel].sharding, slots[step.destination].sharding
        if _transfer.same_layout(source, target, len(step.inst.spec.shape)):
            batch.append(step)
            continue
        reshard = [copy.CopyStep(step.channel, step.destination, target)]
        shape = gen.shape(("reshard",), _reshard_shape)
        op = shape.make(step.inst.describe(), copy.fields(reshard, slots), copy.constants(reshard))
        gen.add(op, end, OpFacts("reshard", rank, "transfer", destinations, receives, flows))
        flows = ()
    what = ", ".join(inst.describe() for inst in receives)
    if not batch:
        shape = gen.shape(("free", len(free)), lambda: OpShape("free", [], Fields(), len(free), ()))
        op = shape.make(what, free, {})
        gen.add(op, end, OpFacts("free", rank, None, destinations, receives, flows))
        return end
    shape = gen.shape((KIND, len(batch), len(free)), lambda: _shape(len(batch), len(free)))
    fields: list = [s.channel for s in batch]
    for s in batch:
        fields += (s.destination, slots[s.destination].key)
    fields += free
    shardings = [slots[s.destination].sharding for s in batch]
    namespace = {
        "copy": _transfer.batched_copy,
        "lists": [_transfer.device_list(sh) for sh in shardings],
        "shardings": shardings,
        "modes": [_transfer.REUSE] * len(batch),
    }
    op = shape.make(what, fields, namespace)
    gen.add(op, end, OpFacts("copy", rank, "transfer", destinations, receives, flows))
    return end


def _shape(batch: int, free: int) -> OpShape:
    """A batched copy of ``batch`` values, its results stored, then ``free`` slots freed."""
    fields = Fields()
    code = [
        f"r = copy([{fields.slots(batch)}], lists, shardings, modes)",
        *(f"{fields.slot()} = r[{k}]{fields.comment()}" for k in range(batch)),
    ]
    return OpShape("copy", code, fields, free, ("copy", "lists", "shardings", "modes"))


def _reshard_shape() -> OpShape:
    """A value received in one layout put into the layout its readers need."""
    fields = Fields()
    return OpShape("reshard", copy.write(fields, 1), fields, 0, copy.constant_names(1))
