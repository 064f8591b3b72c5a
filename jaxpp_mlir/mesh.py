"""MpmdMesh: a jax Mesh split along one axis into one submesh per rank."""

from __future__ import annotations

import operator
import os
from collections.abc import Collection, Mapping
from typing import overload

import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

from jaxpp_mlir.errors import MeshError


class MpmdMesh:
    """Splits ``jax_mesh`` along ``mpmd_axis_name``: rank r runs on submesh r.

    ``unstack`` gives the submeshes (the mpmd axis kept with size 1);
    ``lowering_mesh()`` the mesh a step is lowered with (the mpmd axis of size
    1), as in NVIDIA JaxPP. Every mesh derived from this one keeps its axis types
    (Explicit, Auto, or a mix, as ``jax.make_mesh`` or ``Mesh(..., axis_types=)``
    gave them), the mpmd axis' own included: a step traced for explicit sharding on
    the lowering mesh sees the types it was written for, and its outputs come back
    as ``NamedSharding``s over a rank's submesh with the same types.
    """

    def __init__(self, jax_mesh: Mesh, mpmd_axis_name: str):
        if not isinstance(jax_mesh, Mesh):
            raise MeshError(f"MpmdMesh needs a jax.sharding.Mesh, got {type(jax_mesh).__name__}")
        if mpmd_axis_name not in jax_mesh.axis_names:
            raise MeshError(
                f"mesh axes {tuple(jax_mesh.axis_names)} have no mpmd axis '{mpmd_axis_name}'"
            )
        self.jax_mesh = jax_mesh
        self.mpmd_axis_name = mpmd_axis_name
        self._axis = list(jax_mesh.axis_names).index(mpmd_axis_name)

    @classmethod
    def from_devices(
        cls,
        devices: list[jax.Device],
        axis_sizes: dict[str, int],
        mpmd_axis_name: str,
        *,
        axis_types: tuple[AxisType, ...] | None = None,
    ) -> MpmdMesh:
        """Builds the mesh from ``devices`` and axis sizes (one size may be -1: the rest).

        ``axis_types`` (one per axis, in ``axis_sizes``' order) as ``jax.sharding.Mesh``
        takes them; None gives Mesh's default (Auto).
        """
        sizes = _axis_sizes(axis_sizes)
        devices = list(devices)
        unknown = [name for name, size in sizes.items() if size == -1]
        known = int(np.prod([size for size in sizes.values() if size != -1]))
        if len(devices) % known:
            raise MeshError(
                f"{len(devices)} devices do not split evenly along '{mpmd_axis_name}' and the "
                f"other axes {sizes}"
            )
        if unknown:
            sizes[unknown[0]] = len(devices) // known
        if int(np.prod(list(sizes.values()))) != len(devices):
            raise MeshError(f"mesh axes {sizes} do not cover the {len(devices)} devices")
        grid = np.array(devices, dtype=object).reshape(tuple(sizes.values()))
        return cls(Mesh(grid, tuple(sizes), axis_types=axis_types), mpmd_axis_name)

    @property
    def mpmd_dim(self) -> int:
        """The number of ranks (submeshes along the mpmd axis)."""
        return int(self.jax_mesh.devices.shape[self._axis])

    @property
    def mpmd_axis(self) -> int:
        """The position of the mpmd axis among the mesh's axes."""
        return self._axis

    @property
    def device_coords(self) -> Mapping[jax.Device, tuple[int, ...]]:
        """Each device's coordinates in the mesh (one index per axis)."""
        return {device: coords for coords, device in np.ndenumerate(self.jax_mesh.devices)}

    @property
    def device_mpmd_idx(self) -> Mapping[jax.Device, int]:
        """Each device's rank (its coordinate along the mpmd axis)."""
        return {device: coords[self._axis] for device, coords in self.device_coords.items()}

    def mpmd_submesh(self, mpmd_indices: int | list[int]) -> MpmdMesh:
        """The mesh of ranks ``mpmd_indices`` (one rank or a list), the mpmd axis kept."""
        indices = _ranks(mpmd_indices, self.mpmd_dim)
        devices = np.take(self.jax_mesh.devices, indices, axis=self._axis)
        return MpmdMesh(self._mesh_like(devices), self.mpmd_axis_name)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, MpmdMesh)
            and self.mpmd_axis_name == other.mpmd_axis_name
            and self.jax_mesh == other.jax_mesh
        )

    def __hash__(self) -> int:
        return hash((self.jax_mesh, self.mpmd_axis_name))

    @property
    def spmd_axis_names(self) -> tuple[str, ...]:
        return tuple(n for n in self.jax_mesh.axis_names if n != self.mpmd_axis_name)

    @property
    def unstack(self) -> list[Mesh]:
        """One submesh per rank, the mpmd axis kept with size 1 (as in NVIDIA JaxPP)."""
        return [self.rank_mesh(r) for r in range(self.mpmd_dim)]

    def rank_mesh(self, rank: int) -> Mesh:
        """Rank ``rank``'s submesh with every axis of the mesh, the mpmd axis of size 1."""
        if not 0 <= rank < self.mpmd_dim:
            raise MeshError(f"rank {rank} is outside [0, {self.mpmd_dim})")
        return self._mesh_like(np.take(self.jax_mesh.devices, [rank], axis=self._axis))

    def rank_devices(self, rank: int) -> list[jax.Device]:
        """The devices of rank ``rank``'s submesh, in the submesh's order."""
        if not 0 <= rank < self.mpmd_dim:
            raise MeshError(f"rank {rank} is outside [0, {self.mpmd_dim})")
        return list(self._submesh_devices(rank).flat)

    def _submesh_devices(self, rank: int) -> np.ndarray:
        devices = self.jax_mesh.devices
        shape = devices.shape[: self._axis] + devices.shape[self._axis + 1 :]
        return np.take(devices, [rank], axis=self._axis).reshape(shape)

    def lowering_mesh(self) -> Mesh:
        """The mesh to lower a step with: the mpmd axis kept with size 1 (rank 0's devices).

        It has the mesh's axis types, so a step written for JAX's explicit sharding
        (``jax.make_mesh``'s Explicit axes, ``out_sharding=``) traces on it as on the
        whole mesh; the mpmd axis keeps its type too, as every rank's submesh does.
        """
        return self.rank_mesh(0)

    def _mesh_like(self, devices: np.ndarray) -> Mesh:
        """A mesh over ``devices`` with this mesh's axis names and axis types."""
        return Mesh(devices, tuple(self.jax_mesh.axis_names), axis_types=self.axis_types)

    @property
    def axis_types(self) -> tuple[AxisType, ...]:
        """Each axis' type (Explicit, Auto or Manual), as in ``jax_mesh.axis_types``."""
        return tuple(self.jax_mesh.axis_types)

    def __repr__(self) -> str:
        shape = dict(zip(self.jax_mesh.axis_names, self.jax_mesh.devices.shape, strict=True))
        types = ""
        if any(t != AxisType.Auto for t in self.axis_types):
            types = f", axis_types=({', '.join(t.name for t in self.axis_types)})"
        return f"MpmdMesh({shape}, mpmd_axis={self.mpmd_axis_name!r}{types})"


