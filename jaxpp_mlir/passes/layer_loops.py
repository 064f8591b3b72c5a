"""Loops of layers: a ``stablehlo.while`` that applies one layer of a stack per iteration.

A helper the passes of layer scans share (jaxpp-segment-layer-scans recognises them,
jaxpp-split-layer-scans splits them); not a pass.

``jax.lax.scan`` over stacked layer parameters (and flax's ``nn.scan``/``nnx.scan``)
lowers to a ``stablehlo.while`` with an integer counter ``k`` (``start, start + 1, ...``
while ``k < limit``) that reads row ``i(k)`` of each stacked operand ``[L, ...]`` with
``dynamic_slice`` and writes row ``i(k)`` of each stacked result (``ys``, the residuals
the gradient reads, the stacked gradient) with ``dynamic_update_slice``, where ``i`` is
affine in the counter (``k``, or ``L - 1 - k`` for the gradient's loop, possibly through
JAX's ``select(i < 0, i + L, i)`` normalization). ``analyze`` reads that structure:

- the counter and the trip count (static), ``start`` its first value;
- ``reads``: the stacked operands read a row at a time: a loop-invariant iteration
  argument (its init is the stack) or a value defined outside the loop, every use of
  which in the body is such a ``dynamic_slice``;
- ``writes``: the iteration arguments that only receive rows (``dynamic_update_slice``
  of the argument, returned as its next value, the argument read by nothing else);
- every other iteration argument is carried whole (``invariant`` ones unchanged).

Row indices are ``Affine`` in the iteration number ``j = k - start`` (``0 <= j < L``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from jax.interpreters.mlir import ir

from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.runtime import records

DYNAMIC_SLICE = "stablehlo.dynamic_slice"
DYNAMIC_UPDATE_SLICE = "stablehlo.dynamic_update_slice"
_CONSTRAINT_OP = "sdy.sharding_constraint"
_COMPARISONS = {
    "LT": lambda a, b: a < b,
    "LE": lambda a, b: a <= b,
    "GT": lambda a, b: a > b,
    "GE": lambda a, b: a >= b,
    "EQ": lambda a, b: a == b,
    "NE": lambda a, b: a != b,
}


@records.frozen
class Affine:
    """``scale * j + offset`` for the iteration number ``j``."""

    scale: int
    offset: int

    def at(self, iteration: int) -> int:
        return self.scale * iteration + self.offset

    def rows(self, first: int, count: int) -> tuple[int, int]:
        """``[lo, hi)``: the values over iterations ``[first, first + count)``
        (contiguous for a scale of +-1)."""
        ends = (self.at(first), self.at(first + count - 1))
        return min(ends), max(ends) + 1


@dataclasses.dataclass
class Access:
    """A ``dynamic_slice`` (read) or ``dynamic_update_slice`` (write) of one row along
    axis 0 at ``index`` (its row-index operand is ``op.operands[index_operand]``)."""

    op: ir.Operation
    index: Affine
    index_operand: int


@dataclasses.dataclass
class StackedRead:
    """A stack the body reads a row at a time: ``carry`` (an iteration argument whose init
    is ``source``), or ``source`` defined outside the loop and read there directly."""

    source: ir.Value
    carry: int | None
    accesses: list[Access]

    @property
    def rows(self) -> int:
        return ir.RankedTensorType(self.source.type).shape[0]

    def span(self, first: int, count: int) -> tuple[int, int]:
        """The rows iterations ``[first, first + count)`` read."""
        spans = [access.index.rows(first, count) for access in self.accesses]
        return min(lo for lo, _ in spans), max(hi for _, hi in spans)


@dataclasses.dataclass
class StackedWrite:
    """An iteration argument the body only writes rows of (a stacked result)."""

    carry: int
    access: Access


@dataclasses.dataclass
class LayerLoop:
    """What ``analyze`` reads from a ``stablehlo.while`` (see the module doc)."""

    op: ir.Operation
    counter: int  # iteration-argument index of the counter
    start: int
    trip_count: int
    increment: ir.Operation  # the body's counter + 1
    compare: ir.Operation  # the condition's counter < limit
    reads: list[StackedRead]
    writes: list[StackedWrite]
    invariants: list[int]  # iteration arguments returned unchanged (stacked reads included)

    @property
    def body(self) -> ir.Block:
        return self.op.regions[1].blocks[0]

    @property
    def condition(self) -> ir.Block:
        return self.op.regions[0].blocks[0]

    def read_carries(self) -> dict[int, StackedRead]:
        return {read.carry: read for read in self.reads if read.carry is not None}

    def write_carries(self) -> dict[int, StackedWrite]:
        return {write.carry: write for write in self.writes}

    def carried(self) -> list[int]:
        """The iteration arguments passed whole from iteration to iteration (not the
        counter, not invariant, not a stacked result)."""
        skip = {self.counter, *self.invariants, *self.write_carries()}
        return [i for i in range(len(self.op.operands)) if i not in skip]

    def stacks(self) -> Iterator[tuple[ir.Value, int]]:
        """Every stacked value the loop reads or writes, with its row count."""
        for read in self.reads:
            yield read.source, read.rows
        for write in self.writes:
            yield self.op.results[write.carry], write_rows(self.op, write)


def write_rows(loop: ir.Operation, write: StackedWrite) -> int:
    return ir.RankedTensorType(loop.operands[write.carry].type).shape[0]


class NotALayerLoop(Exception):
    """``analyze``'s reason why a while is not a loop of layers (a phrase: "its trip count
    is not a constant")."""


