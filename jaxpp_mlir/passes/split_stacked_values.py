"""jaxpp-split-stacked-values: stacked layer values split by stage, as pieces end to end."""

from __future__ import annotations

from jax.interpreters.mlir import ir

from jaxpp_mlir import diagnostics
from jaxpp_mlir._jax_compat import sdy, stablehlo
from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.passes import shardings
from jaxpp_mlir.passes.base import UNCHANGED, ModulePass, Unchanged, register_pass
from jaxpp_mlir.passes.stacked_pieces import (
    CONCATENATE,
    ELEMENTWISE,
    Chunks,
    Partition,
    Pieces,
    Splitter,
    copy_attributes,
    leading_rows,
    main_argument,
    piece_type,
)
from jaxpp_mlir.runtime import records

_SLICE = "stablehlo.slice"


@register_pass
@records.frozen
class SplitStackedValues(ModulePass):
    """Hold a stacked layer parameter split among stages as pieces, from the inputs to the outputs.

    A scan over layers split into stages (one ``stablehlo.while`` per stage) reads
    rows ``[a, b)`` of a stacked argument ``[L, ...]`` of ``@main`` as a static
    ``stablehlo.slice`` along axis 0, and gives its stacked gradient as one piece
    per stage, concatenated (dimension 0) where the accumulator of the microbatch
    loop adds it. Left so, every stage receives the whole parameter and one rank
    accumulates and updates all of it. This pass moves the split to the program's
    boundary:

    - a slice of rows ``[a, b)`` of an argument read by a ``stablehlo.while`` (in the
      loop body or before the loop; through unary elementwise ops such as a
      ``convert`` too) reads ``jaxpp.chunk(%arg) {jaxpp.start = a, jaxpp.rows = b - a}``
      instead, at the top of ``@main``, tagged with the stage holding it
      (``jaxpp.stage``; place-stages gives it that stage's rank). An argument whose
      slices overlap without being equal is left whole (a located warning);
    - a loop state updated as ``state + concatenate(g_0, ..., g_S)`` (dimension 0),
      or as ``state`` plus a cast (unary elementwise ops) of such a concatenation,
      becomes one state per piece, ``state_i + g_i`` (``g_i`` cast alike), updated by
      the stage computing ``g_i``; its start value is split alike (a zero broadcast
      gives a zero per piece);
    - after the loop, each op reading pieces is computed per piece where a rule of
      ``passes/stacked_pieces.py`` covers it (elementwise ops, broadcasts, reshapes
      and transposes keeping the rows, row-wise reductions: an optimizer update);
      its other operands of the same rows become pieces too (a whole argument, an Adam
      moment: its chunks); a reduction over axis 0 (the sum of squares of a global
      norm) becomes one partial reduction per piece and one op combining the partials,
      so only reduced values cross ranks. An op no rule covers reads the concatenation
      of the pieces instead, with a located ``PartitionWarning`` naming it;
    - a result of ``@main`` held as pieces is ``jaxpp.assemble`` of them; an argument
      with chunks that is still read whole elsewhere is read as the concatenation of
      its chunks (covering all its rows; a located warning), so a chunked argument is
      read only through its chunks.

    Programs without such a slice (every program without a split layer scan) are
    left unchanged, found by one look at the slices of the loop body and of ``@main``.
    The numbers are those of the unsplit program, but for reductions over axis 0,
    which add their partial results in row order (float rounding).

    Precondition: ``@main`` holds a ``jaxpp.loop`` (jaxpp-normalize-loop) whose body
    ops carry ``jaxpp.stage``/``jaxpp.kind`` (jaxpp-choose-stages, after the loop
    split of a layer scan); without a loop there is nothing to do.
    Postcondition: no static axis-0 slice of an argument of ``@main`` feeds a
    ``stablehlo.while`` (each reads a chunk), but where rows overlap; no loop state
    is updated by adding a concatenation of pieces (or a cast of one); every
    ``jaxpp.chunk`` is at the top of ``@main`` and carries ``jaxpp.stage``, the
    chunks of one argument hold disjoint rows, and an argument with chunks is read
    only by them;
    ``jaxpp.assemble`` ops are read only by the return.
    """

    name = "jaxpp-split-stacked-values"
    requires = ("jaxpp-normalize-loop", "jaxpp-choose-stages")
    must_precede = ("jaxpp-outline-stages",)  # it reads and regroups the stages' ops

    def run(self, module: ir.Operation) -> Unchanged | None:
        main = ir_utils.get_main(module)
        loop = ir_utils.find_loop(main)
        if loop is None:
            return UNCHANGED
        reads = _stacked_reads(main, loop)
        if not reads:
            return UNCHANGED
        chunks = Chunks(main)
        splitter = Splitter(main, chunks)
        _read_chunks(reads, chunks, splitter)
        loop = _split_accumulators(loop, splitter)
        block = ir_utils.body(main)
        after = ir_utils.block_ops(block)
        for op in after[after.index(loop) + 1 :]:
            splitter.visit(op)
        blocks = (jaxpp.loop_body(loop), block)
        splitter.erase_replaced(blocks)
        _read_chunked_arguments_whole(splitter)
        splitter.erase_replaced(blocks)
        return None if splitter.changed else UNCHANGED


