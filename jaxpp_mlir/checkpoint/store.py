"""Arrays on disk as Zarr arrays (TensorStore), written and read shard by shard.

``write_arrays`` writes every array from the devices that hold it: each
shard with replica id 0 goes to its own chunk, so a sharded array is never
assembled on the host. ``read_arrays`` reads each array straight onto a
target sharding: every addressable device reads only its own slice, whatever
sharding (or process) wrote the file. TensorStore is orbax's storage layer;
it is used directly because orbax (and ``jax.experimental.array_serialization``)
refuse arrays whose devices all belong to one process in a multi-process run,
which every pipeline rank's array is.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Sharding

from jaxpp_mlir.checkpoint.leaves import CheckpointError, LeafFile
from jaxpp_mlir.runtime import options as _options
from jaxpp_mlir.runtime import records


def _tensorstore() -> Any:
    try:
        import tensorstore as ts
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "jaxpp_mlir.checkpoint needs tensorstore: pip install 'jaxpp_mlir[checkpoint]'"
        ) from e
    return ts


def _wait(future: Any, what: str) -> Any:
    """``future``'s result, waiting at most ``JAXPP_MLIR_CHECKPOINT_IO_TIMEOUT``."""
    timeout = _options.CHECKPOINT_IO_TIMEOUT.value()
    try:
        return future.result(timeout=timeout)
    except TimeoutError:
        raise CheckpointError(
            f"{what}: the storage did not finish within JAXPP_MLIR_CHECKPOINT_IO_TIMEOUT="
            f"{timeout:g} s (a slow or unreachable file system; a very large checkpoint may "
            "need a larger limit)"
        ) from None


def _spec(path: str) -> dict[str, Any]:
    return {"driver": "zarr", "kvstore": {"driver": "file", "path": os.path.abspath(path)}}


def _chunks(shape: tuple[int, ...], chunk: tuple[int, ...]) -> list[int]:
    return [max(1, c) for c in chunk] if shape else []


def _create(path: str, shape: tuple[int, ...], dtype: np.dtype, chunk: tuple[int, ...]) -> Any:
    ts = _tensorstore()
    return ts.open(
        _spec(path),
        create=True,
        delete_existing=True,
        dtype=ts.dtype(np.dtype(dtype).name),
        shape=list(shape),
        chunk_layout=ts.ChunkLayout(write_chunk_shape=_chunks(shape, chunk)),
    )


# Host bytes in flight at once (shards copied to the host and not yet written, or read and
# not yet on their device): a process's state goes through the host in batches of this size.
MAX_IN_FLIGHT_BYTES = 1 << 30


def _batches(items: Sequence[Any], sizes: Sequence[int]) -> list[list[Any]]:
    """``items`` in order, cut into batches of at most ``MAX_IN_FLIGHT_BYTES`` (or one item)."""
    batches: list[list[Any]] = [[]]
    total = 0
    for item, size in zip(items, sizes, strict=True):
        if batches[-1] and total + size > MAX_IN_FLIGHT_BYTES:
            batches.append([])
            total = 0
        batches[-1].append(item)
        total += size
    return batches


def write_arrays(items: Sequence[tuple[str, jax.Array]]) -> None:
    """Writes each ``(path, array)``: the array's shards with replica id 0, from this process."""
    for batch in _batches(items, [a.nbytes for _, a in items]):
        _write_batch(batch)


def _write_batch(items: Sequence[tuple[str, jax.Array]]) -> None:
    for _, array in items:
        for shard in array.addressable_shards:
            if shard.replica_id == 0:
                shard.data.copy_to_host_async()
    opened = [
        (_create(path, tuple(a.shape), a.dtype, a.sharding.shard_shape(a.shape)), a)
        for path, a in items
    ]
    writes = []
    for (path, _), (future, array) in zip(items, opened, strict=True):
        store = _wait(future, f"creating {path}")
        for shard in array.addressable_shards:
            if shard.replica_id == 0:
                writes.append((path, store[shard.index].write(np.asarray(shard.data))))
    for path, write in writes:
        _wait(write, f"writing {path}")


def write_host_arrays(items: Sequence[tuple[str, np.ndarray]]) -> None:
    """Writes each ``(path, numpy array)`` in one chunk."""
    opened = [(path, _create(path, x.shape, x.dtype, x.shape), x) for path, x in items]
    writes = [(path, _wait(future, f"creating {path}").write(x)) for path, future, x in opened]
    for path, write in writes:
        _wait(write, f"writing {path}")


def _open(leaf: LeafFile, shape: tuple[int, ...], dtype: str) -> Any:
    """The Zarr array of ``leaf``, once its shape and dtype are the ones expected."""
    try:
        opening = _tensorstore().open(_spec(leaf.folder), open=True)
        store = _wait(opening, f"{leaf.name}: opening {leaf.folder}")
    except CheckpointError:
        raise  # the timeout, named already
    except Exception as e:  # noqa: BLE001 - TensorStore raises ValueError, OSError, ...
        raise CheckpointError(f"{leaf.name}: cannot open {leaf.folder}: {e}") from e
    found = (tuple(store.shape), np.dtype(store.dtype.numpy_dtype).name)
    if found != (tuple(shape), np.dtype(dtype).name):
        raise CheckpointError(
            f"{leaf.name}: {leaf.folder} holds shape {found[0]} and dtype {found[1]}, but the "
            f"checkpoint's metadata says shape {tuple(shape)} and dtype {np.dtype(dtype).name}"
        )
    return store


