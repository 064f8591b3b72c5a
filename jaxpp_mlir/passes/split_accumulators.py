"""jaxpp-split-accumulators: one accumulator per stage for a sum that several stages feed."""

from __future__ import annotations

import dataclasses

from jax.interpreters.mlir import ir

from jaxpp_mlir._jax_compat import sdy, stablehlo
from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.passes import shardings
from jaxpp_mlir.passes.base import ModulePass, register_pass
from jaxpp_mlir.runtime import records

_ADD = "stablehlo.add"


@register_pass
@records.frozen
class SplitAccumulators(ModulePass):
    """Give a loop accumulator one partial sum per stage that feeds it, added after the loop.

    A weight used by two stages (tied embeddings) gets a gradient that is the
    sum of both stages' contributions, accumulated over microbatches as
    ``acc + (a + b)``. Left alone, the accumulator lives on one rank and the
    other stage sends its contribution there every microbatch. This pass
    rewrites such an accumulator into one per (stage, kind) of the
    contributions: ``acc_a + a`` and ``acc_b + b``, each updated where its
    contribution is computed and starting from zero (the original start value
    stays with the accumulator of the stage that updated it), and adds the
    partial sums once after the loop. The sum is the same up to float
    rounding (the per-stage partial sums are added last instead of per
    microbatch).

    Only a loop state updated as ``state + x`` (either operand order), where
    the state has no other reader and ``x`` is a tree of ``stablehlo.add``
    whose inner nodes have no other reader, is split; the leaves of the tree
    are grouped by the stage and kind of the ops that compute them.

    Precondition: ``@main`` holds a ``jaxpp.loop`` (jaxpp-normalize-loop) whose
    body ops carry ``jaxpp.stage``/``jaxpp.kind`` (jaxpp-choose-stages); without
    a loop there is nothing to do.
    Postcondition: every split accumulator's update, in the loop body, reads
    only values of its own (stage, kind); the loop has one more state per extra
    partial sum, and its former result is the sum of the partial sums.
    """

    name = "jaxpp-split-accumulators"
    requires = ("jaxpp-normalize-loop", "jaxpp-choose-stages")
    must_precede = ("jaxpp-outline-stages",)  # it regroups ops that outlining moves away

    def run(self, module: ir.Operation) -> None:
        main = ir_utils.get_main(module)
        loop = ir_utils.find_loop(main)
        if loop is None:
            return
        body = jaxpp.loop_body(loop)
        splits = _find_splits(body)
        if splits:
            _rewrite(loop, splits)


@dataclasses.dataclass
class _Split:
    state: int  # index among the loop's state values
    update: ir.Operation  # state + x
    tree: list[ir.Operation]  # the inner add nodes of x, to erase
    groups: list[list[ir.Value]]  # leaves of x per (stage, kind), the update's own first


def _find_splits(body: ir.Block) -> list[_Split]:
    terminator = body.operations[-1].operation
    splits = []
    for state, value in enumerate(terminator.operands):
        update = ir_utils.defining_op(value)
        argument = body.arguments[1 + state]
        if update is None or update.name != _ADD or len(list(value.uses)) != 1:
            continue
        operands = list(update.operands)
        if argument not in operands or len(list(argument.uses)) != 1:
            continue
        increment = operands[1] if operands[0] == argument else operands[0]
        tree: list[ir.Operation] = []
        leaves: list[ir.Value] = []
        _flatten_sum(increment, tree, leaves)
        if len(leaves) < 2:
            continue  # one contribution: nothing to split
        groups: dict[tuple[int, str], list[ir.Value]] = {}
        own = (jaxpp.get_stage(update), jaxpp.get_kind(update))
        groups[own] = []
        for leaf in leaves:
            producer = ir_utils.defining_op(leaf)
            if producer is None or producer.block != body or not jaxpp.has_stage(producer):
                key = own  # a loop argument or an outer value: read where the update runs
            else:
                key = (jaxpp.get_stage(producer), jaxpp.get_kind(producer))
            groups.setdefault(key, []).append(leaf)
        non_empty = [leaves for leaves in groups.values() if leaves]
        if len(non_empty) > 1:
            # The accumulator stays with its update when that stage contributes, else it
            # moves to the first contributing stage.
            splits.append(_Split(state, update, tree, non_empty))
            if not groups[own]:
                tags = ir_utils.defining_op(non_empty[0][0])
                jaxpp.set_stage(update, jaxpp.get_stage(tags), jaxpp.get_kind(tags))
    return splits