@records.frozen
class _StackedRead:
    """A static slice of rows of an argument of ``@main`` (through ``chain``, unary
    elementwise ops applied to the argument, first to last) that a while loop reads."""

    slice: ir.Operation
    argument: ir.BlockArgument
    chain: tuple[ir.Operation, ...]
    rows: tuple[int, int]
    stage: int


def _stacked_reads(main: ir.Operation, loop: ir.Operation) -> list[_StackedRead]:
    """The slices of arguments that while loops read, in block order (@main's, then the
    loop body's)."""
    reads = []
    for op in [
        *ir_utils.block_ops(ir_utils.body(main)),
        *ir_utils.block_ops(jaxpp.loop_body(loop)),
    ]:
        if op.name != _SLICE:
            continue
        readers = [ir_utils.use_owner(use) for use in op.results[0].uses]
        loops = [reader for reader in readers if reader.name == ir_utils.WHILE_OP]
        if not loops:
            continue
        rows = _axis0_rows(op)
        source = _argument_through_unary(op.operands[0], main)
        if rows is None or source is None:
            continue
        argument, chain = source
        reads.append(_StackedRead(op, argument, chain, rows, _holding_stage(op, loops)))
    return reads


def _axis0_rows(op: ir.Operation) -> tuple[int, int] | None:
    """``(start, rows)`` of a slice of whole rows along axis 0 (else None)."""
    shape = leading_rows(op.operands[0]) and list(ir.RankedTensorType(op.operands[0].type).shape)
    if not shape:
        return None
    start = list(ir.DenseI64ArrayAttr(op.attributes["start_indices"]))
    limit = list(ir.DenseI64ArrayAttr(op.attributes["limit_indices"]))
    strides = list(ir.DenseI64ArrayAttr(op.attributes["strides"]))
    if any(s != 1 for s in strides) or any(start[1:]) or limit[1:] != shape[1:]:
        return None
    if (start[0], limit[0]) == (0, shape[0]):
        return None  # all rows: nothing is split
    return start[0], limit[0] - start[0]


def _argument_through_unary(
    value: ir.Value, main: ir.Operation
) -> tuple[ir.BlockArgument, tuple[ir.Operation, ...]] | None:
    chain: list[ir.Operation] = []
    while True:
        argument = main_argument(value, main)
        if argument is not None:
            return argument, tuple(reversed(chain))
        producer = ir_utils.defining_op(value)
        if (
            producer is None
            or producer.name not in ELEMENTWISE
            or len(producer.operands) != 1
            or len(producer.results) != 1
            or list(ir.RankedTensorType(producer.operands[0].type).shape)
            != list(ir.RankedTensorType(producer.results[0].type).shape)
        ):
            return None
        chain.append(producer)
        value = producer.operands[0]


