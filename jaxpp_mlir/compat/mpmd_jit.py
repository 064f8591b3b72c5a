"""``mpmd_jit_with_loop``: JaxPP's entry point as lower + partition + compile.

``MpmdJitted(fun, mpmd_mesh=...)`` behaves like ``jax.jit(fun)`` for a step
whose microbatch loop is a ``treduce``: ``lower(*args)`` lowers ``fun`` on the
mesh's lowering mesh (the mpmd axis of size 1) and partitions it,
``compile(*args)`` compiles that, and calling it compiles on first use and
keeps one compiled program per input signature (tree structure, shapes,
dtypes, weak types and partition specs), as ``jax.jit`` caches per signature.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from jaxpp_mlir.errors import CallError
from jaxpp_mlir.frontend.treduce import Concat, treduce_i
from jaxpp_mlir.mesh import MpmdMesh
from jaxpp_mlir.partition import partition
from jaxpp_mlir.program import CompiledProgram, PartitionedProgram

logger = logging.getLogger(__name__)


class MpmdLowered:
    """A lowered and partitioned step: ``compile()`` gives the runnable program."""

    def __init__(self, lowered: Any, program: PartitionedProgram):
        self.lowered = lowered  # the jax.stages.Lowered of the whole step
        self.program = program

    def as_text(self) -> str:
        return self.program.ir()

    def compile(self) -> CompiledProgram:
        return self.program.compile()


class MpmdJitted:
    """``fun`` pipelined over ``mpmd_mesh``; see the module docstring."""

    def __init__(
        self,
        fun: Callable[..., Any],
        *,
        mpmd_mesh: MpmdMesh,
        in_specs: Any = None,
        out_specs: Any = None,
        in_shardings: Any = None,
        out_shardings: Any = None,
        donate_argnums: int | Sequence[int] = (),
        schedule: Any = None,
    ):
        if not isinstance(mpmd_mesh, MpmdMesh):
            raise TypeError(f"mpmd_mesh must be a jaxpp_mlir MpmdMesh, got {type(mpmd_mesh)}")
        if in_specs is not None and in_shardings is not None:
            raise ValueError("give in_specs or in_shardings, not both")
        if out_specs is not None and out_shardings is not None:
            raise ValueError("give out_specs or out_shardings, not both")
        self.fun = fun
        self.mpmd_mesh = mpmd_mesh
        lowering = mpmd_mesh.lowering_mesh()
        self._in_shardings = _on_mesh(in_specs if in_specs is not None else in_shardings, lowering)
        self._out_shardings = _on_mesh(
            out_specs if out_specs is not None else out_shardings, lowering
        )
        self._donate_argnums = donate_argnums
        self._schedule = schedule
        self._compiled: dict[Any, CompiledProgram] = {}

    def lower(self, *args: Any, **kwargs: Any) -> MpmdLowered:
        jit_kwargs: dict[str, Any] = {"donate_argnums": self._donate_argnums}
        if self._in_shardings is not None:
            jit_kwargs["in_shardings"] = self._in_shardings
        if self._out_shardings is not None:
            jit_kwargs["out_shardings"] = self._out_shardings
        abstract = jax.tree_util.tree_map(self._abstract, (args, kwargs))
        # Bare PartitionSpecs in the step (with_sharding_constraint) refer to the lowering mesh.
        with jax.set_mesh(self.mpmd_mesh.lowering_mesh()):
            lowered = jax.jit(self.fun, **jit_kwargs).lower(*abstract[0], **abstract[1])
        program = partition(lowered, mesh=self.mpmd_mesh, schedule=self._schedule)
        return MpmdLowered(lowered, program)

    def compile(self, *args: Any, **kwargs: Any) -> CompiledProgram:
        return self.lower(*args, **kwargs).compile()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        key = _signature((args, kwargs))
        compiled = self._compiled.get(key)
        if compiled is None:
            logger.info("mpmd_jit: compiling %s for a new input signature", _name(self.fun))
            compiled = self._compiled[key] = self.compile(*args, **kwargs)
        return compiled(*args, **kwargs)

    def _abstract(self, leaf: Any) -> Any:
        """``leaf`` as lowering sees it: arrays by shape, dtype and spec on the lowering mesh."""
        if not hasattr(leaf, "shape") or not hasattr(leaf, "dtype"):
            return leaf  # Python scalars stay weakly typed, as under jax.jit
        sharding = None
        spec = _sharding_spec(leaf)
        if self._in_shardings is None and spec is not None:
            sharding = NamedSharding(self.mpmd_mesh.lowering_mesh(), spec)
        return jax.ShapeDtypeStruct(
            leaf.shape,
            leaf.dtype,
            sharding=sharding,
            weak_type=bool(getattr(leaf, "weak_type", False)),
        )

    def __repr__(self) -> str:
        return f"mpmd_jit_with_loop({_name(self.fun)}, mpmd_mesh={self.mpmd_mesh!r})"


def mpmd_jit_with_loop(
    fun: Callable[..., Any] | None = None,
    *,
    mpmd_mesh: MpmdMesh,
    in_specs: Any = None,
    out_specs: Any = None,
    in_shardings: Any = None,
    out_shardings: Any = None,
    donate_argnums: int | Sequence[int] = (),
) -> Any:
    """JaxPP's ``mpmd_jit_with_loop``: ``fun`` (a step with one ``treduce``) pipelined.

    Usable as ``mpmd_jit_with_loop(fun, mpmd_mesh=m)`` or as a decorator through
    ``functools.partial(mpmd_jit_with_loop, mpmd_mesh=m)``. ``in_specs`` /
    ``out_specs`` are ``PartitionSpec`` pytrees over the lowering mesh's axes;
    ``in_shardings`` / ``out_shardings`` may be specs or ``NamedSharding``s
    (their specs are used on the lowering mesh).
    """
    options = dict(
        mpmd_mesh=mpmd_mesh,
        in_specs=in_specs,
        out_specs=out_specs,
        in_shardings=in_shardings,
        out_shardings=out_shardings,
        donate_argnums=donate_argnums,
    )
    if fun is None:
        return lambda f: MpmdJitted(f, **options)
    return MpmdJitted(fun, **options)


def mpmd_jit_by_yield(
    fun: Callable[..., Any] | None = None,
    *,
    mpmd_mesh: MpmdMesh,
    in_specs: Any = None,
    out_specs: Any = None,
    in_shardings: Any = None,
    out_shardings: Any = None,
    donate_argnums: int | Sequence[int] = (),
) -> Any:
    """JaxPP's ``mpmd_jit_by_yield``: a step without ``treduce``, its stages marked.

    The whole call is one microbatch: ``fun`` runs inside a one-iteration
    ``treduce_i`` whose results are stacked and unstacked (exact), so the
    stages run on their ranks and ``fun``'s results come out unchanged.
    """

    def wrap(f: Callable[..., Any]) -> MpmdJitted:
        def one_microbatch(*args: Any, **kwargs: Any) -> Any:
            stacked = treduce_i(lambda _: f(*args, **kwargs), 1, operation=Concat())
            return jax.tree_util.tree_map(lambda x: x[0], stacked)

        one_microbatch.__name__ = _name(f)
        return MpmdJitted(
            one_microbatch,
            mpmd_mesh=mpmd_mesh,
            in_specs=in_specs,
            out_specs=out_specs,
            in_shardings=in_shardings,
            out_shardings=out_shardings,
            donate_argnums=donate_argnums,
        )

    return wrap if fun is None else wrap(fun)


def _on_mesh(tree: Any, mesh: jax.sharding.Mesh) -> Any:
    """Specs and named shardings of ``tree`` as ``NamedSharding``s on ``mesh``."""
    if tree is None:
        return None

    def convert(leaf: Any) -> Any:
        if leaf is None:
            return None
        if isinstance(leaf, PartitionSpec):
            return NamedSharding(mesh, leaf)
        if isinstance(leaf, NamedSharding):
            return NamedSharding(mesh, leaf.spec)
        raise CallError(
            f"in/out shardings must be PartitionSpecs or NamedShardings, got {type(leaf)}"
        )

    return jax.tree_util.tree_map(
        convert, tree, is_leaf=lambda x: x is None or isinstance(x, PartitionSpec | NamedSharding)
    )


def _signature(tree: Any) -> Any:
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    return treedef, tuple(_leaf_signature(leaf) for leaf in leaves)


def _leaf_signature(leaf: Any) -> Any:
    if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
        return (
            tuple(leaf.shape),
            np.dtype(leaf.dtype),
            bool(getattr(leaf, "weak_type", False)),
            _sharding_spec(leaf),
        )
    return (type(leaf),)


def _sharding_spec(leaf: Any) -> PartitionSpec | None:
    """The leaf's ``PartitionSpec``; None when it has none or shards no axis (replicated
    lowers the same as unspecified, so a step's replicated outputs reuse its program)."""
    spec = getattr(getattr(leaf, "sharding", None), "spec", None)
    if not isinstance(spec, PartitionSpec) or all(axis is None for axis in spec):
        return None
    return spec


def _name(fun: Callable[..., Any]) -> str:
    return getattr(fun, "__name__", type(fun).__name__)
