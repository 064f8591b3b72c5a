"""The pipeline stage marker.

``pipeline_enter_stage(tree)`` is the identity on a pytree of arrays that marks
the END of a pipeline stage: a model split into N stages carries N markers, the
last one marking the end of the last stage. It lowers to a single
``stablehlo.optimization_barrier`` taking every leaf of the tree, tagged
``{jaxpp.marker = "fwd"}`` for the markers the user wrote and ``"bwd"`` for
their transposes placed by autodiff (see :mod:`jaxpp_mlir.dialect.ops`).

The marker is linear: its JVP marks the non-zero tangents with the same
direction, its transpose marks the non-zero cotangents with the opposite one.
Under plain ``jax.jit`` it is an optimization barrier: the identity, compiled by
XLA on every platform with no handler of ours, a fusion barrier through which
Shardy propagates shardings.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import os
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from jax.interpreters import ad, batching, mlir
from jax.interpreters.mlir import ir

from jaxpp_mlir._jax_compat import Primitive
from jaxpp_mlir.dialect.ops import BACKWARD, FORWARD, MARKER_PRIMITIVE, create_stage_marker
from jaxpp_mlir.errors import MarkerError

__all__ = [
    "enter_stage_p",
    "mark_stage_end",
    "mark_stage_end_backward",
    "pipeline_enter_stage",
    "recording_markers",
]

T = TypeVar("T")

enter_stage_p = Primitive(MARKER_PRIMITIVE)
enter_stage_p.multiple_results = True

_OPPOSITE = {FORWARD: BACKWARD, BACKWARD: FORWARD}


def pipeline_enter_stage(tree: T, name: str | None = None) -> T:
    """Marks the end of a pipeline stage; returns ``tree`` unchanged.

    ``tree`` is any pytree of arrays (python scalars are converted with
    ``jnp.asarray``). All its leaves go through one marker. ``name`` labels the
    stage the marker ends: it is recorded on the marker (``jaxpp.stage_name``
    among its frontend attributes, forward and backward).
    """
    if name is not None and not isinstance(name, str):
        raise MarkerError(f"a stage marker's name must be a str, got {type(name).__name__}")
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    if not leaves:
        return tree
    _record_written_marker()
    arrays = [jnp.asarray(leaf) for leaf in leaves]
    outs = enter_stage_p.bind(*arrays, direction=FORWARD, name=name or "")
    return jax.tree_util.tree_unflatten(treedef, outs)


def mark_stage_end(anchor: T, name: str | None = None) -> T:
    """Marks the end of a pipeline stage (JaxPP's current name for the marker).

    ``anchor`` is the pytree that leaves the stage; ``name`` labels the stage.
    Same as ``pipeline_enter_stage``.
    """
    return pipeline_enter_stage(anchor, name)


def mark_stage_end_backward(cotangents: T) -> T:
    """The backward counterpart of a marker, for a ``jax.custom_vjp`` backward rule.

    Autodiff places the backward marker of every ``pipeline_enter_stage`` itself,
    except where a ``jax.custom_vjp`` hides the marker in its forward rule: then
    the hand-written backward rule must pass the cotangents it receives through
    ``mark_stage_end_backward`` first, so that the backward of the stage is
    bounded as the forward is. Returns ``cotangents`` unchanged.
    """
    leaves, treedef = jax.tree_util.tree_flatten(cotangents)
    if not leaves:
        return cotangents
    arrays = [jnp.asarray(leaf) for leaf in leaves]
    outs = enter_stage_p.bind(*arrays, direction=BACKWARD, name="")
    return jax.tree_util.tree_unflatten(treedef, outs)


# The source lines ("file:line") of the markers written while tracing a treduce body,
# recorded on its loop marker so that a pass can tell which markers JAX dropped.
_written_markers: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "jaxpp_written_markers", default=None
)
_LIBRARY_DIRS = tuple(
    os.path.dirname(os.path.abspath(module.__file__)) + os.sep for module in (jax, np)
) + (os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,)


@contextlib.contextmanager
def recording_markers() -> Iterator[list[str]]:
    """Collects the source line of every ``pipeline_enter_stage`` call made inside."""
    written: list[str] = []
    token = _written_markers.set(written)
    try:
        yield written
    finally:
        _written_markers.reset(token)


def _record_written_marker() -> None:
    written = _written_markers.get()
    if written is not None:
        written.append(_caller_line())


def _caller_line() -> str:
    """``file:line`` of the innermost frame outside jaxpp_mlir, jax and numpy."""
    frame = inspect.currentframe()
    while frame is not None:
        filename = os.path.abspath(frame.f_code.co_filename)
        if not filename.startswith(_LIBRARY_DIRS) and not filename.startswith("<frozen"):
            return f"{_shown_path(filename)}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"


def _shown_path(filename: str) -> str:
    """``filename`` relative to the working directory when it lies inside it, so that a
    lowered module records the same locations in every checkout of a project."""
    relative = os.path.relpath(filename)
    return filename if relative.startswith(os.pardir) else relative


def _check_direction(direction: str) -> None:
    if direction not in _OPPOSITE:
        raise MarkerError(f"stage marker direction must be {FORWARD!r} or {BACKWARD!r}")


def _impl(*args: jax.Array, direction: str, name: str = "") -> list[jax.Array]:
    _check_direction(direction)
    return list(args)


def _abstract_eval(*avals: Any, direction: str, name: str = "") -> list[Any]:
    _check_direction(direction)
    return list(avals)


def _lowering(
    ctx: mlir.LoweringRuleContext, *args: ir.Value, direction: str, name: str = ""
) -> Sequence[ir.Value]:
    return create_stage_marker(args, direction, name=name).results


def _is_passthrough(t: Any) -> bool:
    """Tangents and cotangents that are not marked: symbolic zeros and float0."""
    return t is None or type(t) is ad.Zero or getattr(t, "dtype", None) == jax.dtypes.float0


def _mark_some(values: Sequence[Any], direction: str, name: str) -> list[Any]:
    """Marks the values that are not pass-through, in one marker."""
    picked = [i for i, v in enumerate(values) if not _is_passthrough(v)]
    out = list(values)
    if picked:
        marked = enter_stage_p.bind(*(values[i] for i in picked), direction=direction, name=name)
        for i, v in zip(picked, marked, strict=True):
            out[i] = v
    return out


def _jvp(
    primals: Sequence[Any], tangents: Sequence[Any], *, direction: str, name: str = ""
) -> tuple[list[Any], list[Any]]:
    primals_out = enter_stage_p.bind(*primals, direction=direction, name=name)
    return primals_out, _mark_some(tangents, direction, name)


def _transpose(cts: Sequence[Any], *primals: Any, direction: str, name: str = "") -> list[Any]:
    wanted = [ct if ad.is_undefined_primal(p) else None for ct, p in zip(cts, primals, strict=True)]
    return _mark_some(wanted, _OPPOSITE[direction], name)


def _batch(
    args: Sequence[Any], dims: Sequence[Any], *, direction: str, name: str = ""
) -> tuple[list[Any], list[Any]]:
    return enter_stage_p.bind(*args, direction=direction, name=name), list(dims)


enter_stage_p.def_impl(_impl)
enter_stage_p.def_abstract_eval(_abstract_eval)
mlir.register_lowering(enter_stage_p, _lowering)
ad.primitive_jvps[enter_stage_p] = _jvp
ad.primitive_transposes[enter_stage_p] = _transpose
batching.primitive_batchers[enter_stage_p] = _batch