def _flatten_sum(value: ir.Value, tree: list[ir.Operation], leaves: list[ir.Value]) -> None:
    """The leaves of the tree of single-use adds computing ``value``, left to right."""
    producer = ir_utils.defining_op(value)
    if producer is not None and producer.name == _ADD and len(list(value.uses)) == 1:
        tree.append(producer)
        for operand in producer.operands:
            _flatten_sum(operand, tree, leaves)
    else:
        leaves.append(value)


def _rewrite(loop: ir.Operation, splits: list[_Split]) -> None:
    body = jaxpp.loop_body(loop)
    old_yield = body.operations[-1].operation
    num_states = len(list(loop.operands))
    increment_position = {
        id(split): 1 if split.update.operands[0] == body.arguments[1 + split.state] else 0
        for split in splits
    }
    extra = [(split, group) for split in splits for group in split.groups[1:]]
    # The new loop: one more state per extra partial sum, each starting from zero.
    with ir.InsertionPoint(loop), loop.location:
        zeros = [_zeros(split.update.results[0].type) for split, _ in extra]
        new_loop = jaxpp.create_loop(
            [*loop.operands, *zeros],
            num_microbatches=jaxpp.get_int_attr(loop, jaxpp.LOOP_NUM_MICROBATCHES_ATTR),
        )
    if shardings.SHARDING_ATTR in loop.attributes:
        per_value = list(
            sdy.TensorShardingPerValueAttr(loop.attributes[shardings.SHARDING_ATTR]).shardings
        )
        shardings.set_result_shardings(
            new_loop, [*per_value, *(per_value[split.state] for split, _ in extra)]
        )
    new_body = jaxpp.loop_body(new_loop)
    with ir.InsertionPoint(new_body), old_yield.location:
        anchor = jaxpp.create_yield([])
    for op in ir_utils.block_ops(body):
        op.move_before(anchor)
    for old, new in zip(body.arguments, new_body.arguments, strict=False):
        old.replace_all_uses_with(new)
    # The extra partial sums, updated where their contributions are computed.
    new_states = []
    for position, (split, group) in enumerate(extra):
        argument = new_body.arguments[1 + num_states + position]
        tags = ir_utils.defining_op(group[0])
        with ir.InsertionPoint(old_yield), split.update.location:
            total = _sum([argument, *group], split.update, tags)
        new_states.append(total)
    # The original accumulator keeps the contributions of its own stage.
    for split in splits:
        with ir.InsertionPoint(split.update), split.update.location:
            own = _sum(split.groups[0], split.update, split.update)
        split.update.operands[increment_position[id(split)]] = own
        for node in split.tree:
            node.erase()
    with ir.InsertionPoint(old_yield), old_yield.location:
        jaxpp.create_yield([*old_yield.operands, *new_states])
    old_yield.erase()
    anchor.erase()
    # After the loop, each former result is the sum of its partial sums.
    totals: dict[int, ir.Value] = {}
    with ir.InsertionPoint(loop), loop.location:
        for position, (split, _) in enumerate(extra):
            partial = new_loop.results[num_states + position]
            current = totals.get(split.state, new_loop.results[split.state])
            totals[split.state] = stablehlo.AddOp(current, partial).result
    for index, result in enumerate(loop.results):
        result.replace_all_uses_with(totals.get(index, new_loop.results[index]))
    loop.erase()


def _zeros(value_type: ir.Type) -> ir.Value:
    tensor = ir.RankedTensorType(value_type)
    element = tensor.element_type
    if isinstance(element, ir.FloatType):
        zero = ir.FloatAttr.get(element, 0.0)
    else:
        zero = ir.IntegerAttr.get(element, 0)
    splat = ir.DenseElementsAttr.get_splat(tensor, zero)
    return stablehlo.ConstantOp(splat).result


def _sum(values: list[ir.Value], like: ir.Operation, tags: ir.Operation) -> ir.Value:
    """``values`` added left to right, each add tagged with the stage and kind of ``tags``
    and the sharding of ``like`` (an add of the same type)."""
    total = values[0]
    for value in values[1:]:
        add = stablehlo.AddOp(total, value)
        jaxpp.set_stage(add, jaxpp.get_stage(tags), jaxpp.get_kind(tags))
        if shardings.SHARDING_ATTR in like.attributes:
            add.attributes[shardings.SHARDING_ATTR] = like.attributes[shardings.SHARDING_ATTR]
        total = add.result
    return total