def _holding_stage(slice_op: ir.Operation, loops: list[ir.Operation]) -> int:
    """The stage a read's chunk goes to: the slice's, else its lowest reading loop's."""
    if jaxpp.has_stage(slice_op):
        return jaxpp.get_stage(slice_op)
    stages = [jaxpp.get_stage(op) for op in loops if jaxpp.has_stage(op)]
    return min(stages, default=0)


def _read_chunks(reads: list[_StackedRead], chunks: Chunks, splitter: Splitter) -> None:
    """Each read's slice replaced by its chunk (through its chain, rebuilt on the chunk)."""
    by_argument: dict[int, list[_StackedRead]] = {}
    for read in reads:
        by_argument.setdefault(read.argument.arg_number, []).append(read)
    for group in by_argument.values():
        clash = _overlapping(group)
        if clash is not None:
            first, second = clash
            diagnostics.warning(
                second.slice,
                f"rows [{second.rows[0]}, {sum(second.rows)}) of a stacked argument "
                f"({second.argument.type}) overlap rows [{first.rows[0]}, {sum(first.rows)}) "
                f"read at {diagnostics.format_location(first.slice.location)}: the "
                "argument stays whole and every stage reading it receives all of it",
            )
            continue
        for read in group:
            value = chunks.get(read.argument, read.rows, read.stage, read.slice.location)
            with ir.InsertionPoint(read.slice):
                for op in read.chain:
                    value = _on_rows(op, value, read.slice)
            read.slice.results[0].replace_all_uses_with(value)
            splitter.replaced.append(read.slice)
            splitter.replaced.extend(reversed(read.chain))
            splitter.changed = True


def _overlapping(group: list[_StackedRead]) -> tuple[_StackedRead, _StackedRead] | None:
    for index, second in enumerate(group):
        for first in group[:index]:
            a, b = first.rows, second.rows
            if a != b and a[0] < b[0] + b[1] and b[0] < a[0] + a[1]:
                return first, second
    return None


def _on_rows(op: ir.Operation, value: ir.Value, tags: ir.Operation) -> ir.Value:
    """A copy of the unary ``op`` reading ``value`` (some rows of its operand), at the
    current insertion point, with the stage and kind of ``tags`` (none if it has none)."""
    rows = leading_rows(value)
    attributes = copy_attributes(op)
    for name in (jaxpp.STAGE_ATTR, jaxpp.KIND_ATTR):
        attributes.pop(name, None)
        if name in tags.attributes:
            attributes[name] = tags.attributes[name]
    copy = ir.Operation.create(
        op.name,
        results=[piece_type(op.results[0].type, rows)],
        operands=[value],
        attributes=attributes,
        loc=op.location,
    )
    return copy.results[0]


@records.frozen
class _Accumulator:
    """Loop state ``state`` updated by ``update`` = state + ``chain`` (unary elementwise
    ops, a cast, last first) of a ``concat`` of pieces."""

    state: int
    update: ir.Operation
    concat: ir.Operation
    chain: tuple[ir.Operation, ...]
    partition: Partition
    tags: tuple[tuple[int, str], ...]  # (stage, kind) updating each piece


