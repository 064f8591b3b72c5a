"""jaxpp-normalize-loop: turn the treduce ``stablehlo.while`` into a ``jaxpp.loop``."""

from __future__ import annotations

from jax.interpreters.mlir import ir

from jaxpp_mlir import diagnostics
from jaxpp_mlir._jax_compat import sdy, stablehlo
from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.ir.utils import find_main
from jaxpp_mlir.passes import shardings
from jaxpp_mlir.passes.base import Evidence, ModulePass, register_pass
from jaxpp_mlir.runtime import records


@register_pass
@records.frozen
class NormalizeLoop(ModulePass):
    """Rewrite the microbatch loop (the while holding treduce's loop marker) as a jaxpp.loop.

    ``treduce`` lowers to one ``stablehlo.while`` whose body holds the loop
    marker. Its iteration arguments are of three sorts, told apart from the
    body alone: loop invariants (returned unchanged), microbatch counters
    (start at 0 and are incremented by 1, seen through the
    ``sdy.sharding_constraint`` ops JAX's explicit sharding puts on every
    result) and state (accumulators). The
    rewrite keeps only the state as operands and results of ``jaxpp.loop``:
    the body reads invariants straight from the enclosing function, receives
    the microbatch index as its first block argument and the state after it,
    and ends with ``jaxpp.yield`` of the new state. The loop marker is erased.

    Precondition: ``@main`` holds no ``func.call`` (jaxpp-inline-calls); at
    most one loop marker, directly in the body of a top-level
    ``stablehlo.while`` of ``@main``.
    Postcondition: without a loop marker the module is unchanged; otherwise
    ``@main`` holds one ``jaxpp.loop`` (attribute ``jaxpp.num_microbatches``, and
    ``jaxpp.schedule`` where treduce was given a schedule: jaxpp-choose-stages reads it)
    in place of the while, and no loop marker remains.
    """

    name = "jaxpp-normalize-loop"
    requires = ("jaxpp-inline-calls",)  # it looks for the loop marker in @main only

    @classmethod
    def finished(cls, module: ir.Operation) -> Evidence | None:
        main = find_main(module)
        loop = ir_utils.find_loop(main) if main is not None else None
        if loop is None:
            return None
        return Evidence(loop, "the microbatch loop is already normalized (found jaxpp.loop)")

    @classmethod
    def unfinished(cls, module: ir.Operation) -> Evidence | None:
        main = find_main(module)
        if main is None:
            return None
        # A loop marker this pass would rewrite sits at the top of a while's body, or (an
        # error for run()) at the top of @main: looking there avoids walking the module.
        for op in ir_utils.body(main).operations:
            op = op.operation
            if jaxpp.is_loop_marker(op):
                return Evidence(op, "the step still holds treduce's loop marker")
            if op.name == ir_utils.WHILE_OP:
                for nested in op.regions[1].blocks[0].operations:
                    if jaxpp.is_loop_marker(nested):
                        return Evidence(op, _NOT_NORMALIZED)
        return None

    def run(self, module: ir.Operation) -> None:
        main = ir_utils.get_main(module)
        markers = [
            op
            for op in ir_utils.walk(main)
            if op.name in jaxpp.MARKER_OP_NAMES and jaxpp.is_loop_marker(op)
        ]
        if not markers:
            return
        if len(markers) > 1:
            # Blamed on the second loop, whose location reaches the user's treduce call
            # (the marker's own location stops inside treduce).
            second = _parent(markers[1]) or markers[1]
            raise diagnostics.error(
                second,
                "a step may hold only one microbatch loop (treduce): call treduce once and "
                "return everything the microbatches compute from the function it applies",
            )
        marker = markers[0]
        loop = _parent(marker)
        if loop is None or loop.name != ir_utils.WHILE_OP or loop.block != ir_utils.body(main):
            # The marker's own location stops inside treduce; its while's reaches the user's call.
            blamed = loop if loop is not None and loop.name == ir_utils.WHILE_OP else marker
            raise diagnostics.error(
                blamed,
                "the microbatch loop marker must sit directly in the body of a top-level "
                "stablehlo.while (treduce inside other control flow is not supported)",
            )
        num_microbatches = jaxpp.loop_num_microbatches(marker)
        if num_microbatches is None or num_microbatches < 1:
            raise diagnostics.error(marker, "the loop marker has no valid jaxpp.num_microbatches")
        _rewrite(loop, marker, num_microbatches)


_NOT_NORMALIZED = "the microbatch loop is still a stablehlo.while holding treduce's loop marker"


def _parent(op: ir.Operation) -> ir.Operation | None:
    parent = op.parent
    if parent is None:
        return None
    return parent.operation  # an Operation's is itself