def parallel_ranks(mesh: MpmdMesh) -> int | None:
    """How many of ``mesh``'s ranks compute at once: CPU devices share the host's cores
    (as many as it has); None (all of them) for accelerators."""
    platforms = {device.platform for device in mesh.jax_mesh.devices.flat}
    return (os.cpu_count() or 1) if platforms == {"cpu"} else None


def _axis_sizes(axis_sizes: Mapping[str, int]) -> dict[str, int]:
    """``axis_sizes`` checked: axis names to positive ints, at most one -1 (the rest)."""
    if not isinstance(axis_sizes, Mapping) or not axis_sizes:
        raise MeshError(
            f"MpmdMesh.from_devices: axis_sizes must be a dict of axis name to size, got "
            f"{axis_sizes!r}"
        )
    sizes = {}
    for name, size in axis_sizes.items():
        if not isinstance(name, str) or not _is_int(size) or not (size == -1 or size >= 1):
            raise MeshError(
                f"MpmdMesh.from_devices: axis_sizes {dict(axis_sizes)} gives axis {name!r} the "
                f"size {size!r}: each size is a positive int, or -1 for the one axis that "
                f"takes the devices left over"
            )
        sizes[name] = int(size)
    unknown = [name for name, size in sizes.items() if size == -1]
    if len(unknown) > 1:
        raise MeshError(
            f"MpmdMesh.from_devices: axis_sizes {sizes} gives {len(unknown)} axes "
            f"({', '.join(map(repr, unknown))}) the size -1; at most one axis may take the "
            f"devices left over"
        )
    return sizes


