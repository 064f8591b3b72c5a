"""jaxpp-share-constant-tasks: constant-only tasks before the loop, one program for all ranks."""

from __future__ import annotations

import collections
import dataclasses
import io

from jax.interpreters.mlir import ir

from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.passes.base import UNCHANGED, ModulePass, Unchanged, register_pass
from jaxpp_mlir.plan.specs import tensor_spec
from jaxpp_mlir.runtime import records
from jaxpp_mlir.runtime.liveness import spec_bytes

# What a constant-only task's function may hold: splat constants (ir_utils.CONSTANT_OPS),
# their broadcasts, the return. Zero accumulators before the loop are made of these.
_BROADCAST = "stablehlo.broadcast_in_dim"
_RETURN = "func.return"
# The attributes of a task this pass rebuilds; a task with others (shardings) is left alone.
_TASK_ATTRIBUTES = frozenset(
    {jaxpp.CALLEE_ATTR, jaxpp.STAGE_ATTR, jaxpp.KIND_ATTR, jaxpp.RANK_ATTR}
)
# A function attribute set on every outlined function; others (argument or result
# attributes: shardings) leave the function alone.
_FUNCTION_ATTRIBUTES = frozenset({"sym_name", "function_type", "sym_visibility"})

Key = tuple[str, str]  # (result type, splat element) as text


@register_pass
@records.frozen
class ShareConstantTasks(ModulePass):
    """Give the constant-only tasks before the loop of several ranks one function body.

    A ``pre`` task that reads nothing and whose function only makes splat constants
    (the zero accumulators of a ``treduce`` loop: ``stablehlo.constant`` and its
    ``broadcast_in_dim``) computes the same values on every rank, but each distinct
    body is one more XLA compilation (about 20 ms of CPU per distinct shape on
    XLA:CPU, whatever its size). The last stage's rank usually also makes the loss
    accumulator's scalar zero, so its task differs from the other ranks' by that one
    scalar. Such a task whose results are a sub-multiset of another one's (same type
    and value), lacking at most ``max-bytes`` bytes of them, takes the larger task's
    body: its function is made a copy of it, its task returns the larger result list,
    and the results it did not make before are left unused (the runtime frees them
    right after the task). The stage modules of all those tasks are then one text,
    which the runtime compiles once for every rank. The largest such task (by result
    bytes) is taken first; tasks it cannot cover form groups of their own.

    The values are the same constants, so results are unchanged bit for bit; a rank
    makes at most ``max-bytes`` more bytes of constants per step.

    Precondition: the code before the loop is outlined (``jaxpp-outline-outer-code``);
    without ``pre`` tasks there is nothing to do. Tasks or functions carrying
    shardings are left alone. Postcondition: each group of constant-only ``pre``
    tasks that the byte budget allows has functions with identical bodies.

    Options: ``max-bytes`` (default 1024; 0 turns sharing off) is the most bytes of
    unused constants a task may make.
    """

    name = "jaxpp-share-constant-tasks"
    max_bytes: int = dataclasses.field(
        default=1024,
        metadata={"help": "most bytes of unused constants a task may make (0: off)", "min": 0},
    )

    def run(self, module: ir.Operation) -> Unchanged | None:
        if self.max_bytes == 0:
            return UNCHANGED
        main = ir_utils.find_main(module)
        if main is None:
            return UNCHANGED
        functions = _functions(module)
        candidates = []
        for op in ir_utils.block_ops(ir_utils.body(main)):
            if not jaxpp.is_task(op) or jaxpp.get_kind(op) != jaxpp.PRE:
                continue
            function = functions.get(jaxpp.task_callee(op))
            keys = _constant_keys(op, function)
            if keys is not None:
                candidates.append(_Candidate(op, function, keys, _bytes(op)))
        changed = False
        remaining = sorted(candidates, key=lambda c: -c.bytes)
        while remaining:
            largest, *others = remaining
            remaining = []
            text = None  # the largest body's, printed once if some task has its results
            for candidate in others:
                if not _covers(largest, candidate, self.max_bytes):
                    remaining.append(candidate)
                    continue
                if candidate.keys == largest.keys:
                    text = _text(largest) if text is None else text
                    if _text(candidate) == text:
                        continue  # already one program text
                _take_body(candidate, largest)
                changed = True
        return None if changed else UNCHANGED


