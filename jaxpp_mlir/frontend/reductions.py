"""The reductions ``treduce`` combines microbatch results with: ``Add``, ``Max``, ``Concat``."""

from __future__ import annotations

import abc
import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jaxpp_mlir.errors import MarkerError
from jaxpp_mlir.runtime import records


class TreduceError(MarkerError, ValueError):
    """``treduce`` was given inputs it cannot loop over (also a ``ValueError``)."""


class ReduceOp(abc.ABC):
    """How the per-microbatch values of one result leaf are combined.

    ``init`` gets the type of one microbatch's result (a ``jax.ShapeDtypeStruct`` or
    the traced value's aval): where that type carries a sharding (JAX's explicit
    sharding mode), the accumulator gets the same sharding-in-types, so the loop's
    carry keeps one type from the first microbatch to the last.
    """

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


@records.frozen
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
        return _typed(functools.partial(jnp.zeros, value.shape, value.dtype), _sharding_of(value))

    def update(self, state: jax.Array, value: jax.Array, index: jax.Array) -> jax.Array:
        return lax.add(state, value)

    def __repr__(self) -> str:
        return "Add"


@records.frozen
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
        return _typed(functools.partial(jnp.full, value.shape, lowest, dtype), _sharding_of(value))

    def update(self, state: jax.Array, value: jax.Array, index: jax.Array) -> jax.Array:
        return lax.max(state, value)

    def __repr__(self) -> str:
        return "Max"


@records.frozen
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
        sharding = _sharding_of(value)
        if sharding is not None:  # the stacked axis is not sharded
            spec = _padded_spec(sharding.spec, len(value.shape))
            sharding = NamedSharding(sharding.mesh, P(*spec[:axis], None, *spec[axis:]))
        return _typed(functools.partial(jnp.zeros, shape, value.dtype), sharding)

    def update(self, state: jax.Array, value: jax.Array, index: jax.Array) -> jax.Array:
        axis = self._axis(value.ndim)
        return lax.dynamic_update_index_in_dim(state, value, index, axis)


def _sharding_of(value: Any) -> NamedSharding | None:
    """The sharding in ``value``'s type (JAX's sharding-in-types), None where it has none.

    A traced value's aval always has one, over the abstract mesh its inputs were
    typed on (empty without a mesh); it names only the mesh's Explicit axes, so on
    an Auto mesh the accumulator is left unconstrained, as on no mesh at all.
    """
    sharding = getattr(value, "sharding", None)
    if not isinstance(sharding, NamedSharding) or sharding.mesh.empty:
        return None
    return sharding


def _typed(create: Callable[..., jax.Array], sharding: NamedSharding | None) -> jax.Array:
    """``create()``, or ``create(out_sharding=sharding)`` typed with ``sharding``.

    The sharding's abstract mesh is entered for the call: the step may be traced with
    no mesh in context (shardings passed to ``jax.jit``, its values typed on their own
    mesh), where jax 0.12 types an ``out_sharding`` result as unsharded on no mesh
    (0.10.2 keeps the sharding), unlike the values the loop adds into it.
    """
    if sharding is None:
        return create()
    with jax.sharding.use_abstract_mesh(sharding.mesh.abstract_mesh):
        return create(out_sharding=sharding)


def _padded_spec(spec: P, ndim: int) -> tuple[Any, ...]:
    return (*spec, *([None] * (ndim - len(spec))))


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
