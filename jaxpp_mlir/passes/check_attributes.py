"""jaxpp-check-attributes: every jaxpp attribute of the module is one the dialect knows."""

from __future__ import annotations

from jax.interpreters.mlir import ir

from jaxpp_mlir import diagnostics
from jaxpp_mlir.dialect import attributes
from jaxpp_mlir.dialect.vocabulary import FRONTEND_ATTRIBUTES
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.passes.base import UNCHANGED, ModulePass, Unchanged, register_pass
from jaxpp_mlir.runtime import records


@register_pass
@records.frozen
class CheckAttributes(ModulePass):
    """Check that every jaxpp attribute is one the dialect knows, of its kind and range.

    Every attribute named ``jaxpp.*`` of every op (the module included), and every
    ``jaxpp.*`` entry of an op's ``mhlo.frontend_attributes`` (a saved custom-call
    marker's), must be one of ``dialect.attributes``' table, hold a value of its kind
    and range, and sit on an op that carries it: ``jaxpp.marker = "fwdx"``,
    ``jaxpp.marker = 1 : i64``, ``jaxpp.stage_name = 5 : i64`` or an unknown
    ``jaxpp.stagee`` is a located error naming the attribute (a marker of an unknown
    direction would otherwise be a plain barrier, and the stages would move). The
    passes after it read these attributes without checking them again.

    Precondition: none.
    Postcondition: the module is unchanged.
    """

    name = "jaxpp-check-attributes"

    def run(self, module: ir.Operation) -> Unchanged:
        for op in [module, *ir_utils.walk(module)]:
            attrs = op.attributes
            for name in attrs:  # the names; the values are looked up only for jaxpp's
                if name.startswith(attributes.PREFIX):
                    _refuse(op, attributes.problem(op.name, name, attrs[name]))
                elif name == FRONTEND_ATTRIBUTES and isinstance(attrs[name], ir.DictAttr):
                    for entry in attrs[name]:
                        if entry.name.startswith(attributes.PREFIX):
                            _refuse(
                                op, attributes.frontend_problem(op.name, entry.name, entry.attr)
                            )
        return UNCHANGED


def _refuse(op: ir.Operation, problem: str | None) -> None:
    if problem is not None:
        raise diagnostics.error(op, problem)
