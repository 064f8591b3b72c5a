"""The microbatch loop: ``treduce`` and its loop marker.

``treduce(fun, xs, schedule, axis, operation)`` has NVIDIA JaxPP's meaning: it
applies ``fun`` to every microbatch ``jnp.take(x, i, axis)`` (taken from every
leaf ``x`` of ``xs`` at once) for ``i`` in ``range(num_microbatches)`` and
combines the per-microbatch results with ``operation``::

    state = [op.init(num_microbatches, leaf) for each result leaf]
    for i in range(num_microbatches):
        state = [op.update(s, leaf_i, i) for each result leaf]

Reductions (``operation``)
--------------------------
``Add``
    Elementwise sum. The accumulator starts at zeros and microbatch results are
    added in order: ``((0 + r0) + r1) + ...``.
``Max``
    Elementwise maximum. The accumulator starts at ``-inf`` (floats), the
    smallest value (integers) or ``False`` (booleans).
``Concat(axis=0)``
    Stacks the results: the result gets a NEW axis of size
    ``num_microbatches`` inserted at position ``axis`` (like ``jnp.stack(rs,
    axis)``; ``Concat(0)`` gives ``lax.scan``'s ``ys`` layout). This is
    JaxPP's ``Concat``, not ``jnp.concatenate``.

``operation`` is one reduction (applied to every result leaf) or a pytree of
reductions that is a prefix of the result's structure: each reduction applies
to every leaf of the corresponding subtree. ``Add`` and ``Max`` are singleton
instances; the classes (``AddOp``, ``MaxOp``, ``Concat``) are accepted too and
instantiated with their defaults. The default, like JaxPP's ``(Concat(), Add)``,
is ``(Concat(), Add)`` when ``fun`` returns a 2-tuple (a per-microbatch loss or
aux value stacked, gradients summed), and ``Add`` for every leaf otherwise.

Lowering
--------
The loop is a ``lax.fori_loop`` over the microbatch index with static bounds,
so it lowers to ONE ``stablehlo.while`` (and is reverse-differentiable). At the
top of the body, the loop counter goes through the loop marker, a
``stablehlo.custom_call @jaxpp.loop_marker`` that is the identity on the
counter, and only the marked counter is used afterwards: every microbatch
slice (``dynamic_slice``) and every ``Concat`` update reads it, so the marker is
never dead code while the body's result depends on the microbatch (when it
does not, and no ``Concat`` reads the counter, JAX drops the marker and
``treduce`` warns). JAX lowers the loop body as a ``func.call`` of a private
``@closed_call...`` function: the marker is in that function, its operand is
the argument bound to the ``fori_loop`` counter (a ``tensor<i32>`` iteration
argument of the while, next to the while's own trip counter). Its
``mhlo.frontend_attributes`` record ``jaxpp.num_microbatches``,
``jaxpp.schedule`` (the schedule's ``repr``, ``""`` for none) and
``jaxpp.reductions`` (one entry per result leaf, see
:mod:`jaxpp_mlir.dialect.ops`). Under plain ``jax.jit`` the custom call runs as
the no-op FFI handler of :mod:`jaxpp_mlir.frontend.marker_ffi`.

Autodiff: the marker is an identity on an integer, so its tangent is a symbolic
zero and it never appears in a backward pass. ``treduce`` of a function that
calls ``jax.value_and_grad`` (the training-step shape) stays one loop; but
``jax.grad`` of a function *containing* ``treduce`` differentiates the loop
itself, which JAX lowers to two ``stablehlo.while`` loops (forward, then
backward), the marker being in the forward one only.
"""

from __future__ import annotations

import abc
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend.core import Primitive
from jax.extend.mlir import ir
from jax.extend.mlir.dialects import stablehlo
from jax.interpreters import ad, batching, mlir
from jax.interpreters import partial_eval as pe

from jaxpp_mlir.dialect.ops import (
    FRONTEND_ATTRIBUTES,
    LOOP_MARKER_TARGET,
    LOOP_NUM_MICROBATCHES_ATTR,
    LOOP_REDUCTIONS_ATTR,
    LOOP_SCHEDULE_ATTR,
    LOOP_STAGE_MARKERS_ATTR,
)
from jaxpp_mlir.errors import MarkerError
from jaxpp_mlir.frontend import marker_ffi
from jaxpp_mlir.frontend.markers import _identity_sharding_rule, recording_markers

