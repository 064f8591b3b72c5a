"""JaxPP's ``MpmdSharding`` and ``MpmdArray``, and moves between SPMD and MPMD layouts.

An ``MpmdArray`` is one logical array held by one or more ranks (``mpmd_idxs``)
of an ``MpmdMesh``: one ``jax.Array`` per rank this process holds, each on that
rank's submesh with the same spec. ``spmd_to_mpmd_reshard`` moves arrays laid out
over the whole mesh (say, a checkpoint loaded with SPMD JAX) onto the ranks a
compiled step reads them from; ``mpmd_to_spmd_reshard`` moves results back.
jaxpp_mlir's own steps take and return plain ``jax.Array``s; the compat entry
points also take ``MpmdArray``s (each reads its first replica).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from jaxpp_mlir.errors import CallError
from jaxpp_mlir.mesh import MpmdMesh, filter_axes
from jaxpp_mlir.runtime import records


@records.frozen
class MpmdSharding:
    """Ranks ``mesh_ids`` of ``mpmd_mesh`` each hold the array, laid out by ``spec``.

    The spec never names the mpmd axis (it is dropped: it has size 1 on each rank).
    """

    mpmd_mesh: MpmdMesh
    mesh_ids: Collection[int]
    spec: PartitionSpec

    def __post_init__(self) -> None:
        mesh = check_mpmd_mesh(self.mpmd_mesh, "MpmdSharding")
        object.__setattr__(self, "mesh_ids", _rank_set(self.mesh_ids, mesh))
        if not isinstance(self.spec, PartitionSpec):
            raise CallError(f"MpmdSharding: spec must be a PartitionSpec, got {kind_of(self.spec)}")
        object.__setattr__(self, "spec", filter_axes(self.spec, {mesh.mpmd_axis_name}))

    @property
    def sharding(self) -> NamedSharding:
        """The spec on the submesh of all of ``mesh_ids`` (what SPMD resharding targets)."""
        return NamedSharding(self.mpmd_mesh.mpmd_submesh(sorted(self.mesh_ids)).jax_mesh, self.spec)


class MpmdArray:
    """One logical array on ranks ``mpmd_idxs``: the arrays of the ranks this process holds.

    ``partially_addressable_arrays`` has one ``jax.Array`` per held rank, each on that
    rank's submesh; a process holding none gives ``shape`` and ``dtype`` instead.
    """

    def __init__(
        self,
        partially_addressable_arrays: list[jax.Array],
        mpmd_sharding: MpmdSharding,
        shape: tuple[int, ...] | None = None,
        dtype: Any = None,
        *,
        received: Callable[[], list[jax.Array]] | None = None,
    ):
        if not isinstance(mpmd_sharding, MpmdSharding):
            raise CallError(
                f"MpmdArray: mpmd_sharding must be an MpmdSharding, got {kind_of(mpmd_sharding)} "
                "(build one: MpmdSharding(mpmd_mesh, mesh_ids, spec))"
            )
        _check_local_arrays(partially_addressable_arrays)
        mesh = mpmd_sharding.mpmd_mesh
        self._received = received  # makes this process's copies of a value it received
        self._mpmd_sharding = mpmd_sharding
        self._mpmd_idxs = tuple(sorted(mpmd_sharding.mesh_ids))
        self._arrays: dict[int, jax.Array] = {}
        for position, array in enumerate(partially_addressable_arrays):
            rank = _rank_of(array, mesh)
            if rank is None:
                raise CallError(
                    f"MpmdArray: array {position} {array.shape} is not on one rank's submesh "
                    f"of {mesh!r}"
                )
            if rank not in mpmd_sharding.mesh_ids or rank in self._arrays:
                raise CallError(
                    f"MpmdArray: array {position} {array.shape} is on rank {rank}, which is "
                    f"{'given twice' if rank in self._arrays else 'not in'} mpmd_idxs="
                    f"{self._mpmd_idxs}"
                )
            _check_spec(array, position, mpmd_sharding)
            self._arrays[rank] = array
        self._arrays = dict(sorted(self._arrays.items()))
        if self._arrays:
            first = next(iter(self._arrays.values()))
            shape = tuple(first.shape) if shape is None else shape
            dtype = first.dtype if dtype is None else dtype
            for rank, array in self._arrays.items():
                if tuple(array.shape) != tuple(shape) or array.dtype != dtype:
                    raise CallError(
                        f"MpmdArray: rank {rank}'s array is {array.dtype}{list(array.shape)}, "
                        f"not {dtype}{list(shape)}"
                    )
        elif shape is None or dtype is None:
            raise CallError("MpmdArray: give shape and dtype when this process holds no rank")
        self.shape = tuple(shape)
        # A numpy dtype, or an extended one (a typed PRNG key) kept as it is.
        self.dtype = dtype if jax.dtypes.issubdtype(dtype, jax.dtypes.extended) else np.dtype(dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def spec(self) -> PartitionSpec:
        return self._mpmd_sharding.spec

    @property
    def mpmd_sharding(self) -> MpmdSharding:
        return self._mpmd_sharding

    @property
    def sharding(self) -> NamedSharding:
        """The spec on the submesh of every holding rank (not ``to_mpmd_local_array``'s)."""
        return self._mpmd_sharding.sharding

    @property
    def mpmd_idxs(self) -> tuple[int, ...]:
        return self._mpmd_idxs

    @property
    def is_mpmd_replicated(self) -> bool:
        """Whether several ranks hold a copy."""
        return len(self._mpmd_idxs) > 1

    @property
    def is_partially_addressable(self) -> bool:
        """Whether this process holds the array on some rank."""
        return bool(self._arrays) or self._received is not None

    def _local_arrays(self) -> dict[int, jax.Array]:
        """This process's copies, by rank (a received value's made now, on first use)."""
        if self._received is not None:
            made, self._received = self._received(), None
            self._arrays = {_rank_of(a, self._mpmd_sharding.mpmd_mesh): a for a in made}
        return self._arrays

    @property
    def to_mpmd_local_array(self) -> jax.Array | list[jax.Array] | None:
        """This process's copy (a list when it holds several ranks); None when it holds none."""
        arrays = list(self._local_arrays().values())
        if not arrays:
            return None
        return arrays[0] if len(arrays) == 1 else arrays

    @property
    def first_mpmd_replica(self) -> jax.Array | None:
        """The copy of the lowest holding rank, when this process holds it."""
        return self._local_arrays().get(self._mpmd_idxs[0]) if self._mpmd_idxs else None

    def is_deleted(self) -> bool:
        return any(array.is_deleted() for array in self._arrays.values())

    def delete(self) -> None:
        for array in self._arrays.values():
            array.delete()

    def block_until_ready(self) -> MpmdArray:
        for array in self._local_arrays().values():
            array.block_until_ready()
        return self

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        array = self._readable()
        return np.asarray(array, dtype=dtype)

    def __int__(self) -> int:
        return int(self._readable())

    def __float__(self) -> float:
        return float(self._readable())

    def __format__(self, format_spec: str) -> str:
        return format(self._readable(), format_spec)

    def _readable(self) -> jax.Array:
        arrays = list(self._local_arrays().values())
        if not arrays:
            raise CallError(
                f"this process holds no copy of the array on ranks {self._mpmd_idxs} "
                "(read it on a process of those ranks, or move it with mpmd_to_spmd_reshard)"
            )
        return arrays[0]

    def __repr__(self) -> str:
        return (
            f"MpmdArray(shape={self.shape}, dtype={self.dtype}, "
            f"mpmd_idxs={self._mpmd_idxs}, sharding={self.sharding})"
        )


def _rank_of(array: jax.Array, mesh: MpmdMesh) -> int | None:
    """The rank whose submesh is exactly ``array``'s devices; None when there is none."""
    devices = set(array.sharding.device_set)
    for rank in range(mesh.mpmd_dim):
        if devices == set(mesh.rank_devices(rank)):
            return rank
    return None


def kind_of(value: Any) -> str:
    """``value``'s type as an error names it: ``a numpy.ndarray``, ``the int 1``."""
    if value is None:
        return "None"
    if isinstance(value, bool | int | float | str):
        return f"the {type(value).__name__} {value!r}"
    kind = type(value)
    module = kind.__module__.split(".")[0]
    name = kind.__name__ if module in ("builtins", "jaxpp_mlir") else f"{module}.{kind.__name__}"
    return f"an {name}" if name[0].lower() in "aeiou" else f"a {name}"


def check_mpmd_mesh(mesh: Any, where: str) -> MpmdMesh:
    """``mesh``, once it is an ``MpmdMesh``; ``where`` names the function in the error."""
    if isinstance(mesh, MpmdMesh):
        return mesh
    if mesh is None:
        raise CallError(f"{where} needs mpmd_mesh (an MpmdMesh)")
    hint = (
        " (wrap it: MpmdMesh(mesh, mpmd_axis_name))" if isinstance(mesh, jax.sharding.Mesh) else ""
    )
    raise CallError(f"{where}: mpmd_mesh must be an MpmdMesh, got {kind_of(mesh)}{hint}")


def _rank_set(mesh_ids: Any, mesh: MpmdMesh) -> frozenset[int]:
    """``mesh_ids`` (a collection of ranks of ``mesh``) as a frozenset."""
    if not isinstance(mesh_ids, Collection) or isinstance(mesh_ids, str | bytes):
        raise CallError(
            f"MpmdSharding: mesh_ids must be a collection of ranks (say {{0}}), got "
            f"{kind_of(mesh_ids)}"
        )
    ranks = set()
    for rank in mesh_ids:
        if isinstance(rank, bool | np.bool_) or not isinstance(rank, int | np.integer):
            raise CallError(f"MpmdSharding: mesh_ids holds {kind_of(rank)}, not a rank")
        if not 0 <= rank < mesh.mpmd_dim:
            raise CallError(
                f"MpmdSharding: mesh_ids holds rank {int(rank)}, outside the mesh's ranks "
                f"[0, {mesh.mpmd_dim})"
            )
        ranks.add(int(rank))
    return frozenset(ranks)


def _check_local_arrays(arrays: Any) -> None:
    if isinstance(arrays, jax.Array) or not isinstance(arrays, list | tuple):
        raise CallError(
            f"MpmdArray: partially_addressable_arrays must be a list of jax.Arrays (one per "
            f"rank this process holds), got {kind_of(arrays)}"
        )
    for position, array in enumerate(arrays):
        if not isinstance(array, jax.Array):
            raise CallError(
                f"MpmdArray: partially_addressable_arrays[{position}] is {kind_of(array)}, not "
                f"a jax.Array on a rank's submesh: put it there first (jax.device_put(x, "
                f"NamedSharding(mpmd_mesh.rank_mesh(rank), spec)))"
            )


def _check_spec(array: jax.Array, position: int, mpmd_sharding: MpmdSharding) -> None:
    """``array`` is laid out by ``mpmd_sharding.spec`` on its rank (axes of size 1 aside)."""
    mesh = mpmd_sharding.mpmd_mesh
    spec = getattr(array.sharding, "spec", None)
    if not isinstance(spec, PartitionSpec):
        if not array.sharding.is_fully_replicated:
            return  # a sharding without a spec: nothing to compare
        spec = PartitionSpec()
    found = _canonical_spec(spec, mesh)
    wanted = _canonical_spec(mpmd_sharding.spec, mesh)
    if found != wanted:
        raise CallError(
            f"MpmdArray: array {position} {array.shape} is laid out as {spec}, but "
            f"mpmd_sharding.spec is {mpmd_sharding.spec}"
        )


def _canonical_spec(spec: PartitionSpec, mesh: MpmdMesh) -> tuple:
    """``spec`` without the mpmd axis, axes of size 1 and trailing unsharded dimensions."""
    sizes = dict(zip(mesh.jax_mesh.axis_names, mesh.jax_mesh.devices.shape, strict=True))
    dims = []
    for entry in filter_axes(spec, {mesh.mpmd_axis_name}):
        names = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
        dims.append(tuple(n for n in names if sizes.get(n, 0) != 1))
    while dims and not dims[-1]:
        dims.pop()
    return tuple(dims)


def spmd_to_mpmd_reshard(
    mpmd_mesh: MpmdMesh, spmd_arrays: Any, mpmd_shardings: Any, threshold: int | None = None
) -> Any:
    """``spmd_arrays`` (a pytree over the whole mesh) as ``MpmdArray``s on their ranks.

    ``mpmd_shardings`` is a matching pytree of ``MpmdSharding`` (say a compiled
    step's ``in_shardings``); an empty ``mesh_ids`` means rank 0. The inputs are
    consumed (deleted), as in JaxPP. ``threshold`` (JaxPP's memory chunking) is
    accepted and unused: each array moves in one ``jax.device_put``.
    """
    del threshold
    check_mpmd_mesh(mpmd_mesh, "spmd_to_mpmd_reshard")
    flat, treedef = jax.tree_util.tree_flatten_with_path(spmd_arrays)
    arrays = [array for _, array in flat]
    shardings = _matching(
        "spmd_to_mpmd_reshard", "spmd_arrays", treedef, "mpmd_shardings", mpmd_shardings
    )
    for (path, _), target in zip(flat, shardings, strict=True):
        if not isinstance(target, MpmdSharding):
            raise CallError(
                f"spmd_to_mpmd_reshard: mpmd_shardings{jax.tree_util.keystr(path)} is "
                f"{kind_of(target)}, not an MpmdSharding"
            )
    moved = []
    for array, target in zip(arrays, shardings, strict=True):
        ranks = sorted(target.mesh_ids) or [0]
        target = MpmdSharding(mpmd_mesh, ranks, target.spec)
        me = jax.process_index()
        copies = [
            _copy_to(array, NamedSharding(mpmd_mesh.rank_mesh(rank), target.spec))
            for rank in ranks
            if any(d.process_index == me for d in mpmd_mesh.rank_devices(rank))
        ]
        moved.append(MpmdArray(copies, target, shape=tuple(array.shape), dtype=array.dtype))
    for array in arrays:  # consumed, as in JaxPP (after every move: one may be given twice)
        if isinstance(array, jax.Array) and not array.is_deleted():
            array.delete()
    return jax.tree_util.tree_unflatten(treedef, moved)


def _copy_to(array: Any, sharding: NamedSharding) -> jax.Array:
    """``array`` laid out by ``sharding`` in buffers of its own (``jax.device_put`` reuses
    a shard already on its device, which deleting ``array`` would then delete)."""
    moved = jax.device_put(array, sharding)
    if not isinstance(array, jax.Array):
        return moved
    mine = {shard.data.unsafe_buffer_pointer() for shard in array.addressable_shards}
    if any(shard.data.unsafe_buffer_pointer() in mine for shard in moved.addressable_shards):
        moved = jax.jit(jnp.copy)(moved)
    return moved


def mpmd_to_spmd_reshard(
    mpmd_mesh: MpmdMesh, mpmd_arrays: Any, spmd_shardings: Any, threshold: int | None = None
) -> Any:
    """``mpmd_arrays`` (``MpmdArray``s or jax arrays on some ranks) laid out by
    ``spmd_shardings`` (a matching pytree of ``NamedSharding`` over the whole mesh).

    One process: each array's first replica is put there with ``jax.device_put``.
    """
    del threshold
    check_mpmd_mesh(mpmd_mesh, "mpmd_to_spmd_reshard")
    if jax.process_count() > 1:
        raise NotImplementedError(
            "mpmd_to_spmd_reshard with several processes is not supported by jaxpp_mlir: "
            "gather the outputs with CompiledProgram.gather and put them with jax.device_put"
        )

    def local_copy(path: Any, leaf: Any) -> Any:
        if not isinstance(leaf, MpmdArray):
            return leaf
        copy = leaf.first_mpmd_replica
        if copy is None:
            raise CallError(
                f"mpmd_to_spmd_reshard: mpmd_arrays{jax.tree_util.keystr(path)} ({leaf!r}) has "
                f"no copy in this process, so there is nothing to move: build it from the "
                f"arrays of its ranks (MpmdArray([array], mpmd_sharding))"
            )
        return copy

    copies = jax.tree_util.tree_map_with_path(
        local_copy, mpmd_arrays, is_leaf=lambda x: isinstance(x, MpmdArray)
    )
    return jax.device_put(copies, spmd_shardings)


def _matching(where: str, name: str, treedef: Any, other_name: str, other: Any) -> list[Any]:
    """The leaves of ``other`` matching ``treedef`` (the structure of argument ``name``)."""
    try:
        return treedef.flatten_up_to(other)
    except (ValueError, TypeError) as e:
        raise CallError(
            f"{where}: {other_name} must have the structure of {name} ({treedef}): "
            f"{str(e).splitlines()[0][:200]}"
        ) from None


def as_jax_array(leaf: Any) -> Any:
    """An ``MpmdArray`` argument as the jax array a compiled step reads (its first copy)."""
    if not isinstance(leaf, MpmdArray):
        return leaf
    if not leaf.is_partially_addressable:
        raise ValueError(
            f"an argument {leaf!r} is held by no rank of this process: each process passes "
            "the arrays of its own ranks"
        )
    local = leaf.to_mpmd_local_array
    return local[0] if isinstance(local, list) else local


def as_mpmd_array(leaf: Any, mesh: MpmdMesh, key_impl: Any = None) -> Any:
    """A compiled step's output as JaxPP returns it: an ``MpmdArray`` on its ranks.

    An output held by another process (a ``RemoteOutput``) holds no copy here; one
    on the devices of several ranks (a small result replicated to every rank)
    gives one copy per rank, each on that rank's submesh; one split over several ranks (a
    stacked parameter's rows, or a ``StackedArray``) stays as it is. A typed PRNG key stays
    the ``jax.Array`` it is (``jax.random`` takes no other type): a key received
    from another process (``key_impl``, its PRNG implementation) is wrapped here.
    """
    from jaxpp_mlir.runtime.multiprocess.remote_output import RemoteOutput

    if isinstance(leaf, jax.Array) and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
        return leaf
    if isinstance(leaf, RemoteOutput) and key_impl is not None and leaf.shared is not None:
        return _received_key(leaf, mesh, key_impl)
    if isinstance(leaf, RemoteOutput):
        spec = getattr(leaf.sharding, "spec", PartitionSpec())
        if leaf.shared is not None:  # every process receives it: a copy on each of its ranks
            return _shared_array(leaf, mesh)
        return MpmdArray([], MpmdSharding(mesh, (leaf.rank,), spec), leaf.shape, leaf.dtype)
    if not isinstance(leaf, jax.Array):
        return leaf
    spec = getattr(leaf.sharding, "spec", PartitionSpec())
    rank = _rank_of(leaf, mesh)
    if rank is not None:
        return MpmdArray([leaf], MpmdSharding(mesh, (rank,), spec))
    if not leaf.sharding.is_fully_replicated:
        # Rows split over ranks (a stacked parameter whose layers are split into stages):
        # an MpmdArray holds copies, not parts, so the array is returned as it is.
        return leaf
    devices = leaf.sharding.device_set
    ranks = [r for r in range(mesh.mpmd_dim) if devices.intersection(mesh.rank_devices(r))]
    copies = []
    for r in ranks:
        if not leaf.sharding.is_fully_replicated:
            spec = PartitionSpec()
        on_rank = NamedSharding(mesh.rank_mesh(r), spec)
        if all(d.process_index == jax.process_index() for d in mesh.rank_devices(r)):
            copies.append(jax.device_put(leaf, on_rank))
    return MpmdArray(copies, MpmdSharding(mesh, ranks, spec), tuple(leaf.shape), leaf.dtype)


def _shared_array(leaf: Any, mesh: MpmdMesh) -> MpmdArray:
    """A small output of another process, received here: one copy per rank of this process
    (made when first read), on the ranks of both processes."""
    me = jax.process_index()
    local = [
        r for r in range(mesh.mpmd_dim) if all(d.process_index == me for d in mesh.rank_devices(r))
    ]
    ranks = sorted({leaf.rank, *local})
    sharding = MpmdSharding(mesh, tuple(ranks), PartitionSpec())

    def copies() -> list[jax.Array]:
        value = leaf.value()
        replicated = [NamedSharding(mesh.rank_mesh(r), PartitionSpec()) for r in local]
        return [jax.device_put(value, sharding) for sharding in replicated]

    return MpmdArray([], sharding, leaf.shape, leaf.dtype, received=copies if local else None)


def _received_key(leaf: Any, mesh: MpmdMesh, key_impl: Any) -> jax.Array:
    """A small key output of another process, received here: a key on this process's
    first rank (the whole step runs on one process's devices or several's)."""
    me = jax.process_index()
    local = [
        r for r in range(mesh.mpmd_dim) if all(d.process_index == me for d in mesh.rank_devices(r))
    ]
    data = leaf.value()
    key = jax.random.wrap_key_data(data, impl=key_impl)
    if not local:
        return key
    return jax.device_put(key, NamedSharding(mesh.rank_mesh(local[0]), PartitionSpec()))


def as_mpmd_arrays(tree: Any, mesh: MpmdMesh, key_impls: Any = None) -> Any:
    """Every output of ``tree`` wrapped by ``as_mpmd_array`` (``key_impls``: per flat
    output, the PRNG implementation of a typed-key output, else None)."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    impls = key_impls if key_impls is not None else [None] * len(leaves)
    wrapped = [as_mpmd_array(x, mesh, impl) for x, impl in zip(leaves, impls, strict=True)]
    return jax.tree_util.tree_unflatten(treedef, wrapped)
