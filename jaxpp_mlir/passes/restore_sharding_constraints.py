"""jaxpp-restore-sharding-constraints: turn Shardy's sdy.reshard back into constraints."""

from __future__ import annotations

import dataclasses

from jax.extend.mlir import ir
from jax.extend.mlir.dialects import sdy

from jaxpp_mlir.passes import ir_utils
from jaxpp_mlir.passes.base import ModulePass, register_pass


@register_pass
@dataclasses.dataclass
class RestoreShardingConstraints(ModulePass):
    """Turn the sdy.reshard ops Shardy's propagation pipeline made back into sharding constraints.

    ``sdy-propagation-pipeline`` rewrites the user's ``with_sharding_constraint``
    (``sdy.sharding_constraint``) into ``sdy.reshard``, which XLA's own
    import of a stage module rejects; a constraint with the same sharding is
    what JAX itself hands to XLA, and XLA inserts the same collectives for it.

    Precondition: none.
    Postcondition: no ``sdy.reshard`` remains; each became an
    ``sdy.sharding_constraint`` with the same operand, sharding and location.
    """

    name = "jaxpp-restore-sharding-constraints"

    def run(self, module: ir.Operation) -> None:
        for op in [op for op in ir_utils.walk(module) if op.name == "sdy.reshard"]:
            with ir.InsertionPoint(op), op.location:
                constraint = sdy.ShardingConstraintOp(op.operands[0], op.attributes["sharding"])
            for name in ("sdy.sharding",):
                if name in op.attributes:
                    constraint.operation.attributes[name] = op.attributes[name]
            op.results[0].replace_all_uses_with(constraint.result)
            op.erase()
