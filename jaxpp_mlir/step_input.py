"""What ``partition()`` reads: a lowered step, a module or MLIR text, as its own module.

``import_step`` makes a private copy of the input in jaxpp_mlir's context and, for a
``jax.stages.Lowered``, the pytree information (``program.TreeInfo``) that maps the
step's arguments and results onto the module's flat ones.
"""

from __future__ import annotations

from typing import Any

import jax
from jax.interpreters.mlir import ir

from jaxpp_mlir import ir_context
from jaxpp_mlir.program import TreeInfo


def import_step(x: Any) -> tuple[ir.Module, TreeInfo]:
    """A private copy of the input in jaxpp_mlir's context, plus pytree information."""
    tree_info = TreeInfo()
    lowered_by_jax = hasattr(x, "compiler_ir") and hasattr(x, "in_tree")
    if lowered_by_jax:
        tree_info = lowered_tree_info(x)
        x = x.compiler_ir("stablehlo")
    if isinstance(x, ir.Module):
        x = ir_context.bytecode(x)
    if not isinstance(x, (str, bytes)):
        raise TypeError(
            "partition() takes a jax.stages.Lowered, an ir.Module or MLIR text, "
            f"got {type(x).__name__}"
        )
    # JAX's own lowering nests as deep as the traced program, far below the limit.
    return ir_context.parse_module(x, check_depth=not lowered_by_jax), tree_info


def lowered_tree_info(lowered: Any) -> TreeInfo:
    """The pytrees, kept arguments and typed PRNG key outputs of a ``jax.stages.Lowered``."""
    in_tree = lowered.in_tree
    from jaxpp_mlir import _jax_compat
    from jaxpp_mlir.runtime import _jax_compat as runtime_jax_compat

    compile_args = _jax_compat.lowered_compile_args(lowered)
    kept = compile_args.get("kept_var_idx")
    kept_inputs = None
    if kept is not None and len(kept) != in_tree.num_leaves:
        kept_inputs = tuple(sorted(kept))
    out_dtypes = [leaf.dtype for leaf in jax.tree_util.tree_leaves(lowered.out_info)]
    key_impls = None
    if any(jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key) for dtype in out_dtypes):
        key_impls = tuple(
            runtime_jax_compat.prng_key_impl(dtype)
            if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)
            else None
            for dtype in out_dtypes
        )
    return TreeInfo(in_tree, lowered.out_tree, kept_inputs, key_impls)


def is_sharded(module: ir.Module) -> bool:
    """Whether the step was lowered with Shardy shardings (it holds an ``sdy.mesh``)."""
    return any(op.operation.name == "sdy.mesh" for op in module.body.operations)