def _result(leaf: LeafFile, future: Any) -> np.ndarray:
    try:
        return np.asarray(_wait(future, f"{leaf.name}: reading {leaf.folder}"))
    except CheckpointError:
        raise  # the timeout, named already
    except Exception as e:  # noqa: BLE001 - TensorStore raises ValueError, OSError, ...
        raise CheckpointError(f"{leaf.name}: cannot read {leaf.folder}: {e}") from e


def read_arrays(
    items: Sequence[tuple[LeafFile, tuple[int, ...], np.dtype, Sharding]],
) -> list[jax.Array]:
    """Reads each ``(leaf, shape, dtype, sharding)`` onto ``sharding``'s addressable devices."""
    sizes = [int(np.prod(shape)) * np.dtype(dtype).itemsize for _, shape, dtype, _ in items]
    arrays: list[jax.Array] = []
    for batch in _batches(items, sizes):
        arrays += _read_batch(batch)
    return arrays


def _read_batch(
    items: Sequence[tuple[LeafFile, tuple[int, ...], np.dtype, Sharding]],
) -> list[jax.Array]:
    reads: list[list[tuple[jax.Device, Any]]] = []
    for leaf, shape, dtype, sharding in items:
        store = _open(leaf, shape, dtype)
        seen: dict[str, Any] = {}
        per_device = []
        for device, index in sharding.addressable_devices_indices_map(shape).items():
            key = repr(index)
            if key not in seen:
                seen[key] = store[index].read() if shape else store.read()
            per_device.append((device, seen[key]))
        reads.append(per_device)
    arrays = []
    for per_device, (leaf, shape, _, sharding) in zip(reads, items, strict=True):
        shards = [jax.device_put(_result(leaf, read), device) for device, read in per_device]
        arrays.append(jax.make_array_from_single_device_arrays(shape, sharding, shards))
    return arrays


def read_host_array(leaf: LeafFile, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """The whole array of ``leaf`` as a numpy array."""
    return _result(leaf, _open(leaf, shape, dtype).read())


# ------------------------------------------------------------- arrays of rows


def write_rows(items: Sequence[tuple[str, jax.Array, int, int]]) -> None:
    """Writes rows ``[start, stop)`` of each ``(path, array, start, stop)`` as a Zarr array
    of their own, from the shards of them this process holds (each block once)."""
    for batch in _batches(items, [a.nbytes for _, a, _, _ in items]):
        opened, blocks = [], []
        for path, array, start, stop in batch:
            shape = (stop - start, *array.shape[1:])
            chunk = array.sharding.shard_shape(tuple(array.shape))
            opened.append(_create(path, shape, array.dtype, (min(chunk[0], shape[0]), *chunk[1:])))
            seen, mine = set(), []
            for shard in array.addressable_shards:
                rows = shard.index[0].indices(array.shape[0]) if array.ndim else (0, 0, 1)
                key = repr(shard.index)
                if start <= rows[0] and rows[1] <= stop and key not in seen:
                    seen.add(key)
                    shard.data.copy_to_host_async()
                    local = (slice(rows[0] - start, rows[1] - start), *shard.index[1:])
                    mine.append((local, shard.data))
            blocks.append(mine)
        writes = []
        for (path, *_), future, mine in zip(batch, opened, blocks, strict=True):
            store = _wait(future, f"creating {path}")
            writes += [(path, store[index].write(np.asarray(data))) for index, data in mine]
        for path, write in writes:
            _wait(write, f"writing {path}")


@records.frozen
class Rows:
    """An array on disk as Zarr arrays of consecutive rows: ``(start, stop, file)`` each."""

    parts: tuple[tuple[int, int, LeafFile], ...]
    shape: tuple[int, ...]
    dtype: str

    def read(self, index: tuple) -> Any:
        """The block ``index`` (of the whole array) read from the parts it overlaps, as a
        function giving the numpy block once every read is done."""
        rows = (index[0] if index else slice(None)).indices(self.shape[0])
        reads = []
        for start, stop, leaf in self.parts:
            first, last = max(rows[0], start), min(rows[1], stop)
            if first < last:
                store = _open(leaf, (stop - start, *self.shape[1:]), self.dtype)
                local = (slice(first - start, last - start), *index[1:])
                reads.append((leaf, store[local].read()))
        return lambda: np.concatenate([_result(leaf, read) for leaf, read in reads], axis=0)


def read_rows(items: Sequence[tuple[Rows, int, tuple[int, ...], Sharding]]) -> list[jax.Array]:
    """Each ``(rows, first, shape, sharding)``: rows ``[first, first + shape[0])`` of
    ``rows`` onto ``sharding``'s addressable devices, each device reading its block."""
    arrays = []
    sizes = [int(np.prod(shape)) * np.dtype(r.dtype).itemsize for r, _, shape, _ in items]
    for batch in _batches(items, sizes):
        pending = []
        for source, first, shape, sharding in batch:
            seen: dict[str, Any] = {}
            per_device = []
            for device, index in sharding.addressable_devices_indices_map(shape).items():
                rows = index[0].indices(shape[0])
                whole = (slice(first + rows[0], first + rows[1]), *index[1:])
                key = repr(whole)
                if key not in seen:
                    seen[key] = source.read(whole)
                per_device.append((device, seen[key]))
            pending.append((shape, sharding, per_device))
        for shape, sharding, per_device in pending:
            shards = [jax.device_put(read(), device) for device, read in per_device]
            arrays.append(jax.make_array_from_single_device_arrays(shape, sharding, shards))
    return arrays


def read_rows_host(source: Rows, first: int, stop: int) -> np.ndarray:
    """Rows ``[first, stop)`` of ``source`` as a numpy array."""
    return source.read((slice(first, stop),))()
