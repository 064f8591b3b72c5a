"""jaxpp-pack-accumulators: one packed loop accumulator per (stage, kind, element type)."""

from __future__ import annotations

import dataclasses
import math

from jax.interpreters.mlir import ir

from jaxpp_mlir._jax_compat import stablehlo
from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.passes import shardings
from jaxpp_mlir.passes.base import ModulePass, register_pass
from jaxpp_mlir.passes.row_packing import RowLayout
from jaxpp_mlir.runtime import records

_ADD = "stablehlo.add"


@register_pass
@records.frozen
class PackAccumulators(ModulePass):
    """Carry the accumulators one stage's task updates as one buffer per element type.

    A backward task of a stage with L layers reads and writes 2L gradient
    accumulators; each is a separate buffer of every launch (issue 13: host
    time grows by about 1 us per input and 4 us per output buffer). This pass
    replaces the loop states that are plain accumulators (``state + x``, the
    state read by nothing else, the sum read only by the yield) updated by ops
    of the same (stage, kind) and of the same floating element type by one
    rank-2 state of rows of ``w`` elements, ``w`` the gcd of the members' sizes,
    each member a whole number of rows: its start value is the start values as
    rows, concatenated before the loop; in that (stage, kind) its update is
    ``packed + concatenate(increments as rows)``, which XLA writes in place
    where the plan donates the packed buffer from task to task; each former
    loop result is its rows of the packed result, reshaped. The additions are
    the same elementwise ones, so every sum is bit-for-bit the one before.

    A group holds at most ``max-members`` accumulators (the next ones start
    another group). Groups of one accumulator, empty accumulators, accumulators
    of a loop with shardings (a sharded step) and states that are not plain
    accumulators are left alone.

    Precondition: ``@main`` holds a ``jaxpp.loop`` (jaxpp-normalize-loop) whose
    body ops carry ``jaxpp.stage``/``jaxpp.kind`` (jaxpp-choose-stages); without
    a loop there is nothing to do.
    Postcondition: the plain accumulators of the loop that share a (stage, kind,
    floating element type) are packed, ``max-members`` to a buffer (empty ones
    are left alone); the loop's results and every value computed from them are
    unchanged.
    """

    name = "jaxpp-pack-accumulators"
    # XLA:CPU fuses the concatenate of 8 increments into the add, not that of 16 (or
    # more): it then writes them into a temporary of the buffer's size first and adds
    # in a second pass (measured on W2 on one stage; benchmarks/RESULTS.md).
    max_members: int = dataclasses.field(
        default=8,
        metadata={"help": "most accumulators packed into one buffer (at least 2)", "min": 2},
    )
    requires = ("jaxpp-normalize-loop", "jaxpp-choose-stages")
    must_precede = ("jaxpp-outline-stages",)  # it rewrites the updates outlining moves away

    def run(self, module: ir.Operation) -> None:
        main = ir_utils.get_main(module)
        loop = ir_utils.find_loop(main)
        if loop is None:
            return
        body = jaxpp.loop_body(loop)
        if shardings.SHARDING_ATTR in loop.attributes:
            return
        groups = _find_groups(body, self.max_members)
        if groups:
            _rewrite(loop, groups)


@dataclasses.dataclass
class _Member:
    state: int  # index among the loop's state values
    update: ir.Operation  # state + increment
    increment: ir.Value
    index: int  # in the group's layout


@dataclasses.dataclass
class _Group:
    layout: RowLayout
    members: list[_Member]