__all__ = [
    "Add",
    "AddOp",
    "Concat",
    "Max",
    "MaxOp",
    "ReduceOp",
    "TreduceError",
    "loop_marker_p",
    "treduce",
    "treduce_i",
]

X = TypeVar("X")
Y = TypeVar("Y")

#: The dtype of the microbatch counter the loop marker sees.
INDEX_DTYPE = np.int32

_SHARDING_RULE_ATTR = "sdy.sharding_rule"


class TreduceError(MarkerError, ValueError):
    """``treduce`` was given inputs it cannot loop over (also a ``ValueError``)."""


# --------------------------------------------------------------- reductions


class ReduceOp(abc.ABC):
    """How the per-microbatch values of one result leaf are combined."""

    @property
    @abc.abstractmethod
    def tag(self) -> str:
        """The name recorded in the loop marker's ``jaxpp.reductions``."""

    @abc.abstractmethod
    def init(self, num_microbatches: int, value: jax.ShapeDtypeStruct) -> jax.Array:
        """The accumulator before the first microbatch, for a result shaped like ``value``."""

    @abc.abstractmethod
    def update(self, state: jax.Array, value: jax.Array, index: jax.Array) -> jax.Array:
        """The accumulator after folding in ``value``, the result of microbatch ``index``."""


@dataclass(frozen=True)
class AddOp(ReduceOp):
    """Elementwise sum over microbatches, in microbatch order, from zeros."""

    @property
    def tag(self) -> str:
        return "add"

    def init(self, num_microbatches: int, value: jax.ShapeDtypeStruct) -> jax.Array:
        if np.dtype(value.dtype) == np.bool_:
            raise TreduceError(
                "Add cannot sum boolean results: use Max (any microbatch) or Concat(), or "
                "return them as integers"
            )
        return jnp.zeros(value.shape, value.dtype)

    def update(self, state: jax.Array, value: jax.Array, index: jax.Array) -> jax.Array:
        return lax.add(state, value)

    def __repr__(self) -> str:
        return "Add"


@dataclass(frozen=True)
class MaxOp(ReduceOp):
    """Elementwise maximum over microbatches."""

    @property
    def tag(self) -> str:
        return "max"

    def init(self, num_microbatches: int, value: jax.ShapeDtypeStruct) -> jax.Array:
        dtype = np.dtype(value.dtype)
        if dtype == np.bool_:
            lowest: Any = False
        elif jnp.issubdtype(dtype, jnp.integer):
            lowest = jnp.iinfo(dtype).min
        elif jnp.issubdtype(dtype, jnp.floating):
            lowest = -np.inf
        else:
            raise TreduceError(f"Max cannot reduce results of dtype {dtype}")
        return jnp.full(value.shape, lowest, dtype)

    def update(self, state: jax.Array, value: jax.Array, index: jax.Array) -> jax.Array:
        return lax.max(state, value)

    def __repr__(self) -> str:
        return "Max"


@dataclass(frozen=True)
class Concat(ReduceOp):
    """Stacks the per-microbatch results along a new axis ``axis`` of the result.

    A result of shape ``s`` becomes ``s[:axis] + (num_microbatches,) + s[axis:]``,
    as ``jnp.stack(results, axis)`` would give. ``axis`` may be negative
    (counted on the stacked result, so ``-1`` appends a trailing axis).
    """

    axis: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.axis, bool) or not isinstance(self.axis, int | np.integer):
            raise TreduceError(f"Concat axis must be an int, got {self.axis!r}")

    @property
    def tag(self) -> str:
        return f"concat({self.axis})"

    def _axis(self, ndim: int) -> int:
        """The new axis' position in a stacked result of rank ``ndim + 1``."""
        axis = int(self.axis)
        if not -(ndim + 1) <= axis <= ndim:
            raise TreduceError(
                f"Concat(axis={axis}) is out of range for a result of rank {ndim} "
                f"(the stacked result has rank {ndim + 1})"
            )
        return axis % (ndim + 1)

    def init(self, num_microbatches: int, value: jax.ShapeDtypeStruct) -> jax.Array:
        axis = self._axis(len(value.shape))
        shape = (*value.shape[:axis], num_microbatches, *value.shape[axis:])
        return jnp.zeros(shape, value.dtype)

    def update(self, state: jax.Array, value: jax.Array, index: jax.Array) -> jax.Array:
        axis = self._axis(value.ndim)
        return lax.dynamic_update_index_in_dim(state, value, index, axis)