def _ranks(mpmd_indices: object, mpmd_dim: int) -> list[int]:
    """``mpmd_indices`` (one rank or a collection of ranks) as a list of distinct ranks."""
    wrong = MeshError(
        f"mpmd_submesh: mpmd_indices must be a rank or a list of distinct ranks in "
        f"[0, {mpmd_dim}), got {mpmd_indices!r}"
    )
    if _is_int(mpmd_indices):
        indices = [mpmd_indices]
    elif isinstance(mpmd_indices, Collection) and not isinstance(mpmd_indices, str | bytes):
        indices = list(mpmd_indices)
    else:
        raise wrong
    if not indices or not all(_is_int(r) for r in indices):
        raise wrong
    ranks = [operator.index(r) for r in indices]
    if len(set(ranks)) != len(ranks):
        raise wrong
    for rank in ranks:
        if not 0 <= rank < mpmd_dim:
            raise MeshError(f"mpmd_submesh: rank {rank} is outside [0, {mpmd_dim})")
    return ranks


def _is_int(value: object) -> bool:
    """Whether ``value`` is an integer (a Python or numpy one), not a bool."""
    if isinstance(value, bool | np.bool_):
        return False
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


@overload
def filter_axes(sharding_or_spec: NamedSharding, axes: Collection[str]) -> NamedSharding: ...


@overload
def filter_axes(sharding_or_spec: PartitionSpec, axes: Collection[str]) -> PartitionSpec: ...


def filter_axes(
    sharding_or_spec: NamedSharding | PartitionSpec, axes: Collection[str]
) -> NamedSharding | PartitionSpec:
    """``sharding_or_spec`` without the mesh axes ``axes`` (as NVIDIA JaxPP's ``filter_axes``).

    A dimension sharded only over dropped axes becomes unsharded (``None``); one
    sharded over a tuple of axes keeps the others. A spec naming the mpmd axis is
    valid on the lowering mesh, where that axis has size 1: dropping it changes nothing.
    """
    if isinstance(sharding_or_spec, NamedSharding):
        return NamedSharding(sharding_or_spec.mesh, filter_axes(sharding_or_spec.spec, axes))
    if not isinstance(sharding_or_spec, PartitionSpec):
        raise TypeError(
            f"filter_axes takes a NamedSharding or a PartitionSpec, got "
            f"{type(sharding_or_spec).__name__}"
        )
    dropped = set(axes)

    def keep(entry: object) -> object:
        if entry is None or entry is PartitionSpec.UNCONSTRAINED:
            return entry
        if isinstance(entry, str):
            return None if entry in dropped else entry
        kept = tuple(name for name in entry if name not in dropped)  # type: ignore[union-attr]
        if not kept:
            return None
        return kept[0] if len(kept) == 1 else kept

    return PartitionSpec(*(keep(entry) for entry in sharding_or_spec))
