"""The compiler side's one door to private or unstable JAX/jaxlib names.

Every use of ``jax._src``, of ``jaxlib`` internals or of a private attribute of
a JAX object by the passes, the frontend and the plan builder goes through a
function of this module; version branches live here and nowhere else. Each
function says what it replaces and the jax/jaxlib versions it was checked on.
Supported range: 0.10.2 to 0.12.x (checked: 0.10.2 on Python 3.11; 0.11.2 and
0.12.x on 3.12). The runtime has its own adapter (``runtime/_jax_compat.py``).
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from typing import Any

from jax._src import core as _core
from jax.interpreters.mlir import ir
from jaxlib.mlir import passmanager  # noqa: F401 (re-exported, see below)
from jaxlib.mlir.dialects import func, sdy, stablehlo  # noqa: F401 (re-exported, see below)

# ``passmanager``, ``func``, ``sdy``, ``stablehlo`` (the MLIR bindings' modules), and
# these two names: the very objects ``jax.extend.mlir.passmanager``,
# ``jax.extend.mlir.dialects`` and ``jax.extend.core`` re-export (0.10.2, 0.11.2, 0.12.x).
# Importing anything under ``jax.extend`` runs its package, which imports Pallas: about
# 20 ms of CPU in the first trace and partition, for nothing the library uses. ``ir`` has
# a public home that ``import jax`` loads already (``jax.interpreters.mlir``).

#: A JAX primitive (``jax.extend.core.Primitive``).
Primitive = _core.Primitive
#: ``jaxpr_as_fun(closed_jaxpr)``: a closed jaxpr as a function (``jax.extend.core``).
jaxpr_as_fun = _core.jaxpr_as_fun


def staged_call(jaxpr: Any) -> Callable[..., list[Any]]:
    """``jaxpr`` (``jax.make_jaxpr``'s) as a function that, while tracing, stages one call
    of it instead of replaying its equations one by one (a tenth less time tracing a
    step that ``treduce`` traced already; lowered as a ``func.call``, which
    jaxpp-inline-calls inlines: the partitioned program is the same).

    From jax 0.11 ``ClosedJaxpr`` is ``Jaxpr`` and ``jax._src.core.eval_jaxpr_p`` (the
    ``closed_call_p`` of ``jax.extend``) takes the jaxpr as a parameter: the jaxpr's
    consts (the tracers it closes over) become its leading arguments
    (``partial_eval.convert_constvars_jaxpr``; 0.11.2, 0.12.x). Before (0.10.2) the
    replay, ``jaxpr_as_fun``."""
    eval_jaxpr_p = getattr(_core, "eval_jaxpr_p", None)
    if eval_jaxpr_p is None or not isinstance(jaxpr, _core.Jaxpr) or not hasattr(jaxpr, "consts"):
        return jaxpr_as_fun(jaxpr)
    from jax._src.interpreters import partial_eval

    consts = list(jaxpr.consts)
    call_jaxpr = partial_eval.convert_constvars_jaxpr(jaxpr)

    def call(*args: Any) -> list[Any]:
        return eval_jaxpr_p.bind(*consts, *args, call_jaxpr=call_jaxpr)

    return call


def make_ir_context() -> ir.Context:
    """A context with func, stablehlo, chlo, sdy and mpmd registered, as JAX lowers into:
    ``jax._src.interpreters.mlir.make_ir_context()`` (no public equivalent; 0.10.2,
    0.11.2, 0.12.x)."""
    from jax._src.interpreters import mlir as jax_mlir

    return jax_mlir.make_ir_context()


def append_dialect_search_prefix(module_prefix: str) -> None:
    """Lets the MLIR bindings find Python op classes under ``module_prefix``:
    ``jaxlib.mlir._mlir_libs._mlir.globals.append_dialect_search_prefix`` (once per
    prefix; 0.10.2, 0.11.2, 0.12.x)."""
    from jaxlib.mlir._mlir_libs import _mlir

    if module_prefix not in _mlir.globals.dialect_search_modules:
        _mlir.globals.append_dialect_search_prefix(module_prefix)


def lowered_compile_args(lowered: Any) -> dict[str, Any]:
    """The compile arguments JAX keeps for a ``jax.stages.Lowered`` (``kept_var_idx``:
    the inputs the lowered module still takes): ``lowered._lowering.compile_args``
    (0.10.2, 0.11.2, 0.12.x); empty where the attribute is missing."""
    return getattr(getattr(lowered, "_lowering", None), "compile_args", None) or {}


def jaxlib_version() -> str:
    """The installed jaxlib version (``jaxlib.__version__``), read from the package's
    metadata so no jaxlib module is imported for it (0.10.2, 0.11.2, 0.12.x)."""
    try:
        return importlib.metadata.version("jaxlib")
    except importlib.metadata.PackageNotFoundError:
        import jax

        return jax.__version__


def ignore_locations_equivalence() -> Any | None:
    """``ir.OperationEquivalenceFlags.IGNORE_LOCATIONS``, for ``Operation.structural_hash``
    and ``Operation.is_structurally_equivalent`` (bound from jaxlib 0.11: 0.11.2, 0.12.x);
    None where the bindings lack them (0.10.2)."""
    flags = getattr(ir, "OperationEquivalenceFlags", None)
    if flags is None or not hasattr(ir.Operation, "is_structurally_equivalent"):
        return None
    return flags.IGNORE_LOCATIONS