def _find_groups(body: ir.Block, max_members: int) -> list[_Group]:
    """Packable accumulators by (stage, kind, element type), in their yield order,
    at most ``max_members`` to a group."""
    terminator = body.operations[-1].operation
    groups: dict[tuple[int, str, str], list[_Group]] = {}
    for state, value in enumerate(terminator.operands):
        update = ir_utils.defining_op(value)
        argument = body.arguments[1 + state]
        if update is None or update.name != _ADD or len(list(value.uses)) != 1:
            continue
        if shardings.SHARDING_ATTR in update.attributes:
            continue
        operands = list(update.operands)
        if argument not in operands or len(list(argument.uses)) != 1:
            continue
        tensor = ir.RankedTensorType(value.type)
        if not tensor.has_static_shape or not isinstance(tensor.element_type, ir.FloatType):
            continue
        if math.prod(tensor.shape) == 0:
            continue
        increment = operands[1] if operands[0] == argument else operands[0]
        key = (jaxpp.get_stage(update), jaxpp.get_kind(update), str(tensor.element_type))
        chunks = groups.setdefault(key, [])
        if not chunks or len(chunks[-1].members) == max_members:
            chunks.append(_Group(RowLayout(tensor.element_type), []))
        group = chunks[-1]
        index = group.layout.add(tuple(tensor.shape))
        group.members.append(_Member(state, update, increment, index))
    return [group for chunks in groups.values() for group in chunks if len(group.members) > 1]


def _update(packed: ir.Value, group: _Group, tags: ir.Operation) -> ir.Value:
    """``packed`` plus its members' increments, as rows, concatenated in its order.

    One elementwise add over the whole buffer, which XLA fuses with the
    concatenate and writes in place where the plan donates the packed buffer from
    task to task. The rows matter on XLA:CPU: its fusion emitters pick the source
    operand of a fused concatenate per element, so with a rank-1 buffer every
    element pays a compare and select over all members and the update runs
    several times slower than the members' separate adds; concatenated along the
    rows, the operand changes only from row to row and each row is a plain
    vectorized add (benchmarks/RESULTS.md, issue 13). Narrow rows (members whose
    sizes share only a small gcd) bring the per-element cost back."""
    increments = group.layout.pack([m.increment for m in group.members], tags)
    add = stablehlo.AddOp(packed, increments)
    jaxpp.set_stage(add, jaxpp.get_stage(tags), jaxpp.get_kind(tags))
    return add.result


def _rewrite(loop: ir.Operation, groups: list[_Group]) -> None:
    body = jaxpp.loop_body(loop)
    old_yield = body.operations[-1].operation
    packed = {m.state for group in groups for m in group.members}
    kept = [s for s in range(len(list(loop.operands))) if s not in packed]
    inits = list(loop.operands)
    with ir.InsertionPoint(loop), loop.location:
        packed_inits = [g.layout.pack([inits[m.state] for m in g.members]) for g in groups]
        new_loop = jaxpp.create_loop(
            [*(inits[s] for s in kept), *packed_inits],
            num_microbatches=jaxpp.get_int_attr(loop, jaxpp.LOOP_NUM_MICROBATCHES_ATTR),
        )
    new_body = jaxpp.loop_body(new_loop)
    with ir.InsertionPoint(new_body), old_yield.location:
        anchor = jaxpp.create_yield([])
    for op in ir_utils.block_ops(body):
        op.move_before(anchor)
    body.arguments[0].replace_all_uses_with(new_body.arguments[0])
    for position, state in enumerate(kept):
        body.arguments[1 + state].replace_all_uses_with(new_body.arguments[1 + position])
    # Each group's update: the packed state plus its members' increments, flattened.
    packed_updates = []
    for index, group in enumerate(groups):
        tags = group.members[0].update
        argument = new_body.arguments[1 + len(kept) + index]
        with ir.InsertionPoint(old_yield), tags.location:
            packed_updates.append(_update(argument, group, tags))
    with ir.InsertionPoint(old_yield), old_yield.location:
        jaxpp.create_yield([*(old_yield.operands[s] for s in kept), *packed_updates])
    old_yield.erase()
    anchor.erase()
    for group in groups:
        for member in group.members:
            member.update.erase()
    # After the loop, each former result is its slice of the packed result.
    for position, state in enumerate(kept):
        loop.results[state].replace_all_uses_with(new_loop.results[position])
    with ir.InsertionPoint(loop), loop.location:
        for index, group in enumerate(groups):
            result = new_loop.results[len(kept) + index]
            for m in group.members:
                piece = group.layout.unpack(result, m.index)
                loop.results[m.state].replace_all_uses_with(piece)
    loop.erase()