@dataclasses.dataclass
class _Candidate:
    task: ir.Operation
    function: ir.Operation
    keys: list[Key]  # one per result, in order
    bytes: int


def _functions(module: ir.Operation) -> dict[str, ir.Operation]:
    return {
        ir_utils.symbol_name(op.operation): op.operation
        for op in module.regions[0].blocks[0].operations
        if op.operation.name == "func.func"
    }


def _constant_keys(task: ir.Operation, function: ir.Operation | None) -> list[Key] | None:
    """Each result's (type, splat value) where ``task`` reads nothing and its function
    only makes splat constants; else None."""
    if function is None or len(task.operands) or set(_names(task)) - _TASK_ATTRIBUTES:
        return None
    if set(_names(function)) - _FUNCTION_ATTRIBUTES:
        return None
    made: dict[ir.Value, str] = {}
    for op in ir_utils.block_ops(ir_utils.body(function)):
        if op.name in ir_utils.CONSTANT_OPS:
            dense = ir.DenseElementsAttr(op.attributes["value"])
            if not dense.is_splat:
                return None
            made[op.results[0]] = str(dense.get_splat_value())
        elif op.name == _BROADCAST and op.operands[0] in made:
            made[op.results[0]] = made[op.operands[0]]
        elif op.name == _RETURN:
            if any(v not in made for v in op.operands):
                return None
            return [(str(v.type), made[v]) for v in op.operands]
        else:
            return None
    return None


def _names(op: ir.Operation) -> list[str]:
    attributes = op.attributes
    return [attributes[index].name for index in range(len(attributes))]


def _bytes(task: ir.Operation) -> int:
    return sum(spec_bytes(tensor_spec(t)) for t in task.results.types)


def _covers(larger: _Candidate, smaller: _Candidate, max_bytes: int) -> bool:
    """Whether ``smaller``'s results are among ``larger``'s, lacking at most ``max_bytes``."""
    missing = collections.Counter(larger.keys)
    missing.subtract(smaller.keys)
    return min(missing.values(), default=0) >= 0 and larger.bytes - smaller.bytes <= max_bytes


def _text(candidate: _Candidate) -> str:
    """The function's body as text (its name left out), its values named within the
    function: printed alone, each op would have the values of the whole module numbered
    first (4 ms per op in the GPT-2 example's module)."""
    state = ir.AsmState(candidate.function, use_local_scope=True)
    text = io.StringIO()
    for op in ir_utils.block_ops(ir_utils.body(candidate.function)):
        op.print(state, file=text)
        text.write("\n")
    return text.getvalue()


def _take_body(candidate: _Candidate, source: _Candidate) -> None:
    """Makes ``candidate``'s function a copy of ``source``'s and its task return
    ``source``'s results; each old result's uses move to a new result of its key."""
    function, block = candidate.function, ir_utils.body(candidate.function)
    for op in reversed(ir_utils.block_ops(block)):
        op.erase()
    copies: dict[ir.Value, ir.Value] = {}
    with ir.InsertionPoint(block):
        for op in ir_utils.block_ops(ir_utils.body(source.function)):
            copy = op.clone()
            for index, operand in enumerate(copy.operands):
                copy.operands[index] = copies.get(operand, operand)
            for old, new in zip(op.results, copy.results, strict=True):
                copies[old] = new
    function.attributes["function_type"] = source.function.attributes["function_type"]
    old = candidate.task
    with ir.InsertionPoint(old), old.location:
        task = jaxpp.create_task(
            jaxpp.task_callee(old),
            [],
            list(source.task.results.types),
            stage=jaxpp.get_stage(old),
            kind=jaxpp.get_kind(old),
        )
    jaxpp.set_rank(task, jaxpp.get_rank(old))
    free: dict[Key, list[int]] = collections.defaultdict(list)
    for index, key in enumerate(source.keys):
        free[key].append(index)
    for result, key in zip(old.results, candidate.keys, strict=True):
        result.replace_all_uses_with(task.results[free[key].pop(0)])
    old.erase()
    candidate.task, candidate.keys = task, list(source.keys)