#: Elementwise sum (a singleton; ``AddOp()`` is equal to it).
Add = AddOp()
#: Elementwise maximum (a singleton; ``MaxOp()`` is equal to it).
Max = MaxOp()


def _is_op_leaf(x: Any) -> bool:
    return isinstance(x, ReduceOp) or (isinstance(x, type) and issubclass(x, ReduceOp))


def _as_op(x: Any) -> ReduceOp:
    if isinstance(x, ReduceOp):
        return x
    if isinstance(x, type) and issubclass(x, ReduceOp):
        if getattr(x, "__abstractmethods__", None):
            raise TreduceError(f"{x.__name__} is abstract; use Add, Max or Concat(axis)")
        return x()
    raise TreduceError(f"operation leaves must be Add, Max or Concat(axis) (a ReduceOp), got {x!r}")


def _default_operation(out_shape: Any) -> Any:
    if type(out_shape) is tuple and len(out_shape) == 2:
        return (Concat(), Add)
    return Add


def _resolve_operations(operation: Any, out_shape: Any) -> list[ReduceOp]:
    """One reduction per leaf of ``out_shape``, broadcasting ``operation`` as a prefix tree."""
    if operation is None:
        operation = _default_operation(out_shape)
    op_leaves, op_tree = jax.tree_util.tree_flatten(operation, is_leaf=_is_op_leaf)
    ops = [_as_op(op) for op in op_leaves]
    try:
        subtrees = op_tree.flatten_up_to(out_shape)
    except (ValueError, TypeError) as exc:
        raise TreduceError(
            f"operation {operation!r} does not match the structure of fun's result "
            f"{jax.tree_util.tree_structure(out_shape)}: it must be one reduction or a "
            f"pytree of reductions that is a prefix of the result ({exc})"
        ) from None
    per_leaf: list[ReduceOp] = []
    for op, subtree in zip(ops, subtrees, strict=True):
        per_leaf.extend([op] * len(jax.tree_util.tree_leaves(subtree)))
    return per_leaf


# -------------------------------------------------------------- loop marker

loop_marker_p = Primitive("jaxpp_loop_marker")


def _check_params(
    num_microbatches: int,
    schedule: str,
    reductions: tuple[str, ...],
    stage_markers: tuple[str, ...] = (),
) -> None:
    if not isinstance(num_microbatches, int) or num_microbatches < 1:
        raise TreduceError(f"num_microbatches must be an int >= 1, got {num_microbatches!r}")
    if not isinstance(schedule, str) or not isinstance(reductions, tuple):
        raise TreduceError("loop marker params: schedule must be a str, reductions a tuple")
    if not isinstance(stage_markers, tuple):
        raise TreduceError("loop marker params: stage_markers must be a tuple")


def loop_marker(
    index: jax.Array, *, num_microbatches: int, schedule: str = "", reductions: Sequence[str] = ()
) -> jax.Array:
    """The identity on ``index`` (the microbatch counter), marking the microbatch loop."""
    return loop_marker_p.bind(
        index,
        num_microbatches=int(num_microbatches),
        schedule=schedule,
        reductions=tuple(reductions),
    )


def _impl(x: jax.Array, **params: Any) -> jax.Array:
    _check_params(**params)
    return x


def _abstract_eval(aval: Any, **params: Any) -> Any:
    _check_params(**params)
    return aval


