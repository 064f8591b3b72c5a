"""jaxpp-pack-parameters: one packed loop-invariant buffer per (stage, element type)."""

from __future__ import annotations

import dataclasses
import math

from jax.interpreters.mlir import ir

from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.passes import shardings
from jaxpp_mlir.passes.base import ModulePass, register_pass
from jaxpp_mlir.passes.row_packing import RowLayout
from jaxpp_mlir.runtime import records

# A value read as the operand that a dynamic_slice indexes is microbatched data (the
# whole batch, sliced per iteration), not a parameter: packing it would copy the batch.
_MICROBATCH_READERS = ("stablehlo.dynamic_slice",)
_CONTRACTIONS = ("stablehlo.dot_general", "stablehlo.dot", "stablehlo.convolution")


@register_pass
@records.frozen
class PackParameters(ModulePass):
    """Pass the loop-invariant parameters one stage reads as a few packed buffers.

    Every task of a stage with L layers receives its 2L weights and biases as
    separate buffers, although the microbatch loop reads them unchanged in
    every iteration (issue 13: host time grows by about 1 us per input buffer
    of a launch). This pass concatenates, once before the ``jaxpp.loop``, the
    values defined outside the loop that ops of one stage read inside it, of
    the same floating element type, as rows of ``w`` elements (``w`` the gcd
    of the members' sizes, each member a whole number of rows, the layout of
    jaxpp-pack-accumulators); inside the loop, each (stage, kind) that read a
    member reads instead a ``slice`` of the packed buffer's rows, reshaped to
    the member's shape, placed before its first reader and tagged with that
    reader's (stage, kind), so outlining moves it into the task and XLA fuses
    it with its consumers. Values and op order of the computation are
    unchanged, so every result is bit-for-bit the one before.

    A group holds at most ``max-members`` values (the next ones start another
    group). With ``contraction-operands=false``, values that a contraction
    (``dot_general``, ``dot``, ``convolution``) reads inside the loop are left
    alone: XLA:CPU copies a slice that feeds a contraction into a buffer of its
    own before every contraction, while it fuses a slice into elementwise
    consumers (benchmarks/RESULTS.md, "Packed parameters").

    Left alone: groups of one value, values read outside the loop only (their
    reads outside the loop always are), values computed from constants alone
    (outlining copies them into the tasks), values read inside the loop by ops of
    several stages, values a ``dynamic_slice`` indexes (the microbatched batch),
    non-float and empty values, and every value of a loop with shardings (a
    sharded step).

    Precondition: ``@main`` holds a ``jaxpp.loop`` (jaxpp-normalize-loop) whose
    body ops carry ``jaxpp.stage``/``jaxpp.kind`` (jaxpp-choose-stages); without
    a loop there is nothing to do.
    Postcondition: inside the loop, no op reads a packed member directly: each
    (stage, kind) reads its rows of a packed buffer computed before the loop;
    the loop's results and every value computed from them are unchanged.
    """

    name = "jaxpp-pack-parameters"
    max_members: int = dataclasses.field(
        default=64,
        metadata={"help": "most values packed into one buffer (at least 2)", "min": 2},
    )
    contraction_operands: bool = dataclasses.field(
        default=True,
        metadata={"help": "also pack values read by dot_general/dot/convolution in the loop"},
    )
    requires = ("jaxpp-normalize-loop", "jaxpp-choose-stages")
    must_precede = ("jaxpp-outline-stages",)  # it rewrites reads that outlining moves away

    def run(self, module: ir.Operation) -> None:
        main = ir_utils.get_main(module)
        loop = ir_utils.find_loop(main)
        if loop is None or shardings.SHARDING_ATTR in loop.attributes:
            return
        groups = _find_groups(main, loop, self.max_members, self.contraction_operands)
        for group in groups:
            _rewrite(loop, group)


@dataclasses.dataclass
class _Member:
    value: ir.Value
    index: int  # in the group's layout
    readers: list[tuple[ir.Operation, int]]  # its reads inside the loop: (op, operand index)


@dataclasses.dataclass
class _Group:
    stage: int
    layout: RowLayout
    members: list[_Member]


