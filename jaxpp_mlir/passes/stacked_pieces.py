"""Stacked values held as pieces along axis 0, and the per-op rules that keep them so.

A helper of jaxpp-split-stacked-values, not a pass. A stacked value ``[L, ...]`` whose
rows are split among stages is held as pieces: rows ``[a_i, a_i + n_i)`` as a value of
``n_i`` rows, held by stage ``s_i`` (``Pieces``). An argument of ``@main`` is held so
through ``jaxpp.chunk`` ops (``Chunks``). ``Splitter`` carries pieces through the ops
after the microbatch loop, op by op, in block order (``Splitter.visit``):

- elementwise ops (``ELEMENTWISE``), ``sdy.sharding_constraint``, ``broadcast_in_dim``,
  ``reshape`` and ``transpose`` that keep the rows along axis 0: one op per piece;
- ``reduce`` with one input whose body is one ``add``/``multiply``/``maximum``/
  ``minimum``/``and``/``or``: over dimensions without 0, one reduce per piece; over
  dimensions with 0 (a global norm's sum of squares), one partial reduce per piece and
  the partials combined by the body's op, in row order (only the partials, reduced
  values, cross ranks);
- ``dot_general`` contracting axis 0 of both operands (a vector with itself): partial
  products per piece, added; batching axis 0 of both, or reading the rows of its left
  operand as its first free dimension: one per piece;
- ``func.return`` of a stacked value: ``jaxpp.assemble`` of its pieces.

An operand of such an op that is not held as pieces becomes pieces too: an argument of
``@main`` its chunks; a splat constant or a broadcast that does not vary along axis 0
one per piece; another whole value its rows, sliced (located warning: it moves them).
Any other op that reads a stacked value reads the concatenation of its pieces instead
(correct; it moves them to one rank), with a located ``PartitionWarning``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from jax.interpreters.mlir import ir

from jaxpp_mlir import diagnostics
from jaxpp_mlir._jax_compat import stablehlo
from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.passes import shardings
from jaxpp_mlir.runtime import records

#: The rows of each piece along axis 0, in row order: (first row, number of rows).
Partition = tuple[tuple[int, int], ...]

CONCATENATE = "stablehlo.concatenate"
_BROADCAST = "stablehlo.broadcast_in_dim"
_RESHAPE = "stablehlo.reshape"
_TRANSPOSE = "stablehlo.transpose"
_REDUCE = "stablehlo.reduce"
_DOT_GENERAL = "stablehlo.dot_general"
_SLICE = "stablehlo.slice"
_ADD = "stablehlo.add"

#: Ops computed element by element: every operand has the result's shape, but for the
#: scalar predicate of ``select`` and scalar bounds of ``clamp``.
ELEMENTWISE = frozenset(
    [
        *(
            "stablehlo." + name
            for name in (
                "abs add and atan2 bitcast_convert cbrt ceil clamp compare complex convert "
                "cosine count_leading_zeros divide exponential exponential_minus_one floor "
                "imag is_finite log log_plus_one logistic maximum minimum multiply negate not "
                "or popcnt power real reduce_precision remainder round_nearest_afz "
                "round_nearest_even rsqrt select shift_left shift_right_arithmetic "
                "shift_right_logical sign sine sqrt subtract tan tanh xor"
            ).split()
        ),
        *(
            "chlo." + name
            for name in (
                "acos acosh asin asinh atan atanh bessel_i1e conj cosh digamma erf erf_inv erfc "
                "is_inf is_neg_inf is_pos_inf lgamma next_after polygamma sinh square tan zeta"
            ).split()
        ),
        "sdy.sharding_constraint",
    ]
)

# Reductions whose partial results combine with the reduction's own op, and the init
# value that lets each piece start from it (None: any init, the op being idempotent).
_COMBINERS: dict[str, float | None] = {
    "stablehlo.add": 0,
    "stablehlo.multiply": 1,
    "stablehlo.maximum": None,
    "stablehlo.minimum": None,
    "stablehlo.and": None,
    "stablehlo.or": None,
}

# Ops erased when the rewrite left them unread: none of them has an effect.
_PURE = ELEMENTWISE | {
    _BROADCAST,
    _RESHAPE,
    _TRANSPOSE,
    _REDUCE,
    _DOT_GENERAL,
    *ir_utils.CONSTANT_OPS,
    _SLICE,
    CONCATENATE,
    "stablehlo.iota",
}


@records.frozen
class Pieces:
    """A stacked value as pieces: ``values[i]`` holds rows ``partition[i]`` and is held by
    stage ``stages[i]``."""

    partition: Partition
    values: tuple[ir.Value, ...]
    stages: tuple[int, ...]

    def holding(self, values: Sequence[ir.Value]) -> Pieces:
        """Other values with the same rows and stages."""
        return Pieces(self.partition, tuple(values), self.stages)

    def with_rows(self, partition: Partition, values: Sequence[ir.Value]) -> Pieces:
        return Pieces(partition, tuple(values), self.stages)


def piece_type(value_type: ir.Type, rows: int) -> ir.RankedTensorType:
    """``value_type`` with ``rows`` rows along axis 0."""
    tensor = ir.RankedTensorType(value_type)
    return ir.RankedTensorType.get([rows, *tensor.shape[1:]], tensor.element_type, tensor.encoding)


def leading_rows(value: ir.Value) -> int | None:
    """The size of axis 0 of a statically shaped tensor of rank >= 1 (else None)."""
    try:
        tensor = ir.RankedTensorType(value.type)
    except ValueError:
        return None
    if tensor.rank == 0 or not tensor.has_static_shape:
        return None
    return tensor.shape[0]


def main_argument(value: ir.Value, main: ir.Operation) -> ir.BlockArgument | None:
    """``value`` as an argument of ``@main`` (None if it is something else)."""
    if isinstance(value, ir.BlockArgument) and value.owner == ir_utils.body(main):
        return ir.BlockArgument(value)
    return None


def copy_attributes(op: ir.Operation) -> dict[str, ir.Attribute]:
    attributes = op.attributes
    return {attributes[i].name: attributes[i].attr for i in range(len(attributes))}


class Chunks:
    """The ``jaxpp.chunk`` ops of ``@main``: one per (argument, rows), at the top of its
    body, each tagged with the stage holding it (``jaxpp.stage``)."""

    def __init__(self, main: ir.Operation):
        self.main = main
        self.block = ir_utils.body(main)
        self.by_argument: dict[int, dict[tuple[int, int], ir.Operation]] = {}
        self.last: ir.Operation | None = None

    def fits(self, argument: ir.BlockArgument, rows: tuple[int, int]) -> bool:
        """Whether ``rows`` are a chunk of ``argument`` already or overlap none."""
        held = self.by_argument.get(argument.arg_number, {})
        return rows in held or not any(_overlap(rows, other) for other in held)

    def get(
        self, argument: ir.BlockArgument, rows: tuple[int, int], stage: int, loc: ir.Location
    ) -> ir.Value:
        """The chunk of ``rows`` of ``argument`` (made if new; ``fits`` must hold); a chunk
        wanted by several stages is held by the lowest."""
        held = self.by_argument.setdefault(argument.arg_number, {})
        found = held.get(rows)
        if found is not None:
            if stage < jaxpp.get_stage(found):
                jaxpp.set_int_attr(found, jaxpp.STAGE_ATTR, stage)
            return found.results[0]
        if self.last is None:
            point = ir.InsertionPoint.at_block_begin(self.block)
        else:
            point = ir.InsertionPoint(self.last)
        with point, loc:
            chunk = jaxpp.create_chunk(argument, rows[0], rows[1], loc=loc)
        if self.last is not None:
            chunk.move_after(self.last)
        jaxpp.set_int_attr(chunk, jaxpp.STAGE_ATTR, stage)
        sharding = shardings.value_sharding(argument)
        if sharding is not None:
            shardings.set_result_shardings(chunk, [sharding])
        held[rows] = chunk
        self.last = chunk
        return chunk.results[0]

    def arguments(self) -> list[ir.BlockArgument]:
        return [self.block.arguments[number] for number in sorted(self.by_argument)]

    def covering(self, argument: ir.BlockArgument) -> Pieces | None:
        """``argument`` as the pieces its chunks hold, if they hold every row."""
        held = self.by_argument.get(argument.arg_number)
        if not held:
            return None
        partition = tuple(sorted(held))
        next_row = 0
        for start, rows in partition:
            if start != next_row:
                return None
            next_row = start + rows
        if next_row != leading_rows(argument):
            return None
        chunks = [held[rows] for rows in partition]
        return Pieces(
            partition,
            tuple(c.results[0] for c in chunks),
            tuple(jaxpp.get_stage(c) for c in chunks),
        )

    def cover(self, argument: ir.BlockArgument, loc: ir.Location) -> Pieces:
        """``argument``'s chunks, with chunks added for the rows none holds yet (each held
        by the stage of the chunk before it, or after it for the first rows)."""
        held = self.by_argument[argument.arg_number]
        gaps, next_row = [], 0
        for start, rows in sorted(held):
            if start > next_row:
                gaps.append(((next_row, start - next_row), jaxpp.get_stage(held[(start, rows)])))
            next_row = start + rows
        total = leading_rows(argument)
        if next_row < total:
            gaps.append(((next_row, total - next_row), jaxpp.get_stage(held[max(held)])))
        for rows, stage in gaps:
            self.get(argument, rows, stage, loc)
        covered = self.covering(argument)
        assert covered is not None
        return covered


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[0] + b[1] and b[0] < a[0] + a[1]


@dataclasses.dataclass
class Splitter:
    """One run's pieces: the stacked values held as pieces, the ops they replace."""

    main: ir.Operation
    chunks: Chunks
    split: dict[ir.Value, Pieces] = dataclasses.field(default_factory=dict)
    # Ops whose results are held as pieces now: erased once nothing reads them.
    replaced: list[ir.Operation] = dataclasses.field(default_factory=list)
    # The concatenation of a stacked value's pieces, made for the readers no rule covers.
    wholes: dict[ir.Value, ir.Value] = dataclasses.field(default_factory=dict)
    # Values derived per piece (``resolve``), by value and rows.
    derived: dict[tuple[ir.Value, Partition], list[ir.Value]] = dataclasses.field(
        default_factory=dict
    )
    derivable_memo: dict[tuple[ir.Value, Partition], bool] = dataclasses.field(default_factory=dict)
    changed: bool = False

    # ---------------------------------------------------------------- lookups

    def lookup(self, value: ir.Value) -> Pieces | None:
        """``value`` as pieces: a value split already, or an argument all of whose rows
        are chunks."""
        found = self.split.get(value)
        if found is None:
            argument = main_argument(value, self.main)
            if argument is not None:
                found = self.chunks.covering(argument)
        return found

    def resolvable(self, value: ir.Value, like: Pieces) -> bool:
        """Whether ``resolve(value, like, ...)`` succeeds (it makes nothing)."""
        known = self._held(value, like)
        return True if known is None else known  # else derived per piece, or rows sliced

    def _held(self, value: ir.Value, like: Pieces) -> bool | None:
        """Whether ``value`` is (or gets) pieces of ``like``'s rows as it is: pieces
        already, or an argument's chunks; None for any other value of those rows."""
        pieces = self.split.get(value)
        if pieces is not None:
            return pieces.partition == like.partition
        if leading_rows(value) != _total(like.partition):
            return False
        argument = main_argument(value, self.main)
        if argument is not None:
            return all(self.chunks.fits(argument, rows) for rows in like.partition)
        return None

    def derivable(self, value: ir.Value, like: Pieces, depth: int = 0) -> bool:
        """Whether ``value`` is computed per piece with ``like``'s rows from values that
        are (pieces, chunks of arguments, splat constants, broadcasts constant along
        axis 0), by ops of ``@main`` that keep rows: no rows need slicing."""
        key = (value, like.partition)
        found = self.derivable_memo.get(key)
        if found is None:
            found = self.derivable_memo[key] = self._derivable(value, like, depth)
        return found

    def _derivable(self, value: ir.Value, like: Pieces, depth: int) -> bool:
        known = self._held(value, like)
        if known is not None:
            return known
        producer = ir_utils.defining_op(value)
        if producer is None or producer.block != self.chunks.block or depth > _MAX_DEPTH:
            return False
        if producer.name in ir_utils.CONSTANT_OPS:
            return _splat_attribute(producer) is not None
        if producer.name == _BROADCAST:
            dims = _i64_list(producer, "broadcast_dimensions")
            if 0 not in dims:
                return True
            operand = producer.operands[0]
            return dims[0] == 0 and self.derivable(operand, like, depth + 1)
        if producer.name in ELEMENTWISE and not len(producer.regions):
            shape = _shape(value)
            return len(producer.results) == 1 and all(
                _shape(v) == [] or (_shape(v) == shape and self.derivable(v, like, depth + 1))
                for v in producer.operands
            )
        return False

    def resolve(self, value: ir.Value, like: Pieces, reader: ir.Operation) -> list[ir.Value]:
        """``value`` (of ``like``'s rows) as pieces with ``like``'s rows, made before
        ``reader`` where new (``resolvable`` must hold)."""
        pieces = self.split.get(value)
        if pieces is not None:
            return list(pieces.values)
        argument = main_argument(value, self.main)
        if argument is not None:
            return [
                self.chunks.get(argument, rows, stage, reader.location)
                for rows, stage in zip(like.partition, like.stages, strict=True)
            ]
        key = (value, like.partition)
        if key not in self.derived:
            if self.derivable(value, like):
                with ir.InsertionPoint(reader), reader.location:
                    self.derived[key] = self._derive(value, like, reader)
            else:
                producer = ir_utils.defining_op(value)
                where = producer.location if producer is not None else reader.location
                diagnostics.warning(
                    reader,
                    f"'{reader.name}' reads stacked pieces with a whole {value.type} "
                    f"('{producer.name if producer else 'block argument'}' at "
                    f"{diagnostics.format_location(where)}): its rows are sliced to each "
                    "piece's stage, which moves them",
                )
                with ir.InsertionPoint(reader), reader.location:
                    self.derived[key] = [_slice_rows(value, rows) for rows in like.partition]
        return self.derived[key]

    def _derive(self, value: ir.Value, like: Pieces, reader: ir.Operation) -> list[ir.Value]:
        """The pieces of a ``derivable`` value that is no argument or pieces itself."""
        producer = ir_utils.defining_op(value)
        self.replaced.append(producer)  # erased if nothing reads it whole any more
        counts = [rows for _, rows in like.partition]
        if producer.name in ir_utils.CONSTANT_OPS:
            splat = _splat_attribute(producer)
            return [
                stablehlo.ConstantOp(
                    ir.DenseElementsAttr.get_splat(piece_type(value.type, n), splat)
                ).result
                for n in counts
            ]
        operands = list(producer.operands)
        if producer.name == _BROADCAST:
            stacked = [0 in _i64_list(producer, "broadcast_dimensions")]
        else:
            stacked = [_shape(v) != [] for v in operands]
        resolved = [
            self.resolve(v, like, reader) if is_stacked else None
            for v, is_stacked in zip(operands, stacked, strict=True)
        ]
        return [
            _recreate(
                producer,
                [
                    v if pieces is None else pieces[i]
                    for v, pieces in zip(operands, resolved, strict=True)
                ],
                [piece_type(value.type, n)],
            ).results[0]
            for i, n in enumerate(counts)
        ]

    # ------------------------------------------------------------- the visit

    def visit(self, op: ir.Operation) -> None:
        """Carries the pieces ``op`` reads through it (an op after the loop, in order)."""
        if op.name == "func.return":
            self._assemble_returned(op)
            return
        read = [v for v in dict.fromkeys(ir_utils.operands_read(op)) if self.lookup(v) is not None]
        if not read:
            return
        rule = _RULES.get(op.name)
        if op.name in ELEMENTWISE:
            rule = Splitter._elementwise
        if rule is not None and rule(self, op):
            self.replaced.append(op)
            self.changed = True
            return
        self._read_whole(op, read)

    def _assemble_returned(self, ret: ir.Operation) -> None:
        assembled: dict[ir.Value, ir.Value] = {}
        for index, value in enumerate(list(ret.operands)):
            pieces = self.lookup(value)
            if pieces is None:
                continue
            if value not in assembled:
                with ir.InsertionPoint(ret), ret.location:
                    assembled[value] = jaxpp.create_assemble(list(pieces.values)).results[0]
            ret.operands[index] = assembled[value]
            self.changed = True

    def _read_whole(self, op: ir.Operation, read: list[ir.Value]) -> None:
        """``op`` reads the concatenation of the pieces of each stacked value in ``read``."""
        for value in read:
            whole = self.whole(value, op)
            for user in [op, *ir_utils.walk(op)] if len(op.regions) else [op]:
                operands = user.operands
                for position in range(len(operands)):
                    if operands[position] == value:
                        operands[position] = whole
        shapes = ", ".join(str(v.type) for v in read)
        diagnostics.warning(
            op,
            f"'{op.name}' reads the stacked value(s) {shapes} whole: no rule computes it "
            "per piece, so the pieces, held by the stages that own their rows, are "
            "concatenated here, which moves them to one rank",
        )
        self.changed = True

    def whole(self, value: ir.Value, before: ir.Operation) -> ir.Value:
        """The concatenation of ``value``'s pieces (made once, before ``before``)."""
        found = self.wholes.get(value)
        if found is None:
            pieces = self.lookup(value)
            with ir.InsertionPoint(before), before.location:
                found = stablehlo.ConcatenateOp(list(pieces.values), 0).result
            self.wholes[value] = found
        return found

    # ---------------------------------------------------------------- rules

    def _like(self, op: ir.Operation, values: Sequence[ir.Value]) -> Pieces | None:
        """The pieces of the stacked operands among ``values``, if they share their rows."""
        found = [self.lookup(v) for v in values]
        found = [p for p in found if p is not None]
        if not found or any(p.partition != found[0].partition for p in found):
            return None
        return found[0]

    def _per_piece(
        self,
        op: ir.Operation,
        like: Pieces,
        operands: Sequence[ir.Value],
        stacked: Sequence[bool],
        result_rows: Partition | None = None,
    ) -> list[ir.Operation]:
        """One copy of ``op`` per piece: operand ``k`` is its piece where ``stacked[k]``
        (else the operand itself), results of ``result_rows``' (default ``like``'s) rows."""
        resolved = [
            self.resolve(v, like, op) if is_stacked else None
            for v, is_stacked in zip(operands, stacked, strict=True)
        ]
        result_rows = result_rows or like.partition
        copies = []
        for index, (_, rows) in enumerate(result_rows):
            piece_operands = [
                v if pieces is None else pieces[index]
                for v, pieces in zip(operands, resolved, strict=True)
            ]
            types = [piece_type(r.type, rows) for r in op.results]
            copies.append(_recreate(op, piece_operands, types))
        return copies

    def _register(self, op: ir.Operation, like: Pieces, copies, partition=None) -> None:
        for index, result in enumerate(op.results):
            values = [copy.results[index] for copy in copies]
            self.split[result] = like.with_rows(partition or like.partition, values)

    def _elementwise(self, op: ir.Operation) -> bool:
        results = list(op.results)
        if len(op.regions) or not results:
            return False
        shape = _shape(results[0])
        if shape is None or any(_shape(r) != shape for r in results):
            return False
        like = self._like(op, op.operands)
        if like is None or _total(like.partition) != shape[0]:
            return False
        stacked = []
        for value in op.operands:
            operand_shape = _shape(value)
            if operand_shape == []:
                stacked.append(False)
            elif operand_shape == shape and self.resolvable(value, like):
                stacked.append(True)
            else:
                return False
        with ir.InsertionPoint(op):
            copies = self._per_piece(op, like, list(op.operands), stacked)
        self._register(op, like, copies)
        return True

    def _broadcast(self, op: ir.Operation) -> bool:
        operand = op.operands[0]
        like = self.lookup(operand)
        dims = _i64_list(op, "broadcast_dimensions")
        if not dims or dims[0] != 0 or _shape(op.results[0])[0] != leading_rows(operand):
            return False
        with ir.InsertionPoint(op):
            copies = self._per_piece(op, like, [operand], [True])
        self._register(op, like, copies)
        return True

    def _transpose(self, op: ir.Operation) -> bool:
        if _i64_list(op, "permutation")[0] != 0:
            return False
        like = self.lookup(op.operands[0])
        with ir.InsertionPoint(op):
            copies = self._per_piece(op, like, [op.operands[0]], [True])
        self._register(op, like, copies)
        return True

    def _reshape(self, op: ir.Operation) -> bool:
        operand, result = op.operands[0], op.results[0]
        like = self.lookup(operand)
        shape = _shape(result)
        if not shape:
            return False
        row_elements = math.prod(_shape(operand)[1:])
        result_row_elements = math.prod(shape[1:])
        partition = []
        for start, rows in like.partition:
            if (start * row_elements) % result_row_elements or (rows * row_elements) % (
                result_row_elements
            ):
                return False  # a piece would not be whole rows of the result
            partition.append(
                (
                    start * row_elements // result_row_elements,
                    rows * row_elements // result_row_elements,
                )
            )
        partition = tuple(partition)
        with ir.InsertionPoint(op):
            copies = self._per_piece(op, like, [operand], [True], result_rows=partition)
        self._register(op, like, copies, partition)
        return True

    def _reduce(self, op: ir.Operation) -> bool:
        if len(op.operands) != 2 or len(op.results) != 1:
            return False  # a variadic reduce (argmax)
        data, init = op.operands
        like = self.lookup(data)
        if like is None or self.lookup(init) is not None:
            return False
        combiner = _combiner(op)
        if combiner is None:
            return False
        dims = _i64_list(op, "dimensions")
        if 0 not in dims:  # each row reduced on its own: one reduce per piece
            with ir.InsertionPoint(op):
                copies = self._per_piece(op, like, [data, init], [True, False])
            self._register(op, like, copies)
            return True
        identity = _COMBINERS[combiner]
        if identity is not None and _splat_number(init) != identity:
            return False  # every piece starts from init: only right if init changes nothing
        with ir.InsertionPoint(op), op.location:
            partials = [
                _recreate(op, [piece, init], [op.results[0].type]).results[0]
                for piece in like.values
            ]
            self._combine(op, combiner, partials)
        return True

    def _dot_general(self, op: ir.Operation) -> bool:
        lhs, rhs = op.operands
        numbers = stablehlo.DotDimensionNumbers(op.attributes["dot_dimension_numbers"])
        lhs_contracting = list(numbers.lhs_contracting_dimensions)
        rhs_contracting = list(numbers.rhs_contracting_dimensions)
        lhs_batching = list(numbers.lhs_batching_dimensions)
        rhs_batching = list(numbers.rhs_batching_dimensions)
        like = self._like(op, [lhs, rhs])
        if like is None:
            return False
        contracted = 0 in lhs_contracting and rhs_contracting[lhs_contracting.index(0)] == 0
        batched = lhs_batching[:1] == [0] and rhs_batching[:1] == [0]
        if contracted or batched:
            if not (self.resolvable(lhs, like) and self.resolvable(rhs, like)):
                return False
            with ir.InsertionPoint(op), op.location:
                if batched:
                    copies = self._per_piece(op, like, [lhs, rhs], [True, True])
                    self._register(op, like, copies)
                    return True
                operands = [self.resolve(v, like, op) for v in (lhs, rhs)]
                partials = [
                    _recreate(op, [a, b], [op.results[0].type]).results[0]
                    for a, b in zip(*operands, strict=True)
                ]
                self._combine(op, _ADD, partials)
            return True
        lhs_free = not lhs_batching and 0 not in lhs_contracting
        if lhs_free and self.lookup(lhs) is not None and self.lookup(rhs) is None:
            with ir.InsertionPoint(op):
                copies = self._per_piece(op, like, [lhs, rhs], [True, False])
            self._register(op, like, copies)
            return True
        return False

    def _combine(self, op: ir.Operation, combiner: str, partials: list[ir.Value]) -> None:
        """Replaces ``op``'s result by ``partials`` combined by ``combiner``, in row order:
        the cross-rank reduction (the partials are reduced values)."""
        total = partials[0]
        for partial in partials[1:]:
            total = ir.Operation.create(
                combiner, results=[total.type], operands=[total, partial], loc=op.location
            ).results[0]
        op.results[0].replace_all_uses_with(total)

    # ---------------------------------------------------------------- the end

    def erase_replaced(self, blocks: Sequence[ir.Block]) -> None:
        """Erases the replaced ops left unread and, in turn, the pure ops only they read.

        ``blocks`` (the loop body, then ``@main``'s) are swept once each, last op first,
        so a reader goes before what it reads; ops to look at carry a transient mark
        (an attribute) rather than Python references, which erasing would leave dangling.
        """
        for op in self.replaced:
            op.attributes[_ERASE_IF_UNREAD] = ir.UnitAttr.get()
        self.replaced.clear()
        for block in blocks:
            for op in reversed(ir_utils.block_ops(block)):
                if _ERASE_IF_UNREAD not in op.attributes:
                    continue
                del op.attributes[_ERASE_IF_UNREAD]
                if op.name not in _PURE or not _is_unused(op):
                    continue
                for value in op.operands:
                    producer = ir_utils.defining_op(value)
                    if producer is not None and producer.name in _PURE:
                        producer.attributes[_ERASE_IF_UNREAD] = ir.UnitAttr.get()
                op.erase()
        for block in blocks:  # marks left on what outlives its readers
            for op in ir_utils.block_ops(block):
                if _ERASE_IF_UNREAD in op.attributes:
                    del op.attributes[_ERASE_IF_UNREAD]


