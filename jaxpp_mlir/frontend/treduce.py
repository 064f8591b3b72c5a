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
``stablehlo.optimization_barrier {jaxpp.marker = "loop"}`` on the counter, and
only the marked counter is used afterwards: every microbatch slice
(``dynamic_slice``) and every ``Concat`` update reads it, so the marker is
never dead code while the body's result depends on the microbatch (when it
does not, and no ``Concat`` reads the counter, JAX drops the marker and
``treduce`` warns). JAX lowers the loop body as a ``func.call`` of a private
``@closed_call...`` function: the marker is in that function, its operand is
the argument bound to the ``fori_loop`` counter (a ``tensor<i32>`` iteration
argument of the while, next to the while's own trip counter). Its attributes
record ``jaxpp.num_microbatches``, ``jaxpp.schedule`` (absent for none, see
below) and ``jaxpp.reductions`` (one entry per result leaf, see
:mod:`jaxpp_mlir.dialect.ops`). Under plain ``jax.jit`` the barrier needs no
handler: XLA compiles it on every platform.

Schedules
---------
``schedule`` is a schedule object (``Std1F1B(4)``, ``AutoFused`` of one, a
``CustomSchedule``) or a built-in schedule's name (``"GPipe"``, completed with the
stage count by jaxpp-choose-stages), recorded as a dictionary attribute
(``{kind = "Std1F1B", num_stages = 4 : i64}``) that ``schedules.record``, beside the
schedule registry, decodes. Any other text is a ``TreduceError`` when traced.

Autodiff: the marker is an identity on an integer, so its tangent is a symbolic
zero and it never appears in a backward pass. ``treduce`` of a function that
calls ``jax.value_and_grad`` (the training-step shape) stays one loop; but
``jax.grad`` of a function *containing* ``treduce`` differentiates the loop
itself, which JAX lowers to two ``stablehlo.while`` loops (forward, then
backward), the marker being in the forward one only.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.interpreters import partial_eval as pe

from jaxpp_mlir._jax_compat import staged_call
from jaxpp_mlir.frontend.loop_marker import ScheduleParam, loop_marker_p
from jaxpp_mlir.frontend.markers import recording_markers
from jaxpp_mlir.frontend.reductions import (
    Add,
    AddOp,
    Concat,
    Max,
    MaxOp,
    ReduceOp,
    TreduceError,
    _resolve_operations,
)
from jaxpp_mlir.runtime.host_heap import collector_paused

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


# ------------------------------------------------------------------ the loop


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
    # Tracing a model's forward and backward allocates like partitioning does (see
    # host_heap): the cyclic collector waits until the loop is built.
    with collector_paused():
        return _treduce_i(fun, length, schedule, operation)


def _treduce_i(fun: Callable[[jax.Array], Y], length: int, schedule: Any, operation: Any) -> Y:
    index_struct = jax.ShapeDtypeStruct((), INDEX_DTYPE)
    with recording_markers() as stage_markers:
        jaxpr, out_shape = jax.make_jaxpr(fun, return_shape=True)(index_struct)
    out_tree = jax.tree_util.tree_structure(out_shape)
    ops = _resolve_operations(operation, out_shape)
    _warn_if_marker_is_dead(jaxpr, ops)
    # The traced result types (jaxpr.out_avals) carry explicit sharding-in-types; the
    # ShapeDtypeStructs of out_shape do not on a mesh with Auto axes.
    result_types = jaxpr.out_avals
    init = [op.init(length, aval) for op, aval in zip(ops, result_types, strict=True)]
    params = {
        "num_microbatches": length,
        "schedule": ScheduleParam.of(schedule, length),
        "reductions": tuple(op.tag for op in ops),
        "stage_markers": tuple(stage_markers),
    }

    run_fun = staged_call(jaxpr)

    def body(i: jax.Array, state: list[jax.Array]) -> list[jax.Array]:
        index = loop_marker_p.bind(i, **params)
        # fun as traced above, staged as one call (or replayed op by op, with its source
        # locations, where jax cannot): tracing fun a second time would cost as much as
        # the first trace (a model's forward and backward), a large part of lowering.
        # Python scalars become weakly typed arrays, as jax.jit treats them.
        leaves = [jnp.asarray(r) for r in run_fun(index)]
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

    ``schedule`` (a schedule, a built-in schedule's name or None; see the module
    docstring) is only recorded on the loop marker for the pipeline passes; it does
    not change the numbers. Under plain ``jax.jit`` or eagerly, ``treduce`` computes
    what the equivalent sequential loop computes, in the same order.

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