def _split_accumulators(loop: ir.Operation, splitter: Splitter) -> ir.Operation:
    """The loop with one state per piece for every accumulator of a concatenation; its
    former results are the (unread once the rest is done) concatenations of the new
    ones, held as pieces by ``splitter``. Returns the loop (a new op if it changed)."""
    found = _accumulators_of_pieces(loop)
    if not found:
        return loop
    inits, positions = _piece_inits(loop, found, splitter)
    with ir.InsertionPoint(loop), loop.location:
        new_loop = jaxpp.create_loop(
            inits, num_microbatches=jaxpp.get_int_attr(loop, jaxpp.LOOP_NUM_MICROBATCHES_ATTR)
        )
    for name, attribute in copy_attributes(loop).items():
        if name not in new_loop.attributes and name != jaxpp.SHARDING_ATTR:
            new_loop.attributes[name] = attribute
    if jaxpp.SHARDING_ATTR in loop.attributes:
        per_value = sdy.TensorShardingPerValueAttr(loop.attributes[jaxpp.SHARDING_ATTR]).shardings
        shardings.set_result_shardings(
            new_loop, [per_value[i] for i, places in enumerate(positions) for _ in places]
        )
    _move_body(loop, new_loop, found, positions)
    # The former results: concatenations of the new ones, held as pieces.
    for index, result in enumerate(loop.results):
        places = positions[index]
        if index not in found:
            result.replace_all_uses_with(new_loop.results[places[0]])
            continue
        accumulator = found[index]
        values = [new_loop.results[place] for place in places]
        with ir.InsertionPoint(loop), loop.location:
            whole = stablehlo.ConcatenateOp(values, 0)
        result.replace_all_uses_with(whole.result)
        stages = tuple(stage for stage, _ in accumulator.tags)
        splitter.split[whole.result] = Pieces(accumulator.partition, tuple(values), stages)
        splitter.replaced.append(whole.operation)
    loop.erase()
    splitter.changed = True
    return new_loop


def _piece_inits(
    loop: ir.Operation, found: dict[int, _Accumulator], splitter: Splitter
) -> tuple[list[ir.Value], list[list[int]]]:
    """The new loop's start values (those of a split accumulator's pieces made before the
    loop), and the positions of each former state among them."""
    inits: list[ir.Value] = []
    positions: list[list[int]] = []
    for index, init in enumerate(loop.operands):
        accumulator = found.get(index)
        if accumulator is None:
            positions.append([len(inits)])
            inits.append(init)
            continue
        template = Pieces(accumulator.partition, (), tuple(s for s, _ in accumulator.tags))
        pieces = splitter.resolve(init, template, loop)
        producer = ir_utils.defining_op(init)
        if producer is not None:
            splitter.replaced.append(producer)  # erased if no longer read
        positions.append(list(range(len(inits), len(inits) + len(pieces))))
        inits.extend(pieces)
    return inits, positions


def _move_body(
    loop: ir.Operation,
    new_loop: ir.Operation,
    found: dict[int, _Accumulator],
    positions: list[list[int]],
) -> None:
    """Moves the body into ``new_loop``, each piece accumulated by the stage computing it."""
    body, new_body = jaxpp.loop_body(loop), jaxpp.loop_body(new_loop)
    old_yield = ir_utils.block_ops(body)[-1]
    with ir.InsertionPoint(new_body), old_yield.location:
        anchor = jaxpp.create_yield([])
    for op in ir_utils.block_ops(body):
        op.move_before(anchor)
    body.arguments[0].replace_all_uses_with(new_body.arguments[0])
    updates: list[ir.Value] = []
    for index, places in enumerate(positions):
        accumulator = found.get(index)
        if accumulator is None:
            body.arguments[1 + index].replace_all_uses_with(new_body.arguments[1 + places[0]])
            updates.append(old_yield.operands[index])
            continue
        for place, piece, (stage, kind) in zip(
            places, accumulator.concat.operands, accumulator.tags, strict=True
        ):
            with ir.InsertionPoint(old_yield), accumulator.update.location:
                add = stablehlo.AddOp(new_body.arguments[1 + place], piece)
            jaxpp.set_stage(add, stage, kind)
            with ir.InsertionPoint(add):
                for op in reversed(accumulator.chain):
                    add.operands[1] = _on_rows(op, add.operands[1], add)
            updates.append(add.result)
    with ir.InsertionPoint(old_yield), old_yield.location:
        jaxpp.create_yield(updates)
    old_yield.erase()
    anchor.erase()
    for accumulator in found.values():
        accumulator.update.erase()
        for op in accumulator.chain:
            op.erase()
        if not list(accumulator.concat.results[0].uses):
            accumulator.concat.erase()