_MAX_DEPTH = 64  # how far derivable() looks back through ops for a value's sources
_ERASE_IF_UNREAD = "jaxpp.erase_if_unread"  # transient: never outlives erase_replaced


_RULES = {
    _BROADCAST: Splitter._broadcast,
    _RESHAPE: Splitter._reshape,
    _TRANSPOSE: Splitter._transpose,
    _REDUCE: Splitter._reduce,
    _DOT_GENERAL: Splitter._dot_general,
}


def _is_unused(op: ir.Operation) -> bool:
    return all(next(iter(result.uses), None) is None for result in op.results)


def _total(partition: Partition) -> int:
    return sum(rows for _, rows in partition)


def _shape(value: ir.Value) -> list[int] | None:
    try:
        tensor = ir.RankedTensorType(value.type)
    except ValueError:
        return None
    return list(tensor.shape) if tensor.has_static_shape else None


def _i64_list(op: ir.Operation, name: str) -> list[int]:
    return list(ir.DenseI64ArrayAttr(op.attributes[name]))


def _combiner(reduce: ir.Operation) -> str | None:
    """The op of a reduce's body when it is one of ``_COMBINERS`` on the block's two
    arguments, returned."""
    block = reduce.regions[0].blocks[0]
    ops = ir_utils.block_ops(block)
    if len(ops) != 2 or ops[0].name not in _COMBINERS:
        return None
    body_op, ret = ops
    if set(body_op.operands) != set(block.arguments) or list(ret.operands) != [body_op.results[0]]:
        return None
    return body_op.name


