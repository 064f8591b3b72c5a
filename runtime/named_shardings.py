"""Executable shardings as ``NamedSharding``s over a rank's submesh.

PJRT reports an executable's parameter and result shardings as HLO shardings
(no mesh, no ``PartitionSpec``). To let a program's arrays say where they live
(``x.sharding.spec``, ``jax.device_put(x, x.sharding)``, ``out_shardings``),
each is replaced by the equivalent ``NamedSharding`` over the rank's submesh
(every axis of the mpmd mesh, the mpmd axis of size 1), found by trying the
partition specs over the submesh's axes, simplest first. A sharding no spec
reproduces (a device order the mesh does not have) stays as it is.
``sharding_layout`` reads one as the plan's ``Layout`` (data that crosses processes).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterator, Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec, Sharding

from . import _jax_compat as jc
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


def sharding_layout(sharding: Sharding, devices: Sequence[jax.Device], ndim: int) -> Layout | None:
    """``sharding`` of an ``ndim`` array over ``devices`` as a plan ``Layout`` (a mesh over
    the devices in partition order and the axes splitting each dimension), or None when
    no such layout gives it (a single-device or manual sharding, say).

    The sharding's tile assignment is read as a transposed iota (XLA's own form): each
    tile dimension is split into factors until every factor steps through the devices
    with one stride; the factors, ordered by stride, are the mesh's axes.
    """
    if sharding.is_fully_replicated:
        return Layout((("replicated", len(devices)),), ((),) * ndim)
    hlo = jc.hlo_sharding(sharding, ndim)
    if not hlo.is_tiled() or any(t != _REPLICATED for t in hlo.subgroup_types()):
        return None
    ordered = list(jc.sharding_device_list(sharding))
    if set(ordered) != set(devices):
        return None
    position = {d: p for p, d in enumerate(devices)}
    order = np.array([position[ordered[p]] for p in hlo.tile_assignment_devices()])
    tile = list(hlo.tile_assignment_dimensions())
    for split in itertools.islice(_splits(tile), _MAX_SPLITS):
        layout = _iota_layout(order, split, ndim)
        if layout is not None:
            candidate = layout_sharding(layout, devices)
            if candidate is not None and candidate.is_equivalent_to(sharding, ndim):
                return layout
    return None


_REPLICATED = 1  # xla's OpSharding.Type.REPLICATED, the one subgroup a layout can express
_MAX_SPLITS = 4096


def _splits(tile: list[int]) -> Iterator[list[tuple[int, int]]]:
    """Each way to split the tile dimensions into prime factors: ``(dimension, size)``
    per factor, the factors of a dimension major first."""
    per_dim = [sorted(set(itertools.permutations(_primes(size)))) for size in tile]
    for choice in itertools.product(*per_dim):
        yield [(d, size) for d, factors in enumerate(choice) for size in factors]


def _primes(n: int) -> list[int]:
    factors, p = [], 2
    while n > 1:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    return factors


def _iota_layout(order: np.ndarray, split: list[tuple[int, int]], ndim: int) -> Layout | None:
    """The layout whose devices, tile by tile, are ``order`` when the tiles are split as
    ``split``; None unless each factor steps through the devices with one stride."""
    shape = [size for _, size in split]
    grid = order.reshape(shape) if shape else order.reshape(())
    if grid.flat[0] != 0:
        return None
    strides = [int(grid[tuple(int(j == k) for j in range(len(shape)))]) for k in range(len(shape))]
    by_stride = sorted(range(len(shape)), key=lambda k: -strides[k])
    step = 1
    for k in reversed(by_stride):  # minor axes first: each stride is the product of those after
        if strides[k] != step:
            return None
        step *= shape[k]
    index = np.indices(shape) if shape else np.zeros((0,), dtype=int)
    if not np.array_equal(grid, sum(i * s for i, s in zip(index, strides, strict=True))):
        return None
    names = {k: f"a{m}" for m, k in enumerate(by_stride)}
    mesh_axes = tuple((names[k], shape[k]) for k in by_stride)
    dims = tuple(
        tuple(names[k] for k, (d, _) in enumerate(split) if d == dim) for dim in range(ndim)
    )
    return Layout(mesh_axes, dims)