def analyze(op: ir.Operation) -> LayerLoop:
    """The structure of ``op`` as a loop of layers; ``NotALayerLoop`` with the reason if
    it is not one (see the module doc)."""
    if op.name != ir_utils.WHILE_OP:
        raise NotALayerLoop(f"it is a '{op.name}', not a stablehlo.while")
    condition = op.regions[0].blocks[0]
    body = op.regions[1].blocks[0]
    counter, limit, compare = _condition(condition)
    arguments = list(body.arguments)
    yielded = list(ir_utils.block_ops(body)[-1].operands)
    increment = _increment(arguments[counter], yielded[counter])
    start = constant_int(op.operands[counter])
    if start is None:
        raise NotALayerLoop("its counter does not start at a constant")
    trip_count = limit - start
    if trip_count < 2:
        raise NotALayerLoop(f"it runs {max(trip_count, 0)} iteration(s)")
    index = _IndexOf(arguments[counter], start, trip_count)
    pairs = enumerate(zip(arguments, yielded, strict=True))
    invariants = [i for i, (a, y) in pairs if a == y and i != counter]
    reads = [
        read
        for read in (_stacked_read(op, index, arguments[i], i) for i in invariants)
        if read is not None
    ]
    reads.extend(_captured_reads(op, index))
    writes = []
    for i, (argument, value) in enumerate(zip(arguments, yielded, strict=True)):
        if i != counter and i not in invariants:
            write = _stacked_write(index, argument, value, i)
            if write is not None:
                writes.append(write)
    return LayerLoop(op, counter, start, trip_count, increment, compare, reads, writes, invariants)


def constant_int(value: ir.Value) -> int | None:
    """The integer a scalar constant holds (through sharding constraints), else None."""
    producer = ir_utils.defining_op(_unconstrained(value))
    if producer is None or producer.name not in ir_utils.CONSTANT_OPS:
        return None
    try:
        dense = ir.DenseIntElementsAttr(producer.attributes["value"])
    except (ValueError, TypeError):
        return None
    if dense.is_splat:
        return int(dense.get_splat_value().value)
    return int(dense[0]) if len(dense) == 1 else None


def _unconstrained(value: ir.Value) -> ir.Value:
    producer = ir_utils.defining_op(value)
    while producer is not None and producer.name == _CONSTRAINT_OP:
        value = producer.operands[0]
        producer = ir_utils.defining_op(value)
    return value


