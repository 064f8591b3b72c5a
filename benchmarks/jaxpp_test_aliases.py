"""``import jaxpp`` resolved to jaxpp_mlir, for running JaxPP's own tests unchanged.

Used by ``jaxpp_public_tests.py`` in the process that runs one of JaxPP's test files;
nothing in the library imports it. ``install(internals=...)`` puts a finder first on
``sys.meta_path`` that answers for ``jaxpp`` and its submodules:

- JaxPP's public modules (``jaxpp``, ``jaxpp.api``, ``jaxpp.schedules``,
  ``jaxpp.mesh``, ``jaxpp.types``, ``jaxpp.array``) are fresh modules holding every
  public name of ``jaxpp_mlir.jaxpp`` (the same objects).
- With ``internals=True``, the JaxPP internals that ``tests/test_transformations.py``
  calls are given adapters onto jaxpp_mlir's public entry points:
  ``wrap_into_tasks`` ... ``maybe_unroll_loop`` partition and compile the traced step
  with ``mpmd_jit_with_loop`` on a mesh of ``mpmd_dim`` CPU ranks and return a
  ``ClosedJaxpr`` whose one equation runs the pipelined program, so the test's
  ``jaxpr_as_fun(...)(*args)`` compares jaxpp_mlir's results with ``jax.jit``'s;
  ``cluster_jaxpr`` partitions a marked forward with ``mpmd_jit_by_yield``;
  ``dax_pscan_p`` is ``scan`` (what ``treduce`` traces to here); the environment
  switches are accepted and change nothing. None of JaxPP's code is used.
- Any other ``jaxpp.X`` (JaxPP's own helpers: ``jaxpp.utils``, ``jaxpp.dlpack``, ...)
  is a ``ModuleNotFoundError`` saying it is JaxPP-internal.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

import jax
import jax.extend.core as jcore
import numpy as np
from jax.extend.core.primitives import scan_p

import jaxpp_mlir.jaxpp as jaxpp_api

PUBLIC_MODULES = (
    "jaxpp",
    "jaxpp.api",
    "jaxpp.schedules",
    "jaxpp.mesh",
    "jaxpp.types",
    "jaxpp.array",
)


def _public_namespace() -> dict[str, Any]:
    return {name: getattr(jaxpp_api, name) for name in jaxpp_api.__all__ if name != "api"}


# --- adapters for the JaxPP internals tests/test_transformations.py calls -----------------


class _Switch:
    """An ``env_vars`` entry: ``.set(value)`` is a context manager; jaxpp_mlir has no such knob."""

    def __init__(self, default: Any):
        self.value = default

    @contextlib.contextmanager
    def set(self, value: Any) -> Iterator[None]:
        previous, self.value = self.value, value
        try:
            yield
        finally:
            self.value = previous


@dataclasses.dataclass
class _PendingStep:
    """A traced step on its way through wrap_into_tasks ... maybe_unroll_loop."""

    cjaxpr: Any
    mpmd_dim: int


def _cpu_mpmd_mesh(num_ranks: int) -> jaxpp_api.MpmdMesh:
    devices = jax.devices()
    if num_ranks > len(devices):
        raise RuntimeError(f"{num_ranks} ranks asked for, {len(devices)} devices here")
    grid = np.array(devices[:num_ranks]).reshape(num_ranks, 1)
    return jaxpp_api.MpmdMesh(jax.sharding.Mesh(grid, ("mpmd", "devs")), "mpmd")


def _abstract_inputs(cjaxpr: Any) -> list[jax.ShapeDtypeStruct]:
    return [
        jax.ShapeDtypeStruct(aval.shape, aval.dtype, weak_type=aval.weak_type)
        for aval in cjaxpr.in_avals
    ]


def _plain(leaf: Any) -> Any:
    return jax.numpy.asarray(np.asarray(leaf))


#: What ``treduce`` traces to in jaxpp_mlir (a ``scan``); JaxPP traces its own primitive.
dax_pscan_p = scan_p

_run_pipelined_p = jcore.Primitive("jaxpp_mlir_pipelined_step")
_run_pipelined_p.multiple_results = True
_run_pipelined_p.def_impl(
    lambda *args, compiled, out_avals: [_plain(x) for x in jax.tree.leaves(compiled(*args))]
)
_run_pipelined_p.def_abstract_eval(lambda *args, compiled, out_avals: list(out_avals))


def wrap_into_tasks(cjaxpr: Any, used_invars: Sequence[bool], mpmd_dim: int) -> tuple:
    if not all(used_invars):
        raise NotImplementedError("the adapter takes every input as used")
    return _PendingStep(cjaxpr, mpmd_dim), None, None


def infer_shardings2(pending: _PendingStep, in_shardings: Sequence[Any], mesh: Any) -> None:
    """jaxpp_mlir places values by dataflow when it partitions (the tests pass replicated)."""


def strip_inspect_sharding_eqns(pending: _PendingStep) -> _PendingStep:
    return pending


def maybe_unroll_loop(pending: _PendingStep) -> Any:
    """The traced step partitioned and compiled by jaxpp_mlir, as a one-equation ClosedJaxpr."""
    cjaxpr = pending.cjaxpr
    step = jcore.jaxpr_as_fun(cjaxpr)
    pipelined = jaxpp_api.mpmd_jit_with_loop(step, mpmd_mesh=_cpu_mpmd_mesh(pending.mpmd_dim))
    compiled = pipelined.compile(*_abstract_inputs(cjaxpr))
    out_avals = tuple(cjaxpr.out_avals)

    def run(*args: Any) -> Any:
        return _run_pipelined_p.bind(*args, compiled=compiled, out_avals=out_avals)

    return jax.make_jaxpr(run)(*_abstract_inputs(cjaxpr))


def cluster_jaxpr(
    jaxpr: Any,
    target_num_stages: int,
    is_partial_bwd: bool,
    get_mpmd_idx: Callable[[int], int],
    is_loop: bool,
) -> Any:
    """A marked forward (no loop) partitioned by jaxpp_mlir on ``target_num_stages`` ranks.

    As JaxPP's ``cluster_jaxpr`` outside a loop, the stage count is not checked against
    ``target_num_stages`` (markers whose results nothing reads make no stage).
    """
    if is_loop or is_partial_bwd:
        raise NotImplementedError("the adapter covers forward clustering without a loop")
    cjaxpr = jcore.ClosedJaxpr(jaxpr, [])
    forward = jaxpp_api.mpmd_jit_by_yield(
        jcore.jaxpr_as_fun(cjaxpr), mpmd_mesh=_cpu_mpmd_mesh(target_num_stages)
    )
    return forward.lower(*_abstract_inputs(cjaxpr))


@contextlib.contextmanager
def yield_scope() -> Iterator[None]:
    """JaxPP traces markers as yields inside this scope; jaxpp_mlir's markers need no scope."""
    yield


