"""jaxpp-verify-program: check the invariants of a partitioned module."""

from __future__ import annotations

from jax.interpreters.mlir import ir

from jaxpp_mlir import diagnostics
from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.passes.base import UNCHANGED, ModulePass, Unchanged, register_pass
from jaxpp_mlir.runtime import records


@register_pass
@records.frozen
class VerifyProgram(ModulePass):
    """Verify a partitioned module: tasks, transfers and stage functions agree.

    Checks that ``@main`` holds only jaxpp ops (at most one ``jaxpp.loop``,
    whose body holds only tasks and transfers and ends with ``jaxpp.yield``)
    and its return; every task
    names an existing function whose type matches its operands and results,
    and carries a rank; every task operand is an argument of ``@main`` or is
    defined on the task's rank; every ``jaxpp.recv`` has exactly one earlier
    ``jaxpp.send`` on the same channel, between the same ranks, of the same
    type; stage functions hold no stage marker, jaxpp op or call; a
    ``jaxpp.replicated`` names one distinct rank per operand, each operand of
    its type held on that rank, and only the return reads it; a ``jaxpp.chunk``
    reads an argument of ``@main``, carries a rank and rows within the
    argument's, of its result type, disjoint from the rows of the argument's
    other chunks; a ``jaxpp.assemble`` concatenates along axis 0 values each held
    on a rank, of its result's type but for their rows, and only the return reads
    it.

    Precondition: none (it only reads the IR).
    Postcondition: the IR is unchanged; a violation fails with a located error.
    """

    name = "jaxpp-verify-program"

    def run(self, module: ir.Operation) -> Unchanged:
        main = ir_utils.get_main(module)
        symbols = ir.SymbolTable(module)
        sends: dict[int, ir.Operation] = {}
        matched: set[int] = set()
        rank_of: dict[ir.Value, int] = {}
        chunk_rows: dict[int, list[tuple[int, int, ir.Operation]]] = {}
        ops = ir_utils.block_ops(ir_utils.body(main))
        for op in ops:
            if op.name == "func.return":
                continue
            if jaxpp.is_replicated(op):
                _check_replicated(op, rank_of)
                continue
            if jaxpp.is_chunk(op):
                _check_chunk(op, main, chunk_rows, rank_of)
                continue
            if jaxpp.is_assemble(op):
                _check_assemble(op, rank_of)
                continue
            if jaxpp.is_loop(op):
                _check_loop(op, rank_of)
                ops_in_loop = ir_utils.block_ops(jaxpp.loop_body(op))
                for nested in ops_in_loop[:-1]:
                    _check_op(nested, symbols, sends, matched, rank_of)
                for value, rank in zip(
                    ops_in_loop[-1].operands, jaxpp.get_state_ranks(op), strict=True
                ):
                    if value in rank_of and rank_of[value] != rank:
                        raise diagnostics.error(
                            ops_in_loop[-1],
                            f"loop state updated on rank {rank_of[value]} but held on rank {rank}",
                        )
                continue
            _check_op(op, symbols, sends, matched, rank_of)
        unmatched = sorted(set(sends) - matched)
        if unmatched:
            raise diagnostics.error(
                sends[unmatched[0]], f"send on channel {unmatched[0]} has no matching recv"
            )
        return UNCHANGED


def _check_replicated(op: ir.Operation, rank_of: dict[ir.Value, int]) -> None:
    ranks = jaxpp.get_replica_ranks(op)
    operands = list(op.operands)
    if len(ranks) != len(operands) or len(set(ranks)) != len(ranks) or len(ranks) < 2:
        raise diagnostics.error(
            op, f"'{op.name}' needs {jaxpp.RANKS_ATTR}: one distinct rank per operand, at least 2"
        )
    for value, rank in zip(operands, ranks, strict=True):
        if value.type != op.results[0].type:
            raise diagnostics.error(op, f"'{op.name}' operands differ in type from its result")
        if rank_of.get(value) != rank:
            raise diagnostics.error(
                op, f"'{op.name}' operand for rank {rank} is not a value held on rank {rank}"
            )
    for use in op.results[0].uses:
        if ir_utils.use_owner(use).name != "func.return":
            raise diagnostics.error(op, f"'{op.name}' is read by something else than the return")


