"""Executable shardings as ``NamedSharding``s over a rank's submesh.

PJRT reports an executable's parameter and result shardings as HLO shardings
(no mesh, no ``PartitionSpec``). To let a program's arrays say where they live
(``x.sharding.spec``, ``jax.device_put(x, x.sharding)``, ``out_shardings``),
each is replaced by the equivalent ``NamedSharding`` over the rank's submesh
(every axis of the mpmd mesh, the mpmd axis of size 1), found by trying the
partition specs over the submesh's axes, simplest first. A sharding no spec
reproduces (a device order the mesh does not have) stays as it is.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterator, Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec, Sharding

from .plan import Layout


def as_named(sharding: Sharding, mesh: Mesh, ndim: int) -> Sharding:
    """``sharding`` as an equivalent ``NamedSharding`` on ``mesh``, else unchanged."""
    if isinstance(sharding, NamedSharding) and sharding.mesh == mesh:
        return sharding
    if set(sharding.device_set) != set(mesh.devices.flat):
        return sharding
    for spec in _specs(tuple(mesh.shape.items()), ndim):
        candidate = NamedSharding(mesh, spec)
        if sharding.is_equivalent_to(candidate, ndim):
            return candidate
    return sharding


@functools.lru_cache(maxsize=256)
def _spec_list(axes: tuple[tuple[str, int], ...], ndim: int) -> tuple[PartitionSpec, ...]:
    return tuple(_specs_uncached(axes, ndim))


def _specs(axes: tuple[tuple[str, int], ...], ndim: int) -> tuple[PartitionSpec, ...]:
    return _spec_list(axes, ndim)


def _specs_uncached(axes: tuple[tuple[str, int], ...], ndim: int) -> Iterator[PartitionSpec]:
    """Every spec that places the mesh's non-trivial axes on dims, fewest axes used first."""
    names = [name for name, size in axes if size > 1]
    replicated = PartitionSpec(*([None] * ndim))
    seen = {replicated}
    yield replicated
    for count in range(1, len(names) + 1):
        for used in itertools.permutations(names, count):
            # Each used axis goes to one dim; axes on one dim keep their order in `used`.
            for dims in itertools.product(range(ndim), repeat=count):
                entries: list[tuple[str, ...]] = [() for _ in range(ndim)]
                for name, dim in zip(used, dims, strict=True):
                    entries[dim] = (*entries[dim], name)
                spec = _spec(entries)
                if spec not in seen:
                    seen.add(spec)
                    yield spec


def _spec(entries: list[tuple[str, ...]]) -> PartitionSpec:
    parts: list[str | tuple[str, ...] | None] = [
        None if not e else e[0] if len(e) == 1 else e for e in entries
    ]
    return PartitionSpec(*parts)  # one entry per dimension, as specs are usually written


def layout_sharding(layout: Layout, devices: Sequence[jax.Device]) -> Sharding | None:
    """The sharding ``layout`` names over ``devices`` (in partition order), or None when
    its mesh does not cover them (a layout for another submesh)."""
    names = tuple(name for name, _ in layout.mesh_axes)
    sizes = tuple(size for _, size in layout.mesh_axes)
    if math.prod(sizes) != len(devices):
        return None
    mesh = Mesh(np.array(devices, dtype=object).reshape(sizes), names)
    return NamedSharding(mesh, _spec(list(layout.dims)))
