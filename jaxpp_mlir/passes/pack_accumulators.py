"""jaxpp-pack-accumulators: one flat loop accumulator per (stage, kind, element type)."""

from __future__ import annotations

import dataclasses
import math

from jax.extend.mlir import ir
from jax.extend.mlir.dialects import stablehlo

from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.passes import ir_utils, shardings
from jaxpp_mlir.passes.base import ModulePass, register_pass

_ADD = "stablehlo.add"


@register_pass
@dataclasses.dataclass(frozen=True)
class PackAccumulators(ModulePass):
    """Carry the accumulators one stage's task updates as one flat buffer per element type.

    A backward task of a stage with L layers reads and writes 2L gradient
    accumulators; each is a separate buffer of every launch (issue 13: host
    time grows by about 1 us per input and 4 us per output buffer). This pass
    replaces the loop states that are plain accumulators (``state + x``, the
    state read by nothing else, the sum read only by the yield) updated by ops
    of the same (stage, kind) and of the same floating element type by one
    rank-1 state: its start value is the start values flattened and
    concatenated before the loop; in that (stage, kind) its update is
    ``packed + concatenate(increments, flattened)``, which XLA writes in place
    where the plan donates the packed buffer from task to task; each former
    loop result is its slice of the packed result, reshaped. The additions
    are the same elementwise ones, so every sum is bit-for-bit the one before.

    Groups of one accumulator, accumulators of a loop with shardings (a
    sharded step) and states that are not plain accumulators are left alone.

    Precondition: ``@main`` holds a ``jaxpp.loop`` (jaxpp-normalize-loop) whose
    body ops carry ``jaxpp.stage``/``jaxpp.kind`` (jaxpp-assign-stages); without
    a loop there is nothing to do.
    Postcondition: no two plain accumulators of the loop share a (stage, kind,
    floating element type); the loop's results and every value computed from
    them are unchanged.
    """

    name = "jaxpp-pack-accumulators"
    requires = ("jaxpp-normalize-loop", "jaxpp-assign-stages")
    must_precede = ("jaxpp-outline-stages",)  # it rewrites the updates outlining moves away

    def run(self, module: ir.Operation) -> None:
        main = ir_utils.get_main(module)
        loop = ir_utils.find_loop(main)
        if loop is None:
            return
        body = jaxpp.loop_body(loop)
        if shardings.SHARDING_ATTR in loop.attributes:
            return
        groups = _find_groups(body)
        if groups:
            _rewrite(loop, groups)


@dataclasses.dataclass
class _Member:
    state: int  # index among the loop's state values
    update: ir.Operation  # state + increment
    increment: ir.Value
    shape: tuple[int, ...]
    offset: int  # in the packed buffer

    @property
    def size(self) -> int:
        return math.prod(self.shape)


@dataclasses.dataclass
class _Group:
    element_type: ir.Type
    members: list[_Member]

    @property
    def size(self) -> int:
        return sum(m.size for m in self.members)


def _find_groups(body: ir.Block) -> list[_Group]:
    terminator = list(body.operations)[-1].operation
    groups: dict[tuple[int, str, str], _Group] = {}
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
        increment = operands[1] if operands[0] == argument else operands[0]
        key = (jaxpp.get_stage(update), jaxpp.get_kind(update), str(tensor.element_type))
        group = groups.setdefault(key, _Group(tensor.element_type, []))
        group.members.append(_Member(state, update, increment, tuple(tensor.shape), group.size))
    return [group for group in groups.values() if len(group.members) > 1]


def _flat(value: ir.Value, element_type: ir.Type, tags: ir.Operation | None) -> ir.Value:
    shape = ir.RankedTensorType(value.type).shape
    size = math.prod(shape)
    if len(shape) == 1:
        return value
    reshape = stablehlo.ReshapeOp(ir.RankedTensorType.get([size], element_type), value)
    if tags is not None:
        jaxpp.set_stage(reshape, jaxpp.get_stage(tags), jaxpp.get_kind(tags))
    return reshape.result


def _concatenate(values: list[ir.Value], tags: ir.Operation | None) -> ir.Value:
    concatenate = stablehlo.ConcatenateOp(values, 0)
    if tags is not None:
        jaxpp.set_stage(concatenate, jaxpp.get_stage(tags), jaxpp.get_kind(tags))
    return concatenate.result


def _tagged(op: ir.OpView, tags: ir.Operation) -> ir.Value:
    jaxpp.set_stage(op, jaxpp.get_stage(tags), jaxpp.get_kind(tags))
    return op.result


def _update(packed: ir.Value, group: _Group, tags: ir.Operation) -> ir.Value:
    """``packed`` plus its members' increments, flattened and concatenated in its order.

    One elementwise add over the whole buffer: on a donated buffer XLA fuses the
    concatenate into the add and writes the sum in place. Alone (a jitted update of
    float32[525312]) that is as fast as the members' separate adds (2.55 against
    2.62 ms on XLA:CPU; a dynamic_update_slice per member: 11.2 ms), but inside a
    backward stage program XLA:CPU still runs it several times slower than the
    separate adds (benchmarks/RESULTS.md), so the pass is not in the default pipeline."""
    increments = [_flat(m.increment, group.element_type, tags) for m in group.members]
    return _tagged(stablehlo.AddOp(packed, _concatenate(increments, tags)), tags)


def _rewrite(loop: ir.Operation, groups: list[_Group]) -> None:
    body = jaxpp.loop_body(loop)
    old_yield = list(body.operations)[-1].operation
    packed = {m.state for group in groups for m in group.members}
    kept = [s for s in range(len(list(loop.operands))) if s not in packed]
    inits = list(loop.operands)
    with ir.InsertionPoint(loop), loop.location:
        packed_inits = [
            _concatenate([_flat(inits[m.state], g.element_type, None) for m in g.members], None)
            for g in groups
        ]
        new_loop = jaxpp.create_loop(
            [*(inits[s] for s in kept), *packed_inits],
            num_microbatches=jaxpp.get_int_attr(loop, jaxpp.LOOP_NUM_MICROBATCHES_ATTR),
        )
    new_body = jaxpp.loop_body(new_loop)
    with ir.InsertionPoint(new_body), old_yield.location:
        anchor = jaxpp.create_yield([])
    for op in [o.operation for o in body.operations]:
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
                piece = stablehlo.SliceOp(result, [m.offset], [m.offset + m.size], [1]).result
                if len(m.shape) != 1:
                    shaped = ir.RankedTensorType.get(list(m.shape), group.element_type)
                    piece = stablehlo.ReshapeOp(shaped, piece).result
                loop.results[m.state].replace_all_uses_with(piece)
    loop.erase()