def _condition(block: ir.Block) -> tuple[int, int, ir.Operation]:
    """(counter argument, limit, the compare) of a condition ``counter < constant``."""
    ops = ir_utils.block_ops(block)
    compare = ir_utils.defining_op(_unconstrained(ops[-1].operands[0]))
    others = [o for o in ops[:-1] if o != compare]
    if (
        compare is None
        or compare.name != "stablehlo.compare"
        or _direction(compare) != "LT"
        or any(o.name not in _CONDITION_OPS for o in others)
    ):
        raise NotALayerLoop("its condition is not 'counter < constant'")
    lhs, rhs = (_unconverted(v) for v in compare.operands)
    limit = constant_int(rhs)
    if limit is None or lhs not in list(block.arguments):
        raise NotALayerLoop("its trip count is not a constant")
    return list(block.arguments).index(lhs), limit, compare


_CONDITION_OPS = (*ir_utils.CONSTANT_OPS, _CONSTRAINT_OP, "stablehlo.convert")


def _unconverted(value: ir.Value) -> ir.Value:
    """``value`` before sharding constraints and converts (JAX converts a weakly typed
    counter to its own type)."""
    value = _unconstrained(value)
    producer = ir_utils.defining_op(value)
    while producer is not None and producer.name == "stablehlo.convert":
        value = _unconstrained(producer.operands[0])
        producer = ir_utils.defining_op(value)
    return value


def _increment(argument: ir.Value, value: ir.Value) -> ir.Operation:
    update = ir_utils.defining_op(_unconstrained(value))
    if update is not None and update.name == "stablehlo.add":
        operands = [_unconstrained(o) for o in update.operands]
        if argument in operands:
            other = operands[1] if operands[0] == argument else operands[0]
            if constant_int(other) == 1:
                return update
    raise NotALayerLoop("its counter does not step by 1")


def _direction(compare: ir.Operation) -> str:
    text = str(compare.attributes["comparison_direction"])
    return text.split()[-1].rstrip(">")  # '#stablehlo<comparison_direction LT>'


class _IndexOf:
    """Evaluates body values as affine functions of the iteration number (None: not one)."""

    def __init__(self, counter: ir.Value, start: int, trip_count: int):
        self.counter = counter
        self.start = start
        self.trip_count = trip_count
        self._known: dict[ir.Value, Affine | None] = {}

    def __call__(self, value: ir.Value) -> Affine | None:
        if value not in self._known:
            self._known[value] = self._evaluate(value)
        return self._known[value]

    def _evaluate(self, value: ir.Value) -> Affine | None:
        if value == self.counter:
            return Affine(1, self.start)
        constant = constant_int(value)
        if constant is not None:
            return Affine(0, constant)
        op = ir_utils.defining_op(value)
        if op is None or not _is_scalar(value):
            return None
        name = op.name
        if name in (_CONSTRAINT_OP, "stablehlo.convert", "stablehlo.reshape"):
            return self(op.operands[0])
        if name in ("stablehlo.add", "stablehlo.subtract"):
            a, b = self(op.operands[0]), self(op.operands[1])
            if a is None or b is None:
                return None
            sign = 1 if name == "stablehlo.add" else -1
            return Affine(a.scale + sign * b.scale, a.offset + sign * b.offset)
        if name == "stablehlo.negate":
            a = self(op.operands[0])
            return None if a is None else Affine(-a.scale, -a.offset)
        if name == "stablehlo.multiply":
            a, b = self(op.operands[0]), self(op.operands[1])
            if a is None or b is None or (a.scale and b.scale):
                return None
            factor, term = (a, b) if a.scale == 0 else (b, a)
            return Affine(term.scale * factor.offset, term.offset * factor.offset)
        if name == "stablehlo.select":
            chosen = self._decided(op.operands[0])
            return None if chosen is None else self(op.operands[1 if chosen else 2])
        if name == "stablehlo.clamp":
            low, x, high = (self(v) for v in op.operands)
            if None in (low, x, high) or low.scale or high.scale:
                return None
            lo, hi = x.rows(0, self.trip_count)
            return x if low.offset <= lo and hi - 1 <= high.offset else None
        return None

    def _decided(self, predicate: ir.Value) -> bool | None:
        """The value of a comparison of affine values that is the same at every iteration."""
        op = ir_utils.defining_op(predicate)
        if op is None or op.name != "stablehlo.compare":
            return None
        a, b = self(op.operands[0]), self(op.operands[1])
        if a is None or b is None:
            return None
        test = _COMPARISONS.get(_direction(op))
        if test is None:
            return None
        difference = Affine(a.scale - b.scale, a.offset - b.offset)
        if not difference.scale:
            return test(difference.offset, 0)
        if _direction(op) in ("EQ", "NE"):
            return None
        # A half-line test of a linear value: the same at both ends, the same in between.
        outcomes = {test(difference.at(j), 0) for j in (0, self.trip_count - 1)}
        return outcomes.pop() if len(outcomes) == 1 else None