def _rewrite(loop: ir.Operation, marker: ir.Operation, num_microbatches: int) -> None:
    body = loop.regions[1].blocks[0]
    body_ops = ir_utils.block_ops(body)
    terminator = body_ops[-1]
    yielded = list(terminator.operands)
    arguments = list(body.arguments)
    counter_arg = _unconstrained(marker.operands[0])
    kinds = _argument_kinds(loop, arguments, yielded)
    if counter_arg not in arguments or kinds[arguments.index(counter_arg)] != "counter":
        raise diagnostics.error(
            marker, "the loop marker must mark the loop's microbatch counter (0, 1, 2, ...)"
        )
    state = [i for i, kind in enumerate(kinds) if kind == "state"]
    with ir.InsertionPoint(loop), loop.location:
        new_loop = jaxpp.create_loop(
            [loop.operands[i] for i in state], num_microbatches=num_microbatches
        )
    requested = jaxpp.loop_schedule(marker)
    if requested is not None:
        jaxpp.set_loop_schedule(new_loop, requested)
    if shardings.SHARDING_ATTR in loop.attributes:
        per_value = sdy.TensorShardingPerValueAttr(loop.attributes[shardings.SHARDING_ATTR])
        shardings.set_result_shardings(new_loop, [per_value.shardings[i] for i in state])
    new_body = jaxpp.loop_body(new_loop)
    with ir.InsertionPoint(new_body), terminator.location:
        new_yield = jaxpp.create_yield([yielded[i] for i in state])
    for op in body_ops[:-1]:
        op.move_before(new_yield)
    terminator.erase()
    index_arg = new_body.arguments[0]
    if counter_arg.type != index_arg.type:  # e.g. an i64 counter under jax_enable_x64
        with ir.InsertionPoint.at_block_begin(new_body), marker.location:
            index_arg = stablehlo.ConvertOp(counter_arg.type, index_arg).result
    marker.results[0].replace_all_uses_with(index_arg)
    moved = body_ops[:-1]
    del moved[moved.index(marker)]  # erased: its Python object must not be used again
    marker.erase()
    for position, index in enumerate(state):
        arguments[index].replace_all_uses_with(new_body.arguments[1 + position])
    for index, kind in enumerate(kinds):
        if kind == "invariant":
            arguments[index].replace_all_uses_with(loop.operands[index])
        elif kind == "counter":
            arguments[index].replace_all_uses_with(index_arg)
    _erase_dead_counter_updates(moved)
    _replace_results(loop, new_loop, kinds, state)
    loop.erase()


def _argument_kinds(
    loop: ir.Operation, arguments: list[ir.Value], yielded: list[ir.Value]
) -> list[str]:
    """Each while argument's kind: "invariant", "counter" (0, 1, 2, ...) or "state"."""
    kinds = []
    for index, (argument, value) in enumerate(zip(arguments, yielded, strict=True)):
        if value == argument:
            kinds.append("invariant")
        elif _is_counter(argument, value, loop.operands[index]):
            kinds.append("counter")
        else:
            kinds.append("state")
    return kinds


def _replace_results(
    loop: ir.Operation, new_loop: ir.Operation, kinds: list[str], state: list[int]
) -> None:
    """Uses of the while's results read the jaxpp.loop's (or the invariant inputs)."""
    for index, kind in enumerate(kinds):
        result = loop.results[index]
        if kind == "invariant":
            result.replace_all_uses_with(loop.operands[index])
        elif kind == "state":
            result.replace_all_uses_with(new_loop.results[state.index(index)])
        elif list(result.uses):
            raise diagnostics.error(
                loop, "the microbatch counter is used after the loop, which is not supported"
            )


def _is_counter(argument: ir.Value, value: ir.Value, init: ir.Value) -> bool:
    """``value`` is ``argument + 1`` and the loop starts it at constant 0."""
    update = ir_utils.defining_op(_unconstrained(value))
    if update is None or update.name != "stablehlo.add":
        return False
    operands = [_unconstrained(operand) for operand in update.operands]
    if argument not in operands:
        return False
    other = operands[1] if operands[0] == argument else operands[0]
    return _constant_value(other) == 1 and _constant_value(init) == 0


def _unconstrained(value: ir.Value) -> ir.Value:
    """``value`` before any ``sdy.sharding_constraint`` (JAX's explicit sharding mode puts
    one on every result, the scalar counter's included, where it changes nothing)."""
    producer = ir_utils.defining_op(value)
    while producer is not None and producer.name == _CONSTRAINT_OP:
        value = producer.operands[0]
        producer = ir_utils.defining_op(value)
    return value


def _constant_value(value: ir.Value) -> int | None:
    producer = ir_utils.defining_op(_unconstrained(value))
    if producer is None or producer.name not in ir_utils.CONSTANT_OPS:
        return None
    attr = producer.attributes["value"]
    try:
        dense = ir.DenseIntElementsAttr(attr)
    except (ValueError, TypeError):
        return None
    if not dense.is_splat and len(dense) != 1:
        return None
    return int(dense.get_splat_value().value) if dense.is_splat else int(dense[0])


def _erase_dead_counter_updates(ops: list[ir.Operation]) -> None:
    """Erases the adds, constants and sharding constraints among ``ops`` (a block's, in
    order) left without users (the old counter increments, their constants and the
    constraints explicit sharding put on them). In reverse order an op's users are seen,
    and erased, before the op: one pass leaves none without users."""
    for op in reversed(ops):
        # Adds, constants and constraints have one result and no region.
        if op.name in _DEAD_CANDIDATE_OPS and next(iter(op.results[0].uses), None) is None:
            op.erase()


_CONSTRAINT_OP = "sdy.sharding_constraint"
_DEAD_CANDIDATE_OPS = ("stablehlo.add", _CONSTRAINT_OP, *ir_utils.CONSTANT_OPS)