def _check_chunk(
    op: ir.Operation,
    main: ir.Operation,
    chunk_rows: dict[int, list[tuple[int, int, ir.Operation]]],
    rank_of: dict[ir.Value, int],
) -> None:
    operands = list(op.operands)
    argument = operands[0] if len(operands) == 1 else None
    if argument is None or not (
        isinstance(argument, ir.BlockArgument) and argument.owner == ir_utils.body(main)
    ):
        raise diagnostics.error(op, f"'{op.name}' must read one argument of @main")
    for name in (jaxpp.CHUNK_START_ATTR, jaxpp.CHUNK_ROWS_ATTR, jaxpp.RANK_ATTR):
        if name not in op.attributes:
            raise diagnostics.error(op, f"'{op.name}' has no {name} attribute")
    start, rows = jaxpp.chunk_rows(op)
    whole = ir.RankedTensorType(argument.type)
    if whole.rank == 0 or start < 0 or rows < 1 or start + rows > whole.shape[0]:
        raise diagnostics.error(
            op,
            f"'{op.name}' rows [{start}, {start + rows}) are not rows of the argument "
            f"({argument.type})",
        )
    result = ir.RankedTensorType(op.results[0].type)
    if result.shape != [rows, *whole.shape[1:]] or result.element_type != whole.element_type:
        raise diagnostics.error(
            op, f"'{op.name}' result type {result} is not rows of {argument.type}"
        )
    held = chunk_rows.setdefault(ir.BlockArgument(argument).arg_number, [])
    for other_start, other_rows, other in held:
        if start < other_start + other_rows and other_start < start + rows:
            where = diagnostics.format_location(other.location)
            raise diagnostics.error(
                op,
                f"'{op.name}' rows [{start}, {start + rows}) overlap rows [{other_start}, "
                f"{other_start + other_rows}) of another chunk of the same argument (at {where})",
            )
    held.append((start, rows, op))
    rank_of[op.results[0]] = jaxpp.get_rank(op)


def _check_assemble(op: ir.Operation, rank_of: dict[ir.Value, int]) -> None:
    operands = list(op.operands)
    result = ir.RankedTensorType(op.results[0].type)
    rows = 0
    for value in operands:
        piece = ir.RankedTensorType(value.type)
        if (
            piece.rank != result.rank
            or piece.shape[1:] != result.shape[1:]
            or (piece.element_type != result.element_type)
        ):
            raise diagnostics.error(
                op, f"'{op.name}' operand {value.type} is not rows of its result {result}"
            )
        rows += piece.shape[0]
        if value not in rank_of:
            raise diagnostics.error(
                op, f"'{op.name}' operand {value.type} is not a value held on a rank"
            )
    if not operands or result.rank == 0 or rows != result.shape[0]:
        raise diagnostics.error(
            op,
            f"'{op.name}' operands hold {rows} rows but its result {result} has "
            f"{result.shape[0] if result.rank else 0}",
        )
    for use in op.results[0].uses:
        if ir_utils.use_owner(use).name != "func.return":
            raise diagnostics.error(op, f"'{op.name}' is read by something else than the return")


def _check_loop(loop: ir.Operation, rank_of: dict[ir.Value, int]) -> None:
    state_ranks = jaxpp.get_state_ranks(loop)
    body = jaxpp.loop_body(loop)
    if len(state_ranks) != len(list(loop.results)):
        raise diagnostics.error(loop, "jaxpp.loop needs jaxpp.state_ranks for each state")
    terminator = body.operations[-1].operation
    if not jaxpp.is_yield(terminator):
        raise diagnostics.error(loop, "the body of jaxpp.loop must end with jaxpp.yield")
    _check_operands_on_rank_list(loop, list(loop.operands), state_ranks, rank_of)
    for argument, rank in zip(list(body.arguments)[1:], state_ranks, strict=True):
        rank_of[argument] = rank
    for result, rank in zip(loop.results, state_ranks, strict=True):
        rank_of[result] = rank


def _check_op(
    op: ir.Operation,
    symbols: ir.SymbolTable,
    sends: dict[int, ir.Operation],
    matched: set[int],
    rank_of: dict[ir.Value, int],
) -> None:
    if not jaxpp.is_jaxpp_op(op) or jaxpp.is_loop(op) or jaxpp.is_yield(op):
        raise diagnostics.error(
            op,
            f"'{op.name}' in the task graph of a partitioned module{_reader_note(op, symbols)}: "
            "no pass placed it in a task; please report it with the IR dump "
            "(partition(..., dump_dir=PATH))",
        )
    if not jaxpp.has_rank(op):
        raise diagnostics.error(op, f"'{op.name}' has no jaxpp.rank")
    required = (jaxpp.CALLEE_ATTR,) if jaxpp.is_task(op) else (jaxpp.CHANNEL_ATTR, jaxpp.PEER_ATTR)
    for name in required:
        if name not in op.attributes:
            raise diagnostics.error(op, f"'{op.name}' has no {name} attribute")
    rank = jaxpp.get_rank(op)
    if jaxpp.is_send(op):
        channel = jaxpp.get_channel(op)
        if channel in sends:
            raise diagnostics.error(op, f"channel {channel} is sent on twice")
        _check_operands_on_rank(op, rank, rank_of)
        sends[channel] = op
    elif jaxpp.is_recv(op):
        _check_recv(op, sends, matched)
    else:
        _check_task(op, symbols)
        _check_operands_on_rank(op, rank, rank_of)
    for result in op.results:
        rank_of[result] = rank


