"""``mpmd_jit_with_loop``: JaxPP's entry point as lower + partition + compile.

``MpmdJitted(fun, mpmd_mesh=...)`` behaves like ``jax.jit(fun)`` for a step
whose microbatch loop is a ``treduce``: ``lower(*args)`` lowers ``fun`` on the
mesh's lowering mesh (the mpmd axis of size 1) and partitions it,
``compile(*args)`` compiles that, and calling it compiles on first use and
keeps one compiled program per input signature (tree structure, shapes,
dtypes, weak types and partition specs), as ``jax.jit`` caches per signature.
Specs may name the mpmd axis (JaxPP's SPMD initialisation shards over it too):
it has size 1 in the lowering mesh and is dropped. Arguments may be ``MpmdArray``s.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from jaxpp_mlir.compat.arrays import (
    MpmdArray,
    MpmdSharding,
    as_jax_array,
    as_mpmd_arrays,
    check_mpmd_mesh,
)
from jaxpp_mlir.errors import CallError, MarkerError
from jaxpp_mlir.frontend.treduce import Concat, treduce_i
from jaxpp_mlir.mesh import MpmdMesh, filter_axes
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

    def compile(self) -> MpmdCompiled:
        return MpmdCompiled(self.program.compile())


class MpmdCompiled:
    """A compiled step as JaxPP's: takes ``MpmdArray``s, returns them, tells ``in_shardings``.

    Everything else is the ``CompiledProgram``'s (``placement``, ``gather``, ``program``).
    """

    def __init__(self, compiled: CompiledProgram):
        self.compiled = compiled

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The step's outputs as ``MpmdArray``s (as JaxPP returns them)."""
        args, kwargs = _plain_arrays((args, kwargs))
        program = self.compiled.program
        outputs = self.compiled(*args, **kwargs)
        return as_mpmd_arrays(outputs, program.mesh, program.output_key_impls)

    @property
    def in_shardings(self) -> tuple[Any, Any]:
        """``(args, kwargs)`` of ``MpmdSharding``: the ranks that read each argument and its
        spec there (no ranks for an argument the step does not use)."""
        program = self.compiled.program
        mesh = program.mesh
        kept = program.kept_inputs
        num_leaves = program.in_tree.num_leaves
        positions = list(kept) if kept is not None else list(range(num_leaves))
        where = dict.fromkeys(range(num_leaves), MpmdSharding(mesh, (), PartitionSpec()))
        for position, leaf in enumerate(positions):
            binding = program.plan.inputs[position]
            shardings = self.compiled.executable.input_shardings(position)
            spec = getattr(shardings[0], "spec", PartitionSpec()) if shardings else None
            where[leaf] = MpmdSharding(mesh, binding.ranks, spec or PartitionSpec())
        return jax.tree_util.tree_unflatten(program.in_tree, [where[i] for i in range(num_leaves)])

    def __getattr__(self, name: str) -> Any:
        return getattr(self.compiled, name)


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
        target_num_stages: int | None = None,
    ):
        check_mpmd_mesh(mpmd_mesh, "mpmd_jit")
        target_num_stages = _checked_stage_count(target_num_stages)
        if in_specs is not None and in_shardings is not None:
            raise ValueError("give in_specs or in_shardings, not both")
        if out_specs is not None and out_shardings is not None:
            raise ValueError("give out_specs or out_shardings, not both")
        self.fun = fun
        self.mpmd_mesh = mpmd_mesh
        self._in_shardings = _on_mesh(in_specs if in_specs is not None else in_shardings, mpmd_mesh)
        self._out_shardings = _on_mesh(
            out_specs if out_specs is not None else out_shardings, mpmd_mesh
        )
        self._donate_argnums = donate_argnums
        self._schedule = schedule
        self._target_num_stages = target_num_stages
        self._compiled: dict[Any, MpmdCompiled] = {}

    def lower(self, *args: Any, **kwargs: Any) -> MpmdLowered:
        jit_kwargs: dict[str, Any] = {"donate_argnums": self._donate_argnums}
        if self._in_shardings is not None:
            jit_kwargs["in_shardings"] = self._in_shardings
        if self._out_shardings is not None:
            jit_kwargs["out_shardings"] = self._out_shardings
        abstract = jax.tree_util.tree_map(self._abstract, _plain_arrays((args, kwargs)))
        # Bare PartitionSpecs in the step (with_sharding_constraint) refer to the lowering mesh.
        with jax.set_mesh(self.mpmd_mesh.lowering_mesh()):
            lowered = jax.jit(self.fun, **jit_kwargs).lower(*abstract[0], **abstract[1])
        program = partition(lowered, mesh=self.mpmd_mesh, schedule=self._schedule)
        if self._target_num_stages is not None and program.num_stages != self._target_num_stages:
            raise MarkerError(
                f"{_name(self.fun)} has {program.num_stages} stages, but target_num_stages is "
                f"{self._target_num_stages}: mark the end of each stage with mark_stage_end"
            )
        return MpmdLowered(lowered, program)

    def compile(self, *args: Any, **kwargs: Any) -> MpmdCompiled:
        return self.lower(*args, **kwargs).compile()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        args, kwargs = _plain_arrays((args, kwargs))
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
        spec = _sharding_spec(leaf, self.mpmd_mesh.mpmd_axis_name)
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
    mpmd_mesh: MpmdMesh | None = None,
    *,
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
    check_mpmd_mesh(mpmd_mesh, "mpmd_jit_with_loop")
    if fun is None:
        return lambda f: MpmdJitted(f, **options)
    return MpmdJitted(fun, **options)


