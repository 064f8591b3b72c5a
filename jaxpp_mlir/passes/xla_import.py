"""What an outlined program avoids so that XLA's import of it keeps its shardings valid.

A stage program differs from what ``jax.jit`` hands XLA in one way: after Shardy's
propagation, its ops carry shardings (``sdy.sharding``, one entry per result). XLA's
import simplifies the program before translating it (a canonicalizer) and keeps those
shardings as they were, which breaks two patterns of every scanned or looped model:

- JAX lowers a scan's or a loop's constants and its ``xs`` as iteration arguments of its
  ``stablehlo.while`` that the body returns unchanged. The import folds such an argument
  into a value read from above but keeps the loop's per-result shardings whole; then
  translating the loop appends the values read from above to its tuple together with
  their shardings: ``RET_CHECK leaf_count == tuple_elements_.size()``.
  ``fold_invariant_carries`` folds them first, with their sharding entries.
- An op that computes its operand unchanged (``x - 0`` after a loop: the final norm of a
  decoder subtracting a zero mean) is folded into that operand, and its sharding is put
  on the operand's producer; where that producer has several results (a loop), one
  sharding for a tuple: ``Number of tile assignment dimensions ... is different than the
  input rank``. ``unshard_readers_of_tuples`` leaves the single-result readers of a
  several-result op without a sharding of their own: XLA's propagation gives them one
  from the producer's result, which keeps its sharding.

``prepare`` does both to one outlined function.
"""

from __future__ import annotations

from jax.interpreters.mlir import ir

from jaxpp_mlir._jax_compat import sdy, stablehlo
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.passes import shardings
from jaxpp_mlir.passes.stacked_pieces import copy_attributes


def prepare(function: ir.Operation) -> None:
    """Both rewrites of this module on the outlined ``function``."""
    fold_invariant_carries(function)
    unshard_readers_of_tuples(function)


def unshard_readers_of_tuples(root: ir.Operation) -> None:
    """Every single-result op nested in ``root`` that reads a result of an op with several
    results loses its ``sdy.sharding``."""
    for op in ir_utils.walk(root):
        if len(op.results) < 2:
            continue
        for result in op.results:
            for use in result.uses:
                reader = ir_utils.use_owner(use)
                if len(reader.results) == 1 and shardings.SHARDING_ATTR in reader.attributes:
                    del reader.attributes[shardings.SHARDING_ATTR]


def fold_invariant_carries(root: ir.Operation) -> None:
    """Every ``stablehlo.while`` nested in ``root`` loses the iteration arguments its body
    returns unchanged: the condition, the body and the readers of the loop's result read
    the argument's start value instead, and the loop's ``sdy.sharding`` loses their
    entries. A loop whose every argument is returned unchanged is left alone."""
    for loop in [op for op in ir_utils.walk(root) if op.name == ir_utils.WHILE_OP]:
        _fold(loop)


def invariant_carries(loop: ir.Operation) -> list[int]:
    """The iteration arguments of ``loop`` that its body returns unchanged."""
    body = loop.regions[1].blocks[0]
    returned = ir_utils.block_ops(body)[-1].operands
    return [i for i, argument in enumerate(body.arguments) if returned[i] == argument]


def _fold(loop: ir.Operation) -> None:
    drop = invariant_carries(loop)
    if not drop or len(drop) == len(loop.operands):
        return
    keep = [i for i in range(len(loop.operands)) if i not in drop]
    condition, body = loop.regions[0].blocks[0], loop.regions[1].blocks[0]
    for i in drop:
        start = loop.operands[i]
        body.arguments[i].replace_all_uses_with(start)
        condition.arguments[i].replace_all_uses_with(start)
        loop.results[i].replace_all_uses_with(start)
    terminator = ir_utils.block_ops(body)[-1]
    with ir.InsertionPoint(terminator), terminator.location:
        stablehlo.ReturnOp([terminator.operands[i] for i in keep])
    terminator.erase()
    for i in reversed(drop):
        body.erase_argument(i)
        condition.erase_argument(i)
    attributes = copy_attributes(loop)
    sharding = attributes.pop(shardings.SHARDING_ATTR, None)
    with ir.InsertionPoint(loop):
        folded = ir.Operation.create(
            ir_utils.WHILE_OP,
            results=[loop.results[i].type for i in keep],
            operands=[loop.operands[i] for i in keep],
            attributes=attributes,
            regions=2,
            loc=loop.location,
        )
    if sharding is not None:
        per_value = sdy.TensorShardingPerValueAttr(sharding).shardings
        shardings.set_result_shardings(folded, [per_value[i] for i in keep])
    condition.append_to(folded.regions[0])
    body.append_to(folded.regions[1])
    for position, i in enumerate(keep):
        loop.results[i].replace_all_uses_with(folded.results[position])
    loop.erase()
