"""The send instruction: a value a rank holds put on a channel for another rank.

Resolved, it reads the sender's slot and fills a channel slot, which the matching
receive (the next one on that channel) empties. Within one process its code only
hands the array over (``env[channel] = env[source]``): the receive makes the copy.
Between processes a send and its receive become one transfer executable of each
process's local plan (``runtime/multiprocess``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from .. import records
from ..errors import PlanError
from ..execution.codegen import CodeGen, Fields, OpFacts, OpShape
from ..plan import Instruction

if TYPE_CHECKING:
    from ..execution.slots import Resolver

KIND = "send"


@records.frozen
class Send(Instruction):
    """Sends ``value`` (held by ``rank``) to ``peer`` on ``channel``."""

    rank: int
    peer: int
    channel: int
    value: int

    kind: ClassVar[str] = KIND

    @property
    def sends_on(self) -> int:
        return self.channel

    def reads(self) -> tuple[int, ...]:
        return (self.value,)

    def describe(self) -> str:
        return f"send of value {self.value} from rank {self.rank} to rank {self.peer}"

    def listing(self) -> str:
        return f"send %{self.value} -> rank {self.peer} (channel {self.channel})"


@records.frozen
class SendStep:
    """A resolved ``Send``: the sent slot and the channel slot it fills."""

    inst: Send
    source: int
    channel: int

    consumed: ClassVar[tuple[tuple[int, int], ...]] = ()  # it consumes no buffer


def resolve(resolver: Resolver, at: int, inst: Send) -> SendStep:
    """Instruction ``at``: the sender's slot read, a channel slot filled."""
    resolver.check_rank(inst.peer, f"instruction {at}")
    table = resolver.table
    source = table.where.get((inst.rank, inst.value))
    if source is None:
        raise PlanError(
            f"instruction {at} ({inst.describe()}) sends a value that rank "
            f"{inst.rank} does not hold"
        )
    spec = table.slots[source].spec
    table.use(inst.rank, inst.value, at, spec, None)
    channel = resolver.channels.put(inst, source, spec, at)
    return SendStep(inst, source, channel)


def generate(gen: CodeGen, steps: Sequence[SendStep], at: int) -> int:
    """The operation of send ``steps[at]``; returns the next step's index."""
    step, free = steps[at], gen.free_after[at]
    shape = gen.shape((KIND, len(free)), lambda: _shape(len(free)))
    fields = [step.channel, step.source, gen.slots[step.channel].key, *free]
    op = shape.make(step.inst.describe(), fields, {})
    gen.add(op, at + 1, OpFacts(KIND, step.inst.rank, None, (), (step.inst,)))
    return at + 1


def _shape(free: int) -> OpShape:
    """A send's code: the value handed over to its channel slot, then ``free`` slots freed."""
    fields = Fields()
    code = [f"{fields.slot()} = {fields.slot()}{fields.comment()}"]
    return OpShape(KIND, code, fields, free, ())