def _is_scalar(value: ir.Value) -> bool:
    return isinstance(value.type, ir.RankedTensorType) and not ir.RankedTensorType(value.type).shape


def _row_access(op: ir.Operation, index: _IndexOf, stacked: ir.Value) -> Access | None:
    """``op`` as a one-row access of ``stacked`` along axis 0 at an affine index that stays
    in range (None if it is not one)."""
    shape = ir.RankedTensorType(stacked.type).shape
    if op.name == DYNAMIC_SLICE and op.operands[0] == stacked:
        index_operand = 1
        sizes = list(ir.DenseI64ArrayAttr(op.attributes["slice_sizes"]))
        if sizes[0] != 1:
            return None
    elif op.name == DYNAMIC_UPDATE_SLICE and op.operands[0] == stacked:
        index_operand = 2
        if ir.RankedTensorType(op.operands[1].type).shape[0] != 1:
            return None
    else:
        return None
    row = index(op.operands[index_operand])
    if row is None or abs(row.scale) != 1:
        return None
    lo, hi = row.rows(0, index.trip_count)
    if lo < 0 or hi > shape[0]:
        return None
    return Access(op, row, index_operand)


def _stacked_read(
    loop: ir.Operation, index: _IndexOf, argument: ir.Value, carry: int
) -> StackedRead | None:
    if not _is_stack(argument):
        return None
    accesses = []
    for use in argument.uses:
        owner = ir_utils.use_owner(use)
        if owner.name == "stablehlo.return" and owner.block == argument.owner:
            continue  # returned unchanged: it is invariant
        access = _row_access(owner, index, argument)
        if access is None:
            return None
        accesses.append(access)
    if not accesses:
        return None
    return StackedRead(loop.operands[carry], carry, accesses)


def _captured_reads(loop: ir.Operation, index: _IndexOf) -> list[StackedRead]:
    """Stacks defined outside the loop that its body reads directly, a row at a time."""
    reads: dict[ir.Value, StackedRead | None] = {}
    for nested in ir_utils.walk(loop):
        if nested.name != DYNAMIC_SLICE:
            continue
        source = nested.operands[0]
        if source in reads or not _is_stack(source) or _defined_inside(source, loop):
            continue
        accesses = []
        for use in source.uses:
            owner = ir_utils.use_owner(use)
            if not ir_utils.is_inside(owner, loop) or owner == loop:
                continue
            access = _row_access(owner, index, source)
            if access is None:
                accesses = []
                break
            accesses.append(access)
        reads[source] = StackedRead(source, None, accesses) if accesses else None
    return [read for read in reads.values() if read is not None]


def _defined_inside(value: ir.Value, loop: ir.Operation) -> bool:
    producer = ir_utils.defining_op(value)
    if producer is not None:
        return ir_utils.is_inside(producer, loop)
    parent = ir.BlockArgument(value).owner.owner.operation  # the op holding its block
    return ir_utils.is_inside(parent, loop)


def _stacked_write(
    index: _IndexOf, argument: ir.Value, value: ir.Value, carry: int
) -> StackedWrite | None:
    if not _is_stack(argument):
        return None
    uses = list(argument.uses)
    update = ir_utils.defining_op(value)
    if len(uses) != 1 or update is None or ir_utils.use_owner(uses[0]) != update:
        return None
    if len(list(value.uses)) != 1:
        return None
    access = _row_access(update, index, argument)
    return None if access is None else StackedWrite(carry, access)


def _is_stack(value: ir.Value) -> bool:
    return isinstance(value.type, ir.RankedTensorType) and bool(
        ir.RankedTensorType(value.type).shape
    )
