"""jaxpp-restore-sharding-constraints: turn Shardy's sdy.reshard back into constraints."""

from __future__ import annotations

from jax.interpreters.mlir import ir

from jaxpp_mlir import diagnostics
from jaxpp_mlir._jax_compat import sdy
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.passes.base import Evidence, ModulePass, register_pass
from jaxpp_mlir.runtime import records


@register_pass
@records.frozen
class RestoreShardingConstraints(ModulePass):
    """Turn the sdy.reshard ops Shardy's propagation pipeline made back into sharding constraints.

    ``sdy-propagation-pipeline`` rewrites the user's ``with_sharding_constraint``
    (``sdy.sharding_constraint``) into ``sdy.reshard``, which XLA's own
    import of a stage module rejects; a constraint with the same sharding is
    what JAX itself hands to XLA, and XLA inserts the same collectives for it.

    The rewrite is the exact inverse of Shardy's ``sdy-sharding-constraint-to-reshard``
    and cannot fail (both ops are verified alike).

    Precondition: Shardy's propagation ran (``sdy-propagation-pipeline``). That
    pipeline always removes ``sdy.sharding_group`` ops (from
    ``jax.experimental.shard_alike``), so one left in the module shows it has
    not run: an error at the group, as the pass would find nothing to restore
    and the reshards of a later propagation would be left.
    Postcondition: no ``sdy.reshard`` remains; each became an
    ``sdy.sharding_constraint`` with the same operand, sharding and location.
    jaxpp-outline-stages checks it (``unfinished``): a reshard left would reach
    a stage module.
    """

    name = "jaxpp-restore-sharding-constraints"

    @classmethod
    def unfinished(cls, module: ir.Operation) -> Evidence | None:
        for op in ir_utils.walk(module):
            if op.name == "sdy.reshard":
                what = "an sdy.reshard made by Shardy's propagation is left (XLA rejects it)"
                return Evidence(op, what)
        return None

    def run(self, module: ir.Operation) -> None:
        ops = list(ir_utils.walk(module))
        for op in ops:
            if op.name == "sdy.sharding_group":
                raise diagnostics.error(
                    op,
                    f"{self.name}: Shardy's propagation has not run (found sdy.sharding_group, "
                    "which sdy-propagation-pipeline removes): run sdy-propagation-pipeline first",
                )
        for op in [op for op in ops if op.name == "sdy.reshard"]:
            with ir.InsertionPoint(op), op.location:
                constraint = sdy.ShardingConstraintOp(op.operands[0], op.attributes["sharding"])
            for name in ("sdy.sharding",):
                if name in op.attributes:
                    constraint.operation.attributes[name] = op.attributes[name]
            op.results[0].replace_all_uses_with(constraint.result)
            op.erase()