def _outer_values(main: ir.Operation, loop: ir.Operation) -> list[ir.Value]:
    """``@main``'s arguments and the results of its ops before the loop, in order,
    without those computed from constants alone (outlining copies them into the
    tasks that read them: they are no buffers)."""
    values = list(ir_utils.body(main).arguments)
    from_constants: set[ir.Operation] = set()
    for op in ir_utils.body(main).operations:
        op = op.operation
        if op == loop:
            break
        if ir_utils.is_pure_constant_like(op) and not op.regions:
            producers = [ir_utils.defining_op(v) for v in op.operands]
            if all(p is not None and p in from_constants for p in producers):
                from_constants.add(op)
                continue
        values.extend(op.results)
    return values


def _ranked_tensor(type_: ir.Type) -> ir.RankedTensorType | None:
    try:
        return ir.RankedTensorType(type_)
    except ValueError:  # a token, a tuple, an unranked tensor
        return None


def _reads_inside(value: ir.Value, loop: ir.Operation) -> list[tuple[ir.Operation, int]]:
    """The reads of ``value`` by ops nested in the loop (not the loop's own operands)."""
    reads = [(ir_utils.use_owner(use), use.operand_number) for use in value.uses]
    return [(op, n) for op, n in reads if op != loop and ir_utils.is_inside(op, loop)]


def _reading_stage(reads: list[tuple[ir.Operation, int]], body: ir.Block) -> int | None:
    """The one stage whose ops make ``reads``, or None (several stages, microbatch data)."""
    stages = set()
    for owner, operand_number in reads:
        if owner.name in _MICROBATCH_READERS and operand_number == 0:
            return None
        top = ir_utils.top_level_user(owner, body)
        if not jaxpp.has_stage(top):  # the yield: the loop's state set to it
            return None
        stages.add(jaxpp.get_stage(top))
    return stages.pop() if len(stages) == 1 else None


def _find_groups(
    main: ir.Operation, loop: ir.Operation, max_members: int, contraction_operands: bool
) -> list[_Group]:
    """Packable values by (stage, element type), in their order in ``@main``, at most
    ``max_members`` to a group (without values a contraction reads unless
    ``contraction_operands``)."""
    body = jaxpp.loop_body(loop)
    groups: dict[tuple[int, str], list[_Group]] = {}
    for value in _outer_values(main, loop):
        tensor = _ranked_tensor(value.type)
        if tensor is None or not tensor.has_static_shape or math.prod(tensor.shape) == 0:
            continue
        if not isinstance(tensor.element_type, ir.FloatType):
            continue
        reads = _reads_inside(value, loop)
        if not reads:
            continue
        if not contraction_operands and any(op.name in _CONTRACTIONS for op, _ in reads):
            continue
        stage = _reading_stage(reads, body)
        if stage is None:
            continue
        chunks = groups.setdefault((stage, str(tensor.element_type)), [])
        if not chunks or len(chunks[-1].members) == max_members:
            chunks.append(_Group(stage, RowLayout(tensor.element_type), []))
        group = chunks[-1]
        group.members.append(_Member(value, group.layout.add(tuple(tensor.shape)), reads))
    return [group for chunks in groups.values() for group in chunks if len(group.members) > 1]


def _rewrite(loop: ir.Operation, group: _Group) -> None:
    body = jaxpp.loop_body(loop)
    with ir.InsertionPoint(loop), loop.location:
        packed = group.layout.pack([member.value for member in group.members])
    for member in group.members:
        # One read per (stage, kind), before that kind's first reader in the body.
        by_kind: dict[str, list[tuple[ir.Operation, int]]] = {}
        first_reader: dict[str, ir.Operation] = {}
        for owner, operand_number in member.readers:
            top = ir_utils.top_level_user(owner, body)
            kind = jaxpp.get_kind(top)
            by_kind.setdefault(kind, []).append((owner, operand_number))
            if kind not in first_reader or top.is_before_in_block(first_reader[kind]):
                first_reader[kind] = top
        for kind, reads in by_kind.items():
            anchor = first_reader[kind]
            with ir.InsertionPoint(anchor), anchor.location:
                piece = group.layout.unpack(packed, member.index, anchor)
            for owner, operand_number in reads:
                owner.operands[operand_number] = piece