def mpmd_jit_by_yield(
    fun: Callable[..., Any] | None = None,
    mpmd_mesh: MpmdMesh | None = None,
    *,
    target_num_stages: int | None = None,
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
    ``target_num_stages``: lowering fails unless the markers make that many stages.
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
            target_num_stages=target_num_stages,
        )

    check_mpmd_mesh(mpmd_mesh, "mpmd_jit_by_yield")
    _checked_stage_count(target_num_stages)  # before the step is given, when a decorator
    return wrap if fun is None else wrap(fun)


def _checked_stage_count(target_num_stages: Any) -> int | None:
    """``target_num_stages`` as an int (None stays None); a positive integer or refused."""
    if target_num_stages is None:
        return None
    if (
        isinstance(target_num_stages, bool | np.bool_)
        or not isinstance(target_num_stages, int | np.integer)
        or target_num_stages < 1
    ):
        raise CallError(
            f"target_num_stages must be a positive int (or None), got {target_num_stages!r} "
            f"(a {type(target_num_stages).__name__})"
        )
    return int(target_num_stages)


def _on_mesh(tree: Any, mpmd_mesh: MpmdMesh) -> Any:
    """Specs and named shardings of ``tree`` as ``NamedSharding``s on the lowering mesh,
    without the mpmd axis (of size 1 there)."""
    if tree is None:
        return None
    mesh = mpmd_mesh.lowering_mesh()
    mpmd_axis = {mpmd_mesh.mpmd_axis_name}

    def convert(leaf: Any) -> Any:
        if leaf is None:
            return None
        if isinstance(leaf, PartitionSpec):
            return NamedSharding(mesh, filter_axes(leaf, mpmd_axis))
        if isinstance(leaf, NamedSharding):
            return NamedSharding(mesh, filter_axes(leaf.spec, mpmd_axis))
        raise CallError(
            f"in/out shardings must be PartitionSpecs or NamedShardings, got {type(leaf)}"
        )

    return jax.tree_util.tree_map(
        convert, tree, is_leaf=lambda x: x is None or isinstance(x, PartitionSpec | NamedSharding)
    )


def _plain_arrays(tree: Any) -> Any:
    """``tree`` with each ``MpmdArray`` replaced by the jax array a step reads."""
    return jax.tree_util.tree_map(
        as_jax_array, tree, is_leaf=lambda leaf: isinstance(leaf, MpmdArray)
    )


def _signature(tree: Any) -> Any:
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    return treedef, tuple(_leaf_signature(leaf) for leaf in leaves)


def _leaf_signature(leaf: Any) -> Any:
    if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
        return (
            tuple(leaf.shape),
            leaf.dtype,  # a numpy dtype, or an extended one (a typed PRNG key)
            bool(getattr(leaf, "weak_type", False)),
            _sharding_spec(leaf),
        )
    return (type(leaf),)


def _sharding_spec(leaf: Any, mpmd_axis: str | None = None) -> PartitionSpec | None:
    """The leaf's ``PartitionSpec`` without ``mpmd_axis``; None when it has none or shards
    no axis (replicated lowers the same as unspecified, so a step's replicated outputs
    reuse its program)."""
    spec = getattr(getattr(leaf, "sharding", None), "spec", None)
    if not isinstance(spec, PartitionSpec):
        return None
    if mpmd_axis is not None:
        spec = filter_axes(spec, {mpmd_axis})
    if all(axis is None for axis in spec):
        return None
    return spec


def _name(fun: Callable[..., Any]) -> str:
    return getattr(fun, "__name__", type(fun).__name__)