def _splat_attribute(constant: ir.Operation) -> ir.Attribute | None:
    value = ir.DenseElementsAttr(constant.attributes["value"])
    return value.get_splat_value() if value.is_splat else None


def _splat_number(value: ir.Value) -> float | None:
    producer = ir_utils.defining_op(value)
    if producer is None or producer.name not in ir_utils.CONSTANT_OPS:
        return None
    splat = _splat_attribute(producer)
    if splat is None:
        return None
    if isinstance(splat, ir.FloatAttr) or ir.FloatAttr.isinstance(splat):
        return ir.FloatAttr(splat).value
    return ir.IntegerAttr(splat).value


def _slice_rows(value: ir.Value, rows: tuple[int, int]) -> ir.Value:
    shape = _shape(value)
    start, count = rows
    return stablehlo.SliceOp(
        value,
        ir.DenseI64ArrayAttr.get([start, *[0] * (len(shape) - 1)]),
        ir.DenseI64ArrayAttr.get([start + count, *shape[1:]]),
        ir.DenseI64ArrayAttr.get([1] * len(shape)),
    ).result


def _recreate(
    op: ir.Operation, operands: Sequence[ir.Value], result_types: Sequence[ir.Type]
) -> ir.Operation:
    """A copy of ``op`` (attributes, regions) with other operands and result types, at the
    current insertion point."""
    copy = ir.Operation.create(
        op.name,
        results=list(result_types),
        operands=list(operands),
        attributes=copy_attributes(op),
        regions=len(op.regions),
        loc=op.location,
    )
    for source, target in zip(op.regions, copy.regions, strict=True):
        for block in source.blocks:
            _clone_block(block, target)
    return copy


def _clone_block(block: ir.Block, region: ir.Region) -> None:
    clone = region.blocks.append(*[argument.type for argument in block.arguments])
    mapping = dict(zip(block.arguments, clone.arguments, strict=True))
    for op in ir_utils.block_ops(block):
        copy = op.clone(ip=ir.InsertionPoint(clone))
        copy = copy.operation
        operands = copy.operands
        for position in range(len(operands)):
            if operands[position] in mapping:
                operands[position] = mapping[operands[position]]
        mapping.update(zip(op.results, copy.results, strict=True))