def _lowering(
    ctx: mlir.LoweringRuleContext,
    x: ir.Value,
    *,
    num_microbatches: int,
    schedule: str,
    reductions: tuple[str, ...],
    stage_markers: tuple[str, ...] = (),
) -> Sequence[ir.Value]:
    marker_ffi.ensure_registered()
    (aval_out,) = ctx.avals_out
    result_type = mlir.aval_to_ir_type(ctx.module_context, aval_out)
    alias = stablehlo.OutputOperandAlias.get(
        output_tuple_indices=[], operand_index=0, operand_tuple_indices=[]
    )
    op = stablehlo.CustomCallOp(
        [result_type],
        [x],
        call_target_name=LOOP_MARKER_TARGET,
        has_side_effect=False,
        backend_config=ir.DictAttr.get({}),
        api_version=mlir.i32_attr(4),
        output_operand_aliases=ir.ArrayAttr.get([alias]),
    )
    op.attributes[FRONTEND_ATTRIBUTES] = ir.DictAttr.get(
        {
            LOOP_NUM_MICROBATCHES_ATTR: ir.StringAttr.get(str(num_microbatches)),
            LOOP_SCHEDULE_ATTR: ir.StringAttr.get(schedule),
            LOOP_REDUCTIONS_ATTR: ir.StringAttr.get(",".join(reductions)),
            LOOP_STAGE_MARKERS_ATTR: ir.StringAttr.get("\n".join(stage_markers)),
        }
    )
    if jax.config.jax_use_shardy_partitioner:
        rule = _identity_sharding_rule([result_type])
        if rule is not None:
            op.attributes[_SHARDING_RULE_ATTR] = rule
    return op.results


def _jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[Any, Any]:
    # Identity: the tangent passes through unmarked (it is a symbolic zero for
    # the integer counter), so the marker never enters a backward pass.
    (x,) = primals
    (t,) = tangents
    return loop_marker_p.bind(x, **params), t


def _transpose(ct: Any, x: Any, **params: Any) -> list[Any]:
    return [ct]


def _batch(args: Sequence[Any], dims: Sequence[Any], **params: Any) -> tuple[Any, Any]:
    (x,) = args
    (d,) = dims
    return loop_marker_p.bind(x, **params), d


loop_marker_p.def_impl(_impl)
loop_marker_p.def_abstract_eval(_abstract_eval)
mlir.register_lowering(loop_marker_p, _lowering)
ad.primitive_jvps[loop_marker_p] = _jvp
ad.primitive_transposes[loop_marker_p] = _transpose
batching.primitive_batchers[loop_marker_p] = _batch


# ------------------------------------------------------------------ the loop


def _schedule_tag(schedule: Any) -> str:
    if schedule is None:
        return ""
    if isinstance(schedule, str):
        return schedule
    return repr(schedule)


def _warn_if_marker_is_dead(jaxpr: Any, ops: Sequence[ReduceOp]) -> None:
    """Warns when nothing live reads the marked counter, so JAX will drop the marker."""
    if any(isinstance(op, Concat) for op in ops):
        return  # Concat's update reads the counter.
    _, used = pe.dce_jaxpr(jaxpr.jaxpr, [True] * len(jaxpr.jaxpr.outvars))
    if not any(used):
        warnings.warn(
            "treduce: fun's result does not depend on its microbatch (or index), so the "
            "loop marker is dead code and will be removed: the loop still computes the "
            "right numbers under jax.jit but cannot be recognised as the microbatch loop",
            RuntimeWarning,
            stacklevel=3,
        )


def treduce_i(
    fun: Callable[[jax.Array], Y],
    length: int,
    schedule: Any = None,
    operation: Any = None,
) -> Y:
    """Reduces ``fun(i)`` over ``i in range(length)`` in one marked microbatch loop.

    The lower-level form of :func:`treduce`: ``fun`` receives the (marked)
    ``int32`` microbatch index instead of a microbatch. ``schedule`` and
    ``operation`` are as in :func:`treduce`.
    """
    if isinstance(length, bool) or not isinstance(length, int | np.integer):
        raise TreduceError(f"the number of microbatches must be a static int, got {length!r}")
    length = int(length)
    if length < 1:
        raise TreduceError(f"treduce needs at least one microbatch, got {length}")
    index_struct = jax.ShapeDtypeStruct((), INDEX_DTYPE)
    with recording_markers() as stage_markers:
        jaxpr, out_shape = jax.make_jaxpr(fun, return_shape=True)(index_struct)
    out_leaves, out_tree = jax.tree_util.tree_flatten(out_shape)
    ops = _resolve_operations(operation, out_shape)
    _warn_if_marker_is_dead(jaxpr, ops)
    init = [op.init(length, leaf) for op, leaf in zip(ops, out_leaves, strict=True)]
    params = {
        "num_microbatches": length,
        "schedule": _schedule_tag(schedule),
        "reductions": tuple(op.tag for op in ops),
        "stage_markers": tuple(stage_markers),
    }

    def body(i: jax.Array, state: list[jax.Array]) -> list[jax.Array]:
        index = loop_marker_p.bind(i, **params)
        result = fun(index)
        leaves = out_tree.flatten_up_to(result)
        return [op.update(s, r, index) for op, s, r in zip(ops, state, leaves, strict=True)]

    final = lax.fori_loop(INDEX_DTYPE(0), INDEX_DTYPE(length), body, init)
    return jax.tree_util.tree_unflatten(out_tree, final)