class _MpmdMeshWithStack(jaxpp_api.MpmdMesh):
    """JaxPP's ``MpmdMesh`` keeps a class-level stack of active meshes that its tests push on."""

    mesh_stack: ClassVar[list[Any]] = []


def _internal_namespaces() -> dict[str, dict[str, Any]]:
    return {
        "jaxpp.core": {
            "cluster_jaxpr": cluster_jaxpr,
            "infer_shardings2": infer_shardings2,
            "maybe_unroll_loop": maybe_unroll_loop,
            "strip_inspect_sharding_eqns": strip_inspect_sharding_eqns,
            "wrap_into_tasks": wrap_into_tasks,
        },
        "jaxpp.env_vars": {
            "jaxpp_debug_skip_propagation": _Switch(False),
            "jaxpp_conservative_loop_clustering": _Switch(True),
        },
        "jaxpp.jax_primitives": {"dax_pscan_p": dax_pscan_p},
        "jaxpp.pipelining": {"yield_scope": yield_scope},
    }


# --- the finder ---------------------------------------------------------------------------


class _AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, namespaces: dict[str, dict[str, Any]]):
        self.namespaces = namespaces

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != "jaxpp" and not fullname.startswith("jaxpp."):
            return None
        if fullname not in self.namespaces:
            raise ModuleNotFoundError(
                f"{fullname} is JaxPP-internal: jaxpp_mlir offers JaxPP's public API "
                "(jaxpp_mlir.jaxpp), not this module",
                name=fullname,
            )
        return importlib.machinery.ModuleSpec(fullname, self, is_package=fullname == "jaxpp")

    def create_module(self, spec: Any) -> types.ModuleType:
        module = types.ModuleType(spec.name)
        module.__dict__.update(self.namespaces[spec.name])
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        if module.__name__ == "jaxpp":
            module.__path__ = []


def install(*, internals: bool) -> importlib.abc.MetaPathFinder:
    """``import jaxpp`` (and the submodules above) resolve to jaxpp_mlir until ``uninstall``."""
    public = _public_namespace()
    namespaces = {name: dict(public) for name in PUBLIC_MODULES}
    if internals:
        namespaces["jaxpp.mesh"]["MpmdMesh"] = _MpmdMeshWithStack
        namespaces.update(_internal_namespaces())
    _forget_jaxpp_modules()
    finder = _AliasFinder(namespaces)
    sys.meta_path.insert(0, finder)
    return finder


def uninstall(finder: importlib.abc.MetaPathFinder) -> None:
    sys.meta_path.remove(finder)
    _forget_jaxpp_modules()


def _forget_jaxpp_modules() -> None:
    for name in list(sys.modules):
        if name == "jaxpp" or name.startswith("jaxpp."):
            del sys.modules[name]
