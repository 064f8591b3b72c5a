"""jaxpp-split-layer-scans: one loop per stage over that stage's layers, for each layer scan."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from jax.interpreters.mlir import ir

from jaxpp_mlir import diagnostics
from jaxpp_mlir._jax_compat import stablehlo
from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.passes.base import (
    UNCHANGED,
    Evidence,
    ModulePass,
    Unchanged,
    find_in_stage_block,
    register_pass,
)
from jaxpp_mlir.runtime import records

if TYPE_CHECKING:  # loaded when a step has layer scans to split
    from jaxpp_mlir.passes import layer_loops

# Ops of a loop body that compute nothing but a row index: erased once no longer read.
_INDEX_OPS = frozenset(
    {
        *ir_utils.CONSTANT_OPS,
        "stablehlo.add",
        "stablehlo.subtract",
        "stablehlo.multiply",
        "stablehlo.negate",
        "stablehlo.compare",
        "stablehlo.select",
        "stablehlo.clamp",
        "stablehlo.convert",
        "stablehlo.reshape",
        "sdy.sharding_constraint",
    }
)
# Top-level ops that computed a split loop's start values: erased once no longer read.
_START_VALUE_OPS = frozenset(
    {*ir_utils.CONSTANT_OPS, "stablehlo.broadcast_in_dim", "stablehlo.iota"}
)


@register_pass
@records.frozen
class SplitLayerScans(ModulePass):
    """Split each layer scan that spans several stages into one loop per stage.

    A loop of layers (``jaxpp.segments``, from jaxpp-segment-layer-scans) whose
    ``jaxpp.stage_rows`` (from jaxpp-choose-stages) give it to several stages becomes one
    ``stablehlo.while`` per stage over that stage's iterations, tagged with the stage and
    the loop's kind: the forward loop's stages in ascending order, the backward loop's
    (the gradient of the scan, which runs the layers backwards) in descending order. Each
    is a copy of the original loop (remat and everything else in the body as JAX lowered
    it; never unrolled) whose counter runs over the stage's ``n`` iterations; the body
    sees the original counter value wherever it read it (``counter + first iteration``),
    except where it indexes a stack:

    - a stacked operand ``[L, ...]`` read a row at a time is read as a static
      ``stablehlo.slice`` of the rows ``[a, b)`` the stage's iterations read, placed just
      before the stage's loop and tagged with its stage and kind, and indexed locally
      (``j``, or ``n - 1 - j`` for the backward loop);
    - a stacked result (the ``ys``, the residuals the gradient reads, the stacked
      gradient) is produced per stage as a piece of the ``n`` rows its iterations write
      (starting from the same splat constant or broadcast scalar as the original's start
      value, else from the rows of it); a later loop of the same stage that reads exactly those rows
      reads the piece; any other reader of the whole value (the gradient accumulator's
      add, a ``ys`` read after the loop) reads one ``stablehlo.concatenate`` (dimension 0)
      of the pieces in row order, tagged with that reader's stage and kind;
    - every other iteration argument (the activation, a shared weight's gradient) flows
      from one stage's loop to the next.

    Stage markers inside the loops are erased (they are identities). A loop of layers
    within one stage keeps its loop, untagged as such.

    Precondition: jaxpp-choose-stages ran; every loop of layers carries
    ``jaxpp.segments``, ``jaxpp.stage_rows`` and ``jaxpp.kind``.
    Postcondition: no op of the stage block carries ``jaxpp.segments`` or
    ``jaxpp.stage_rows``, and no loop of the stage block holds a stage marker; every op
    of the stage block but its terminator carries ``jaxpp.stage`` and ``jaxpp.kind``.
    """

    name = "jaxpp-split-layer-scans"
    requires = ("jaxpp-choose-stages",)
    must_precede = ("jaxpp-outline-stages",)

    @classmethod
    def unfinished(cls, module: ir.Operation) -> Evidence | None:
        return find_in_stage_block(
            module,
            lambda op: (
                "a layer scan is not split into its stages yet (found jaxpp.segments)"
                if jaxpp.segment_range(op) is not None
                else None
            ),
        )

    def run(self, module: ir.Operation) -> Unchanged | None:
        main = ir_utils.get_main(module)
        block = ir_utils.stage_block(main)
        loops = [op for op in ir_utils.block_ops(block)[:-1] if jaxpp.segment_range(op)]
        if not loops:
            return UNCHANGED
        splitter = _Splitter(block)
        for op in loops:
            splitter.split(op)
        splitter.finish()
        return None


@dataclasses.dataclass
class _Piece:
    """Rows ``[lo, hi)`` of a stacked result, computed by one stage's loop."""

    lo: int
    hi: int
    value: ir.Value
    stage: int
    kind: str


@dataclasses.dataclass
class _Split:
    """An original loop and what replaces its results."""

    op: ir.Operation
    loop: layer_loops.LayerLoop
    carried: dict[int, ir.Value]  # the last stage loop's result per carried argument


class _Splitter:
    def __init__(self, block: ir.Block):
        self.block = block
        self.pieces: dict[ir.Value, list[_Piece]] = {}
        self.splits: list[_Split] = []
        self.single: list[ir.Operation] = []

    # -- one loop

    def split(self, op: ir.Operation) -> None:
        from jaxpp_mlir.passes import layer_loops  # loaded for steps with layer scans only

        try:
            loop = layer_loops.analyze(op)
        except layer_loops.NotALayerLoop as reason:
            raise diagnostics.error(
                op, f"this loop is tagged as a layer scan but is not a loop of layers: {reason}"
            ) from None
        first, count = jaxpp.segment_range(op)
        rows = jaxpp.stage_rows(op)
        if not rows:
            raise diagnostics.error(
                op, "this layer scan has no jaxpp.stage_rows: run jaxpp-choose-stages first"
            )
        if count != loop.trip_count or sum(n for _, _, n in rows) != count:
            raise diagnostics.error(
                op,
                f"this layer scan covers {count} segments and its stage rows {rows}, but it "
                f"runs {loop.trip_count} iterations",
            )
        kind = jaxpp.get_kind(op)
        if len(rows) == 1:
            _erase_markers(op)
            jaxpp.clear_segment_range(op)
            jaxpp.set_stage(op, rows[0][0], kind)
            return
        forward = kind == jaxpp.FORWARD
        carried = {i: op.operands[i] for i in loop.carried()}
        built = []
        for stage, offset, n in rows if forward else reversed(rows):
            j0 = offset if forward else loop.trip_count - offset - n
            new = self._stage_loop(op, loop, stage, kind, j0, n, carried)
            carried = {i: new.results[i] for i in carried}
            built.append((new, stage, j0, n))
        for write in loop.writes:
            pieces = []
            for new, stage, j0, n in built:
                lo, hi = write.access.index.rows(j0, n)
                pieces.append(_Piece(lo, hi, new.results[write.carry], stage, kind))
            self.pieces[op.results[write.carry]] = sorted(pieces, key=lambda p: p.lo)
        self.splits.append(_Split(op, loop, carried))

    def _stage_loop(
        self,
        op: ir.Operation,
        loop: layer_loops.LayerLoop,
        stage: int,
        kind: str,
        j0: int,
        n: int,
        carried: dict[int, ir.Value],
    ) -> ir.Operation:
        tags = (stage, kind)
        operands = list(op.operands)
        counter_type = op.operands[loop.counter].type
        with ir.InsertionPoint(op), op.location:
            operands[loop.counter] = _tagged(_constant(counter_type, 0), tags)
        for i, value in carried.items():
            operands[i] = value
        read_values: list[tuple[layer_loops.StackedRead, int, ir.Value]] = []
        for read in loop.reads:
            lo, hi = read.span(j0, n)
            value = self.rows(read.source, lo, hi, tags, before=op)
            read_values.append((read, lo, value))
            if read.carry is not None:
                operands[read.carry] = value
        write_lows = []
        for write in loop.writes:
            lo, hi = write.access.index.rows(j0, n)
            operands[write.carry] = self._start_value(op.operands[write.carry], lo, hi, tags, op)
            write_lows.append(lo)
        new = op.clone(ip=ir.InsertionPoint(op))
        for i, value in enumerate(operands):
            if new.operands[i] != value:
                new.operands[i] = value
                _set_carry_type(new, i, value.type)
        nested = dict(zip(ir_utils.walk(op), ir_utils.walk(new), strict=True))
        body = new.regions[1].blocks[0]
        counter = body.arguments[loop.counter]
        self._limit(nested[loop.compare], n)
        self._global_counter(counter, nested[loop.increment], loop.start + j0)
        indices = _LocalIndices(body, counter)
        for read, lo, value in read_values:
            for access in read.accesses:
                clone = nested[access.op]
                if read.carry is None:
                    clone.operands[0] = value
                clone.operands[access.index_operand] = indices.get(
                    access, j0, lo, clone.operands[access.index_operand].type
                )
        for write, lo in zip(loop.writes, write_lows, strict=True):
            clone = nested[write.access.op]
            clone.results[0].set_type(clone.operands[0].type)  # the piece's rows
            clone.operands[write.access.index_operand] = indices.get(
                write.access, j0, lo, clone.operands[write.access.index_operand].type
            )
        _erase_markers(new)
        _erase_dead(body)
        _erase_dead(new.regions[0].blocks[0])
        jaxpp.clear_segment_range(new)
        jaxpp.set_stage(new, stage, kind)
        return new

    def _limit(self, compare: ir.Operation, n: int) -> None:
        limit = compare.operands[1]
        with ir.InsertionPoint(compare), compare.location:
            compare.operands[1] = _constant(limit.type, n)

    def _global_counter(self, counter: ir.Value, increment: ir.Operation, offset: int) -> None:
        """Readers of the counter but its increment read the original loop's value."""
        if offset == 0:
            return
        body = counter.owner
        with ir.InsertionPoint.at_block_begin(body), increment.location:
            shift = _constant(counter.type, offset)
            original = stablehlo.AddOp(counter, shift)
        keep = {increment, original.operation}
        for use in list(counter.uses):
            owner = ir_utils.use_owner(use)
            if owner not in keep:
                owner.operands[use.operand_number] = original.result

    def _start_value(
        self, init: ir.Value, lo: int, hi: int, tags: tuple[int, str], before: ir.Operation
    ) -> ir.Value:
        """The start value of a stacked result's piece: the same scalar broadcast, or the
        start value's rows."""
        producer = ir_utils.defining_op(init)
        if producer is not None and producer.name == "stablehlo.constant":
            dense = ir.DenseElementsAttr(producer.attributes["value"])
            if dense.is_splat:
                piece = _rows_type(init.type, hi - lo)
                with ir.InsertionPoint(before), producer.location:
                    op = stablehlo.ConstantOp(
                        ir.DenseElementsAttr.get_splat(piece, dense.get_splat_value())
                    )
                return _tagged(op, tags)
        if producer is not None and producer.name == "stablehlo.broadcast_in_dim":
            scalar = producer.operands[0]
            if not ir.RankedTensorType(scalar.type).shape:
                with ir.InsertionPoint(before), producer.location:
                    op = stablehlo.BroadcastInDimOp(_rows_type(init.type, hi - lo), scalar, [])
                return _tagged(op, tags)
        return self.rows(init, lo, hi, tags, before=before)

    # -- stacked values

    def rows(
        self, value: ir.Value, lo: int, hi: int, tags: tuple[int, str], before: ir.Operation
    ) -> ir.Value:
        """Rows ``[lo, hi)`` of ``value`` for the stage and kind ``tags``, read before
        ``before``: a piece a split loop computed, else a slice (of the pieces' concatenate,
        where the value is a split loop's stacked result)."""
        pieces = self.pieces.get(value)
        if pieces is not None:
            for piece in pieces:
                if (piece.lo, piece.hi) == (lo, hi):
                    return piece.value
            value = self._concatenate(pieces, tags, before)
        shape = ir.RankedTensorType(value.type).shape
        if (lo, hi) == (0, shape[0]):
            return value
        with ir.InsertionPoint(before), before.location:
            start = [lo] + [0] * (len(shape) - 1)
            limit = [hi, *shape[1:]]
            op = stablehlo.SliceOp(value, start, limit, [1] * len(shape))
        return _tagged(op, tags)

    def _concatenate(
        self, pieces: list[_Piece], tags: tuple[int, str], before: ir.Operation
    ) -> ir.Value:
        with ir.InsertionPoint(before), before.location:
            op = stablehlo.ConcatenateOp([piece.value for piece in pieces], 0)
        return _tagged(op, tags)

    # -- the original loops

    def finish(self) -> None:
        """The readers of each original loop's results read the stage loops' instead (the
        last stage's carried values, the pieces' concatenate), then the loop goes."""
        for split in reversed(self.splits):  # a later loop's reads of an earlier one go first
            op, loop = split.op, split.loop
            writes = loop.write_carries()
            starts = list(dict.fromkeys(op.operands))  # a value starting two carries: once
            for i, result in enumerate(op.results):
                if next(iter(result.uses), None) is None:
                    continue
                if i in split.carried:
                    result.replace_all_uses_with(split.carried[i])
                elif i in loop.invariants:
                    result.replace_all_uses_with(op.operands[i])
                elif i in writes:
                    self._whole_readers(result)
                else:  # the counter, read after the loop
                    user = _first_user(result, self.block)
                    with ir.InsertionPoint(user), op.location:
                        final = _constant(result.type, loop.start + loop.trip_count)
                    result.replace_all_uses_with(_tagged(final, _tags_of(user)))
            op.erase()
            for value in starts:
                _erase_if_unused(value)

    def _whole_readers(self, result: ir.Value) -> None:
        """Each (stage, kind) reading a split stacked result whole reads one concatenate of
        its pieces, placed before the first of its readers."""
        pieces = self.pieces[result]
        readers: dict[tuple[int, str], list[ir.OpOperand]] = {}
        firsts: dict[tuple[int, str], ir.Operation] = {}
        order = {op: i for i, op in enumerate(ir_utils.block_ops(self.block))}
        for use in list(result.uses):
            user = ir_utils.top_level_user(ir_utils.use_owner(use), self.block)
            tags = _tags_of(user) if jaxpp.has_stage(user) else (pieces[-1].stage, pieces[-1].kind)
            readers.setdefault(tags, []).append(use)
            if tags not in firsts or order[user] < order[firsts[tags]]:
                firsts[tags] = user
        for tags, uses in readers.items():
            whole = self._concatenate(pieces, tags, firsts[tags])
            for use in uses:
                ir_utils.use_owner(use).operands[use.operand_number] = whole


class _LocalIndices:
    """Row indices into a stage's slice or piece, from the stage loop's counter ``j``:
    ``j + k`` or ``k - j``, built once each at the top of the body."""

    def __init__(self, body: ir.Block, counter: ir.Value):
        self.body = body
        self.counter = counter
        self.built: dict[tuple[int, int, str], ir.Value] = {}

    def get(self, access: layer_loops.Access, j0: int, lo: int, index_type: ir.Type) -> ir.Value:
        row = access.index
        # Row at the original iteration j0 + j, minus the slice's first row.
        k = row.scale * j0 + row.offset - lo
        key = (row.scale, k, str(index_type))
        if key in self.built:
            return self.built[key]
        anchor = ir_utils.block_ops(self.body)[0]
        counter = self.counter
        with ir.InsertionPoint(anchor), anchor.location:
            if counter.type != index_type:
                counter = stablehlo.ConvertOp(index_type, counter).result
            if row.scale == 1 and k == 0:
                value = counter
            elif row.scale == 1:
                value = stablehlo.AddOp(counter, _constant(index_type, k)).result
            else:
                value = stablehlo.SubtractOp(_constant(index_type, k), counter).result
        self.built[key] = value
        return value


def _constant(value_type: ir.Type, number: int) -> ir.Value:
    tensor = ir.RankedTensorType(value_type)
    attr = ir.DenseElementsAttr.get_splat(tensor, ir.IntegerAttr.get(tensor.element_type, number))
    return stablehlo.ConstantOp(attr).result


def _tagged(value: ir.Value | ir.OpView, tags: tuple[int, str]) -> ir.Value:
    op = value.owner.operation if isinstance(value, ir.Value) else value.operation
    jaxpp.set_stage(op, *tags)
    return op.results[0]


def _tags_of(op: ir.Operation) -> tuple[int, str]:
    return jaxpp.get_stage(op), jaxpp.get_kind(op)


def _rows_type(value_type: ir.Type, rows: int) -> ir.RankedTensorType:
    tensor = ir.RankedTensorType(value_type)
    return ir.RankedTensorType.get([rows, *tensor.shape[1:]], tensor.element_type, tensor.encoding)


def _set_carry_type(loop: ir.Operation, index: int, value_type: ir.Type) -> None:
    """Iteration argument ``index`` of ``loop`` (its result and block arguments) takes
    ``value_type``."""
    if loop.results[index].type == value_type:
        return
    loop.results[index].set_type(value_type)
    for region in loop.regions:
        region.blocks[0].arguments[index].set_type(value_type)


def _erase_markers(op: ir.Operation) -> None:
    for nested in ir_utils.walk(op):
        if nested.name in jaxpp.MARKER_OP_NAMES and jaxpp.is_stage_marker(nested):
            for result, operand in zip(nested.results, nested.operands, strict=True):
                result.replace_all_uses_with(operand)
            nested.erase()


def _erase_dead(block: ir.Block) -> None:
    """Erases the index computations of ``block`` left without readers (users come after
    their producers: in reverse order one sweep finds them all)."""
    for op in reversed(ir_utils.block_ops(block)[:-1]):
        if op.name in _INDEX_OPS and all(next(iter(r.uses), None) is None for r in op.results):
            op.erase()


def _erase_if_unused(value: ir.Value) -> None:
    producer = ir_utils.defining_op(value)
    if (
        producer is not None
        and producer.name in _START_VALUE_OPS
        and next(iter(value.uses), None) is None
    ):
        operands = list(dict.fromkeys(producer.operands))  # erased once, read once
        producer.erase()
        for operand in operands:
            _erase_if_unused(operand)


def _first_user(value: ir.Value, block: ir.Block) -> ir.Operation:
    users = {ir_utils.top_level_user(ir_utils.use_owner(u), block) for u in value.uses}
    return next(op for op in ir_utils.block_ops(block) if op in users)