def _accumulators_of_pieces(loop: ir.Operation) -> dict[int, _Accumulator]:
    """The loop states updated as ``state + concatenate(pieces)`` along dimension 0, the
    state read by nothing else and the sum by the yield alone."""
    body = jaxpp.loop_body(loop)
    terminator = ir_utils.block_ops(body)[-1]
    found = {}
    for index, value in enumerate(terminator.operands):
        update = ir_utils.defining_op(value)
        if update is None or update.name != "stablehlo.add" or update.block != body:
            continue
        state = body.arguments[1 + index]
        operands = list(update.operands)
        if len(list(value.uses)) != 1 or state not in operands or len(list(state.uses)) != 1:
            continue
        increment = operands[1] if operands[0] == state else operands[0]
        chain = _unary_chain(increment, body)
        concat = ir_utils.defining_op(chain[-1].operands[0] if chain else increment)
        if (
            concat is None
            or concat.name != CONCATENATE
            or concat.block != body
            or ir.IntegerAttr(concat.attributes["dimension"]).value != 0
            or len(concat.operands) < 2
        ):
            continue
        partition, tags, start = [], [], 0
        own = (jaxpp.get_stage(update), jaxpp.get_kind(update))
        for piece in concat.operands:
            rows = leading_rows(piece)
            partition.append((start, rows))
            start += rows
            producer = ir_utils.defining_op(piece)
            inside = producer is not None and producer.block == body and jaxpp.has_stage(producer)
            tags.append((jaxpp.get_stage(producer), jaxpp.get_kind(producer)) if inside else own)
        found[index] = _Accumulator(
            index, update, concat, tuple(chain), tuple(partition), tuple(tags)
        )
    return found


def _shape(value: ir.Value) -> list[int]:
    return list(ir.RankedTensorType(value.type).shape)


def _unary_chain(value: ir.Value, body: ir.Block) -> list[ir.Operation]:
    """The unary elementwise ops of ``body`` (a cast of the gradient) computing ``value``,
    each read only by the next, ``value``'s producer first."""
    chain = []
    while True:
        producer = ir_utils.defining_op(value)
        if (
            producer is None
            or producer.block != body
            or producer.name not in ELEMENTWISE
            or len(producer.operands) != 1
            or len(producer.results) != 1
            or len(list(value.uses)) != 1
            or _shape(producer.operands[0]) != _shape(value)
        ):
            return chain
        chain.append(producer)
        value = producer.operands[0]


def _read_chunked_arguments_whole(splitter: Splitter) -> None:
    """An argument with chunks read whole elsewhere (before the loop, inside it) reads
    the concatenation of its chunks, which cover all its rows (chunks added if not)."""
    chunks = splitter.chunks
    for argument in chunks.arguments():
        readers = [
            ir_utils.use_owner(use)
            for use in argument.uses
            if not jaxpp.is_chunk(ir_utils.use_owner(use))
        ]
        if not readers:
            continue
        pieces = chunks.cover(argument, readers[0].location)
        returns = [reader for reader in readers if reader.name == "func.return"]
        for ret in dict.fromkeys(returns):
            with ir.InsertionPoint(ret), ret.location:
                assembled = jaxpp.create_assemble(list(pieces.values))
            _replace_reads(ret, argument, assembled.results[0])
        readers = [reader for reader in readers if reader.name != "func.return"]
        if not readers:
            continue
        anchor = chunks.last
        with ir.InsertionPoint(anchor), anchor.location:
            whole = stablehlo.ConcatenateOp(list(pieces.values), 0)
        whole.operation.move_after(anchor)
        for reader in dict.fromkeys(readers):
            _replace_reads(reader, argument, whole.result)
            diagnostics.warning(
                reader,
                f"'{reader.name}' reads the stacked argument {argument.type} whole, while "
                "stages hold its rows as chunks: it reads their concatenation, which moves "
                "them to one rank",
            )
        splitter.changed = True


def _replace_reads(op: ir.Operation, old: ir.Value, new: ir.Value) -> None:
    operands = op.operands
    for position in range(len(operands)):
        if operands[position] == old:
            operands[position] = new
