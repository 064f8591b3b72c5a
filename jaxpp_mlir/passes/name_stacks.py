"""Module paths read from JAX's name stacks: which module (or ``jax.named_scope``) an op is in.

JAX keeps its name stack in each op's location, flax linen and haiku module names and
``jax.named_scope``s included: ``loc("jit(step)/while/body/eval_jaxpr/jvp(Model)/layers_3/
Dense_0/dot_general"(...))``. The backward of the same op reads
``.../transpose(jvp(Model))/layers_3/Dense_0/dot_general``, and an op that a remat
(``jax.checkpoint``, ``nn.remat``) recomputes in the backward repeats the path from the
transformed scope down: ``.../transpose(jvp(Model))/encoder/jvp(Model)/encoder/checkpoint/
rematted_computation/layers_3/...``. ``scope_path`` turns each of these into the same module
path, ``("Model", "layers_3", "Dense_0")``, and says whether autodiff transposed the op.

A helper of the segmenters that cut a step by module names
(jaxpp-segment-split-points, jaxpp-segment-repeated-blocks) and of the passes that ask
whether autodiff transposed or recomputed an op (jaxpp-verify-markers,
jaxpp-segment-layer-scans), not a pass. It reads location names only (never IR text).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

from jax.interpreters.mlir import ir

# Scopes JAX's transformations and control flow push, which name no module of the model.
_STRUCTURAL_SCOPES = frozenset(
    {
        "while",
        "body",
        "cond",
        "eval_jaxpr",
        "checkpoint",
        "rematted_computation",
        "remat",
        "closed_call",
        "core_call",
        "custom_jvp_call",
        "custom_vjp_call",
        "custom_vjp_call_jaxpr",
        "shard_map",
    }
)
_TRANSPOSE = "transpose"
#: How a transposed scope starts in a name stack: ``transpose(jvp(Model))``.
TRANSPOSE_SCOPE = _TRANSPOSE + "("
# Scopes of forward code that a remat reruns inside the backward.
_RECOMPUTED_SCOPES = ("rematted_computation", "checkpoint", "remat")
_JVP = "jvp"
_JIT = "jit"


class ScopePath(NamedTuple):
    """The module path an op is in (outermost first; empty: none) and whether autodiff
    transposed it (backward code)."""

    path: tuple[str, ...]
    transposed: bool


NO_SCOPE = ScopePath((), False)


def scope_path(location: ir.Location) -> ScopePath:
    """The module path and direction of the op at ``location`` (see the module doc)."""
    stack = name_stack(location)
    return _parse(stack) if stack else NO_SCOPE


def name_stack(location: ir.Location) -> str:
    """The name stack JAX wrote on ``location`` ('' when it has none)."""
    location = ir.Location.from_attr(location.attr)  # the typed subclass
    if isinstance(location, ir.NameLoc):
        return location.name_str
    if isinstance(location, ir.CallSiteLoc):
        return name_stack(location.callee)
    if isinstance(location, ir.FusedLoc):
        for inner in location.locations:
            found = name_stack(inner)
            if found:
                return found
    return ""


def display(path: tuple[str, ...]) -> str:
    """A module path as users write it: ``Model/layers_3``."""
    return "/".join(path)


@functools.lru_cache(maxsize=65536)
def _parse(stack: str) -> ScopePath:
    scopes = stack.split("/")[:-1]  # the last name is the primitive (or the called function)
    path: list[str] = []
    transposed = False
    transpose_base = 0  # the path's length where the transposed scope starts
    for index, scope in enumerate(scopes):
        transforms, name = _unwrap(scope)
        if index == 0 and transforms[:1] == (_JIT,):
            continue  # the jitted step itself
        if _TRANSPOSE in transforms and not transposed:
            transposed = True
            transpose_base = len(path)
        elif (
            transposed
            and _JVP in transforms
            and _TRANSPOSE not in transforms
            and len(path) > transpose_base
            and name == path[transpose_base]
        ):
            # Recomputed forward code (remat) names its full path again: start over there.
            del path[transpose_base:]
        if name and name not in _STRUCTURAL_SCOPES:
            path.append(name)
    return ScopePath(tuple(path), transposed)


def _unwrap(scope: str) -> tuple[tuple[str, ...], str]:
    """``transpose(jvp(Model))`` -> (("transpose", "jvp"), "Model"); ``layers_3`` -> ((), ...)."""
    transforms = []
    while scope.endswith(")"):
        opening = scope.find("(")
        if opening <= 0 or not scope[:opening].isidentifier():
            break
        transforms.append(scope[:opening])
        scope = scope[opening + 1 : -1]
    return tuple(transforms), scope


def in_transpose_scope(location: ir.Location) -> bool:
    """Whether a name in ``location`` (JAX's name stack) says autodiff transposed the op
    (recomputed forward code under a remat is not transposed)."""
    return _some_name(location, lambda name: _transposed(name) and not _recomputed(name))


def recomputed_in_backward(location: ir.Location) -> bool:
    """Whether a name in ``location`` says autodiff transposed a rematerialized
    computation (forward code a remat reruns in the backward)."""
    return _some_name(location, lambda name: _transposed(name) and _recomputed(name))


def _transposed(name: str) -> bool:
    return TRANSPOSE_SCOPE in name


def _recomputed(name: str) -> bool:
    return any(scope in name for scope in _RECOMPUTED_SCOPES)


def _some_name(location: ir.Location, test: Callable[[str], bool]) -> bool:
    """Whether ``test`` holds for a name anywhere in ``location`` (nested names, call
    sites' callees and fused locations included)."""
    location = ir.Location.from_attr(location.attr)
    if isinstance(location, ir.NameLoc):
        return test(location.name_str) or _some_name(location.child_loc, test)
    if isinstance(location, ir.CallSiteLoc):
        return _some_name(location.callee, test)
    if isinstance(location, ir.FusedLoc):
        return any(_some_name(inner, test) for inner in location.locations)
    return False
