"""Leaves of rows held on several ranks (``stacked``): ``StackedArray``s, and arrays over
the devices of several processes (a stacked output sharded along the mpmd axis).

Saved as one Zarr array per chunk of rows (``stacked/leaf_<i>/rows_<start>_<stop>``), each
written by the first process holding it; the metadata lists the chunks. Restored into
any split: each target chunk (of a ``StackedArray``) or device block (of an array) reads
the rows it needs from the chunks they are in, or from an ``array`` leaf's one array.
"""

from __future__ import annotations

import os
from typing import Any

from jaxpp_mlir.checkpoint import confine
from jaxpp_mlir.checkpoint.leaves import CheckpointError, Leaf, LeafFile
from jaxpp_mlir.checkpoint.targets import Elsewhere, here, leaf_file, target_sharding
from jaxpp_mlir.runtime.multiprocess.remote_output import RemoteOutput
from jaxpp_mlir.runtime.plan import TensorSpec
from jaxpp_mlir.runtime.stacked_array import Chunk, StackedArray


def row_writers(leaves: list[Leaf], parts: list[dict]) -> dict[int, list[tuple]]:
    """Per ``stacked`` leaf, its chunks ``(start, stop, rank, writer)`` in row order (the
    first process holding each); raises ``CheckpointError`` unless they tile its rows."""
    found = {}
    for i, leaf in enumerate(leaves):
        if leaf.kind != "stacked":
            continue
        chunks: dict[tuple[int, int], tuple] = {}
        for p, part in enumerate(parts):
            for start, stop, rank in part["rows"].get(str(i), ()):
                chunks.setdefault((start, stop), (start, stop, rank, p))
        row = 0
        for start, stop in sorted(chunks):
            if start != row:
                held = "held by no process" if start > row else "held in overlapping chunks"
                raise CheckpointError(
                    f"leaf {leaf.path}: its rows from {min(row, start)} are {held} (a "
                    f"chunk [{start}, {stop}) follows rows [0, {row})); save the outputs of "
                    f"the program's last call"
                )
            row = stop
        if row != leaf.shape[0]:
            raise CheckpointError(
                f"leaf {leaf.path}: its rows [{row}, {leaf.shape[0]}) are held by no process"
            )
        found[i] = [chunks[key] for key in sorted(chunks)]
    return found


def rows_folder(i: int, start: int, stop: int) -> str:
    return f"stacked/leaf_{i}/rows_{start}_{stop}"


def write_rows(path: str, leaves: list[Leaf], rows: dict[int, list], me: int) -> list[str]:
    """Writes the chunks of ``stacked`` leaves this process is the writer of."""
    from jaxpp_mlir.checkpoint import store as checkpoint_store

    items = []
    for i, chunks in rows.items():
        held = {(start, stop): (array, first) for start, stop, _, array, first in leaves[i].chunks}
        for start, stop, _, writer in chunks:
            if writer == me:
                array, first = held[(start, stop)]
                folder = os.path.join(path, rows_folder(i, start, stop))
                items.append((folder, array, start - first, stop - first))
    checkpoint_store.write_rows(items)
    return [os.path.relpath(folder, path) for folder, _, _, _ in items]


def _rows(path: str, manifest: dict | None, item: dict) -> Any:
    """Where a leaf's rows are on disk: its chunks (a ``stacked`` leaf) or its one array."""
    from jaxpp_mlir.checkpoint import store as checkpoint_store

    name = f"leaf {item['path']} of the checkpoint {path}"
    whole = leaf_file(path, manifest, item)
    if item["kind"] != "stacked":
        parts = ((0, item["shape"][0], whole),)
    else:
        parts = tuple(_chunk_file(path, item, chunk, name) for chunk in item.get("chunks", ()))
    return checkpoint_store.Rows(parts, tuple(item["shape"]), item["dtype"])


def _chunk_file(path: str, item: dict, chunk: Any, name: str) -> tuple[int, int, LeafFile]:
    """One chunk of a ``stacked`` leaf: its rows and its folder, inside the leaf's folder."""
    try:
        start, stop = (int(r) for r in chunk["rows"])
        folder = chunk["file"]
        inside = os.path.normpath(folder).startswith(os.path.normpath(item["file"]) + os.sep)
    except (TypeError, KeyError, ValueError):
        inside = False
    if not inside:
        raise CheckpointError(f"{name}: its chunk {chunk!r} is not a folder of rows of the leaf")
    confine.leaf_files(path, folder, name)
    return start, stop, LeafFile(os.path.join(path, folder), name)


def rows_into(
    path: str, manifest: dict | None, item: dict, target: Any, index: int, reads: list
) -> Any:
    """A leaf read as rows: into a ``StackedArray`` target chunk by chunk, into any other
    target whole; reads onto this process's devices are queued in ``reads``."""
    from jaxpp_mlir.checkpoint import store as checkpoint_store

    rows = _rows(path, manifest, item)
    if item.get("key") is not None:
        raise CheckpointError(f"leaf {item['path']}: typed keys are not restored as rows")
    if not isinstance(target, StackedArray):
        sharding = target_sharding(target)
        if sharding is None:
            return checkpoint_store.read_rows_host(rows, 0, rows.shape[0])
        if not here(sharding):
            return _rows_placeholder(rows, 0, rows.shape, target, index)
        reads.append((index, None, (rows, 0, rows.shape, sharding)))
        return None
    chunks = []
    for k, chunk in enumerate(target.chunks):
        start, stop = chunk.rows.start, chunk.rows.stop
        shape = (stop - start, *rows.shape[1:])
        sharding = target_sharding(chunk.array)
        if sharding is None or not here(sharding):
            array = _rows_placeholder(rows, start, shape, chunk.array, index, chunk.rank)
        else:
            array = None
            reads.append((index, k, (rows, start, shape, sharding)))
        chunks.append(Chunk(chunk.rows, chunk.rank, array))
    return chunks


def _rows_placeholder(
    rows: Any, start: int, shape: tuple, target: Any, index: int, rank: int = -1
) -> RemoteOutput:
    """Rows held by another process: a ``RemoteOutput`` that reads them here if needed."""
    from jaxpp_mlir.checkpoint import store as checkpoint_store

    sharding = None if target_sharding(target) in (None, Elsewhere) else target_sharding(target)
    process = target.process if isinstance(target, RemoteOutput) else -1
    if sharding is not None and process < 0:
        process = min(d.process_index for d in sharding.device_set)
    spec = TensorSpec(tuple(shape), rows.dtype)
    stop = start + shape[0]
    rank = rank if rank >= 0 else getattr(target, "rank", -1)
    return RemoteOutput(
        -1, -1, index, rank, process, spec, sharding,
        lambda: checkpoint_store.read_rows_host(rows, start, stop),
    )  # fmt: skip