def treduce(
    fun: Callable[[X], Y],
    xs: X,
    schedule: Any = None,
    axis: int = 0,
    operation: Any = None,
) -> Y:
    """Applies ``fun`` to every microbatch of ``xs`` and reduces the results.

    Microbatch ``i`` is the pytree ``xs`` with every leaf ``x`` replaced by
    ``jnp.take(x, i, axis)``; every leaf must have the same size along ``axis``
    (negative ``axis`` counts from each leaf's last axis), which is the number
    of microbatches. The per-microbatch results are combined leaf by leaf with
    ``operation`` (see the module docstring): one of ``Add``, ``Max``,
    ``Concat(axis)``, or a pytree of them that is a prefix of the result's
    structure. ``None`` (the default) means ``(Concat(), Add)`` when ``fun``
    returns a 2-tuple, else ``Add``.

    ``schedule`` (a :class:`jaxpp_mlir.schedules.Schedule`, a name or None) is
    only recorded on the loop marker for the pipeline passes; it does not change
    the numbers. Under plain ``jax.jit`` or eagerly, ``treduce`` computes what
    the equivalent sequential loop computes, in the same order.

    The usual training step::

        losses, grads = treduce(
            lambda mb: jax.value_and_grad(loss)(params, mb), batch,
            operation=(Concat(), Add),
        )

    Raises:
      TreduceError: ``xs`` has no leaves, a scalar leaf, an ``axis`` out of
        range, leaves whose sizes along ``axis`` differ, zero microbatches, or
        an ``operation`` that does not fit the result.
    """
    if isinstance(axis, bool) or not isinstance(axis, int | np.integer):
        raise TreduceError(f"treduce axis must be an int, got {axis!r}")
    axis = int(axis)
    path_leaves, treedef = jax.tree_util.tree_flatten_with_path(xs)
    if not path_leaves:
        raise TreduceError("treduce: xs has no array leaves, so there is no microbatch count")
    arrays: list[jax.Array] = []
    axes: list[int] = []
    sizes: list[tuple[str, int]] = []
    for path, leaf in path_leaves:
        name = "xs" + jax.tree_util.keystr(path)
        array = jnp.asarray(leaf)
        if not -array.ndim <= axis < array.ndim:
            raise TreduceError(
                f"treduce: axis {axis} is out of range for {name} of shape {array.shape}"
            )
        leaf_axis = axis % array.ndim
        arrays.append(array)
        axes.append(leaf_axis)
        sizes.append((name, array.shape[leaf_axis]))
    distinct = {size for _, size in sizes}
    if len(distinct) != 1:
        listing = ", ".join(f"{name}: {size}" for name, size in sizes)
        raise TreduceError(
            f"treduce: every leaf of xs must have the same size along axis {axis} (the "
            f"number of microbatches), got {listing}"
        )
    (num_microbatches,) = distinct

    def at(i: jax.Array) -> Y:
        microbatch = [
            lax.dynamic_index_in_dim(a, i, ax, keepdims=False)
            for a, ax in zip(arrays, axes, strict=True)
        ]
        return fun(jax.tree_util.tree_unflatten(treedef, microbatch))

    return treduce_i(at, num_microbatches, schedule=schedule, operation=operation)