def _check_operands_on_rank_list(
    op: ir.Operation, values: list[ir.Value], ranks: list[int], rank_of: dict[ir.Value, int]
) -> None:
    for value, rank in zip(values, ranks, strict=True):
        if value in rank_of and rank_of[value] != rank:
            raise diagnostics.error(
                op,
                f"operand defined on rank {rank_of[value]} is used on rank {rank} "
                "without a transfer",
            )


def _check_task(op: ir.Operation, symbols: ir.SymbolTable) -> None:
    callee = jaxpp.task_callee(op)
    try:
        function = symbols[callee]
    except KeyError:
        raise diagnostics.error(op, f"task calls unknown function '@{callee}'") from None
    function_type = ir.FunctionType(ir.TypeAttr(function.attributes["function_type"]).value)
    operand_types = [v.type for v in op.operands]
    result_types = [v.type for v in op.results]
    if list(function_type.inputs) != operand_types or list(function_type.results) != result_types:
        raise diagnostics.error(
            op, f"task operand or result types do not match the type of '@{callee}'"
        )
    for nested in ir_utils.walk(function.operation):
        name = nested.name
        marker = name in jaxpp.MARKER_OP_NAMES and jaxpp.is_stage_marker(nested)
        if marker or name in _NEVER_IN_STAGES:
            raise diagnostics.error(
                nested, f"'{nested.name}' left inside stage function '@{callee}'"
            )


# What a stage function must not hold: jaxpp ops and calls, and stage markers.
_NEVER_IN_STAGES = frozenset({*jaxpp.JAXPP_OPS, "func.call"})


def _check_recv(op: ir.Operation, sends: dict[int, ir.Operation], matched: set[int]) -> None:
    channel = jaxpp.get_channel(op)
    send = sends.get(channel)
    if send is None:
        raise diagnostics.error(op, f"recv on channel {channel} has no earlier send")
    if channel in matched:
        raise diagnostics.error(op, f"channel {channel} is received twice")
    if jaxpp.get_rank(send) != jaxpp.get_peer(op) or jaxpp.get_peer(send) != jaxpp.get_rank(op):
        raise diagnostics.error(
            op, f"recv on channel {channel} does not match the ranks of its send"
        )
    if send.operands[0].type != op.results[0].type:
        raise diagnostics.error(op, f"recv on channel {channel} has a different type than its send")
    matched.add(channel)


def _check_operands_on_rank(op: ir.Operation, rank: int, rank_of: dict[ir.Value, int]) -> None:
    for value in op.operands:
        if value in rank_of and rank_of[value] != rank:
            raise diagnostics.error(
                op,
                f"operand defined on rank {rank_of[value]} is used on rank {rank} "
                "without a transfer",
            )


def _reader_note(op: ir.Operation, symbols: ir.SymbolTable) -> str:
    """``" (<types>, read by '<op>' at <file:line> in @<function>)"`` for the first op
    that reads a result of ``op``, looked for through a task into its function: the
    model's line that reads it, where ``op``'s own location may be only the
    ``.lower()`` call (JAX hoists closed-over arrays to the top of the step)."""
    types = ", ".join(str(result.type) for result in op.results)
    for result in op.results:
        for use in result.uses:
            reader, where = ir_utils.use_owner(use), ""
            callee = jaxpp.task_callee(reader) if jaxpp.is_task(reader) else None
            if callee is not None and callee in symbols:
                entry = symbols[callee].regions[0].blocks[0]
                inner = next(iter(entry.arguments[use.operand_number].uses), None)
                if inner is not None:
                    reader, where = ir_utils.use_owner(inner), f" in @{callee}"
            location = diagnostics.format_location(reader.location)
            return f" ({types}, read by '{reader.name}' at {location}{where})"
    return f" ({types})"
