"""Stage-local checkpoints: every array saved and restored where it lives, in any process.

A pipelined program's parameters and optimizer state are ``jax.Array``s on
their rank's submesh; with several processes each process holds its own
ranks' arrays and ``RemoteOutput`` placeholders for the others'. The format
makes the process count irrelevant:

```
path/
  .jaxpp_mlir_checkpoint  written first: marks the directory as a checkpoint
  metadata.json        by process 0 once every leaf is written: format, version, and
                       per leaf (in flattening order) its key path, kind, shape, dtype,
                       file, PartitionSpec, device group and rank when known
  manifest.json        written last, by process 0: the checksum of every other file
  group_0/leaf_3/      one Zarr array per array leaf, in the directory of the device
  group_1/leaf_7/      group (a rank's submesh) that holds it, written shard by shard
  stacked/leaf_5/rows_0_2/   a leaf of rows on several ranks (a StackedArray, an array
                       sharded over processes): one Zarr array per chunk of rows, written
                       by the first process holding it
  host/leaf_9/         numpy leaves, written by process 0
```

Python scalars (bool, int, float, str) live in ``metadata.json``. ``restore``
checks every file it reads against the manifest first (``checkpoint.manifest``),
and each leaf's type, shape and dtype against the metadata and the target. Each
process writes only the arrays it holds, each shard from its device (see
``checkpoint_store``); nothing is gathered. With several processes ``save``
is collective (every process calls it with the same path and a tree of the
same structure); its three meetings (who holds what, all written, metadata
committed) wait at most ``timeout_s``.

``restore(path, like)`` reads the leaves back onto the shardings of
``like``'s leaves: a pytree of arrays (the state of the program to continue
with, its ``RemoteOutput``s included), ``ShapeDtypeStruct``s with shardings,
or the ``program.placement(...)`` of one. A process reads only the leaves it
holds, each device only its slice; a leaf held by another process comes back
as a ``RemoteOutput`` placeholder that the program accepts as an argument (and
reads from the checkpoint if this process needs it too, say an optimizer's
step count that every rank reads). Only the target shardings matter, so a
checkpoint restores into another process count on the same devices and into
a program with another schedule over the same stages. Restore is not
collective.

``pip install 'jaxpp_mlir[checkpoint]'`` installs TensorStore, imported on first use.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import shutil
from typing import Any

import jax
import numpy as np
from jax.sharding import NamedSharding, SingleDeviceSharding

from jaxpp_mlir.checkpoint import confine, rows
from jaxpp_mlir.checkpoint import manifest as manifests
from jaxpp_mlir.checkpoint.leaves import (
    CheckpointError,
    Leaf,
    describe,
    entry,
    key_name,
    match,
)
from jaxpp_mlir.checkpoint.leaves import python_value as _python_value
from jaxpp_mlir.checkpoint.targets import Elsewhere, here, leaf_file, target_sharding
from jaxpp_mlir.runtime import options as _options
from jaxpp_mlir.runtime.multiprocess.remote_output import RemoteOutput
from jaxpp_mlir.runtime.plan import TensorSpec
from jaxpp_mlir.runtime.stacked_array import StackedArray

__all__ = ["CheckpointError", "restore", "save"]

logger = logging.getLogger(__name__)

FORMAT = "jaxpp_mlir.checkpoint"
VERSION = 2  # 2: with a manifest
READABLE_VERSIONS = (1, 2)  # 1: saved before manifests existed (read without checksums)
METADATA = "metadata.json"
MARKER = ".jaxpp_mlir_checkpoint"
_saves = itertools.count()  # every process saves in the same order: names the meetings


def save(
    path: str | os.PathLike, tree: Any, *, force: bool = False, timeout_s: float | None = None
) -> None:
    """Writes ``tree`` (arrays where they live, ``RemoteOutput``s, ``StackedArray``s, numpy
    arrays, Python scalars) to the directory ``path``; every process calls it.

    ``force`` replaces an existing checkpoint (and nothing else); ``timeout_s`` bounds each wait
    for the other processes (default: ``JAXPP_MLIR_SETUP_TIMEOUT``).
    """
    path = os.path.abspath(os.fspath(path))
    me, count = jax.process_index(), jax.process_count()
    if count == 1:
        leaves = describe(tree)
        _start(path, force)
        _save(path, leaves, [_what_i_hold(path, leaves)], me)
        logger.info("saved checkpoint %s (%d leaves)", path, len(leaves))
        return
    from jaxpp_mlir.runtime.failure import watchdog
    from jaxpp_mlir.runtime.multiprocess.coordination import Exchange

    dog = watchdog.current()
    timeout = _options.SETUP_TIMEOUT.value() if timeout_s is None else timeout_s
    exchange = Exchange(
        f"checkpoint{next(_saves)}", me, count, timeout, check=dog.check if dog else None
    )
    try:  # any failure is published, so that no other process waits for this one
        leaves = describe(tree)
        if me == 0:
            _start(path, force)  # before process 0 publishes: nobody writes into an old one
        mine = json.dumps(_what_i_hold(path, leaves))
        parts = [json.loads(p) for p in exchange.gather("begin", mine)]
        _check_same_save(parts, path)
        _save(path, leaves, parts, me, exchange)
    except BaseException as e:
        exchange.fail(f"checkpoint.save({path!r}): {type(e).__name__}: {e}")
        raise
    logger.info("saved checkpoint %s (%d leaves, process %d of %d)", path, len(leaves), me, count)


def _what_i_hold(path: str, leaves: list[Leaf]) -> dict[str, Any]:
    """This process's part of the first meeting: its path, leaves, and what it holds."""
    return {
        "path": path,
        "leaves": [leaf.path for leaf in leaves],
        "held": {str(i): leaf.public() for i, leaf in enumerate(leaves) if leaf.kind == "array"},
        "ranks": {str(i): leaf.rank for i, leaf in enumerate(leaves) if leaf.rank is not None},
        "rows": {str(i): leaf.public()["chunks"] for i, leaf in enumerate(leaves) if leaf.chunks},
    }


def _save(path: str, leaves: list[Leaf], parts: list[dict], me: int, exchange: Any = None) -> None:
    """Writes this process's leaves, then (process 0, once all have written) the metadata."""
    owners = _owners(leaves, parts)
    groups = {i: tuple(parts[p]["held"][str(i)]["devices"]) for i, p in owners.items()}
    chunks = rows.row_writers(leaves, parts)
    written = _write(path, leaves, owners, groups, me)
    written += rows.write_rows(path, leaves, chunks, me)
    files = manifests.checksums(path, written)
    if exchange is not None:
        everyone = exchange.gather("written", json.dumps(files))
        files = {f: c for part in everyone for f, c in json.loads(part).items()}
    if me == 0:
        _write_metadata(path, leaves, owners, groups, parts, chunks)
        manifests.write(path, files, METADATA)  # the checkpoint is complete
    if exchange is not None:
        exchange.gather("committed", "ok", processes=[0])


def restore(path: str | os.PathLike, like: Any) -> Any:
    """The checkpoint at ``path``, each leaf placed with the sharding of ``like``'s leaf.

    Raises ``CheckpointError`` naming the leaf when ``like`` has another
    structure, shape or dtype than the checkpoint.
    """
    path = os.path.abspath(os.fspath(path))
    manifest = None if _saved_without_manifest(path) else manifests.read(path)
    metadata = _read_metadata(path, manifest)
    pairs, treedef = match(metadata["leaves"], like, path)
    reads, result, row_reads = [], [], []
    for index, (item, target) in enumerate(pairs):
        key = key_name(target.dtype) if item["kind"] != "python" else None
        if item["kind"] == "python":
            result.append(_python_value(item))
        elif isinstance(target, StackedArray) or item["kind"] == "stacked":
            result.append(rows.rows_into(path, manifest, item, target, index, row_reads))
        elif target_sharding(target) is None:  # a numpy array (or shape) wanted: on the host
            result.append(_as_keys(_host(path, manifest, item), key))
        elif not here(target_sharding(target)):
            result.append(_placeholder(path, manifest, item, target, index))
        else:
            sharding = _data_sharding(target_sharding(target), key, item)
            reads.append((index, item, sharding, leaf_file(path, manifest, item), key))
            result.append(None)
    if reads:
        from jaxpp_mlir.checkpoint import store as checkpoint_store

        arrays = checkpoint_store.read_arrays(
            [(file, tuple(item["shape"]), item["dtype"], sh) for _, item, sh, file, _ in reads]
        )
        for (index, _, _, _, key), array in zip(reads, arrays, strict=True):
            result[index] = _as_keys(array, key)
    if row_reads:
        from jaxpp_mlir.checkpoint import store as checkpoint_store

        arrays = checkpoint_store.read_rows([read for *_, read in row_reads])
        for (index, k, _), array in zip(row_reads, arrays, strict=True):
            if k is None:
                result[index] = array
            else:
                result[index][k] = result[index][k]._replace(array=array)
    for index, (_, target) in enumerate(pairs):
        if isinstance(target, StackedArray):
            result[index] = StackedArray(result[index])
    return jax.tree_util.tree_unflatten(treedef, result)


# ------------------------------------------------------------------ saving


def _start(path: str, force: bool) -> None:
    """An empty directory at ``path``, marked as a checkpoint (an existing checkpoint is
    replaced only with ``force``; anything else is never)."""
    if os.path.lexists(path):
        if not force:
            raise CheckpointError(f"{path} exists; pass force=True to overwrite it")
        if not _is_checkpoint(path):
            raise CheckpointError(
                f"{path} exists and is not a checkpoint (no {MARKER} or {METADATA} of its own "
                f"in it, links aside): force=True replaces only a checkpoint; remove it "
                f"yourself or save elsewhere"
            )
        shutil.rmtree(path)
    os.makedirs(path)
    with open(os.path.join(path, MARKER), "w") as handle:
        handle.write(f"{FORMAT} {VERSION}\n")


def _is_checkpoint(path: str) -> bool:
    """Whether ``path`` is a checkpoint that ``save(force=True)`` may replace: a folder (no
    link) that is empty or holds the marker or the metadata as files of its own (a link is
    never followed, so nothing outside ``path`` is read, and removing the folder removes
    links, never what they point to)."""
    if os.path.islink(path) or not os.path.isdir(path):
        return False
    if not os.listdir(path) or confine.replaceable(path, MARKER):
        return True
    if not confine.replaceable(path, METADATA):
        return False
    try:
        with open(os.path.join(path, METADATA), "rb") as handle:
            return json.loads(handle.read()).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def _check_same_save(parts: list[dict], path: str) -> None:
    for p, part in enumerate(parts):
        if part["path"] != path:
            raise CheckpointError(
                f"process {p} saves to {part['path']} but process {jax.process_index()} to "
                f"{path}; every process must call checkpoint.save with the same path"
            )
        if part["leaves"] != parts[0]["leaves"]:
            differ = next(
                (a for a, b in zip(part["leaves"], parts[0]["leaves"], strict=False) if a != b),
                f"count {len(part['leaves'])} against {len(parts[0]['leaves'])}",
            )
            raise CheckpointError(
                f"process {p} saves a tree of another structure than process 0 (leaf "
                f"{differ}); every process must save the same tree (its outputs held "
                f"elsewhere as RemoteOutput)"
            )


def _owners(leaves: list[Leaf], parts: list[dict]) -> dict[int, int]:
    """Each array leaf's writer: the first process that holds it."""
    owners = {}
    for i, leaf in enumerate(leaves):
        if leaf.kind not in ("array", "remote"):
            continue
        holders = [p for p, part in enumerate(parts) if str(i) in part["held"]]
        if not holders:
            raise CheckpointError(
                f"leaf {leaf.path} is held by no process (a RemoteOutput in every process); "
                f"save the outputs of the program's last call"
            )
        owners[i] = holders[0]
    return owners


def _group_names(groups: dict[int, tuple[int, ...]]) -> dict[tuple[int, ...], str]:
    ordered = sorted(set(groups.values()))
    return {devices: f"group_{k}" for k, devices in enumerate(ordered)}


def _file(leaves: list[Leaf], groups: dict, i: int) -> str | None:
    if leaves[i].kind == "python":
        return None
    if leaves[i].kind == "host":
        return f"host/leaf_{i}"
    if leaves[i].kind == "stacked":
        return f"stacked/leaf_{i}"
    return f"{_group_names(groups)[groups[i]]}/leaf_{i}"


def _write(path: str, leaves: list[Leaf], owners: dict, groups: dict, me: int) -> list[str]:
    """Writes this process's leaves; returns their folders, relative to ``path``."""
    from jaxpp_mlir.checkpoint import store as checkpoint_store

    names = _group_names(groups)
    arrays = [
        (os.path.join(path, names[groups[i]], f"leaf_{i}"), leaf.value)
        for i, leaf in enumerate(leaves)
        if leaf.kind == "array" and owners[i] == me
    ]
    checkpoint_store.write_arrays(arrays)
    if me == 0:
        host = [
            (os.path.join(path, "host", f"leaf_{i}"), leaf.value)
            for i, leaf in enumerate(leaves)
            if leaf.kind == "host"
        ]
        checkpoint_store.write_host_arrays(host)
        arrays += host
    return [os.path.relpath(file, path) for file, _ in arrays]


def _write_metadata(
    path: str, leaves: list[Leaf], owners: dict, groups: dict, parts: list[dict], chunks: dict
) -> None:
    names = _group_names(groups)
    items = []
    for i, leaf in enumerate(leaves):
        item = entry(leaf, _file(leaves, groups, i))
        if i in chunks:
            item["chunks"] = [
                {"rows": [start, stop], "rank": rank, "process": writer,
                 "file": rows.rows_folder(i, start, stop)}
                for start, stop, rank, writer in chunks[i]
            ]  # fmt: skip
        if i in owners:
            ranks = [part["ranks"][str(i)] for part in parts if str(i) in part["ranks"]]
            held = parts[owners[i]]["held"][str(i)]
            item.update(
                process=owners[i],
                group=names[groups[i]],
                spec=held["spec"],
                rank=ranks[0] if ranks else None,
            )
            if held.get("key") is not None:  # the holder knows it holds keys
                item["key"] = held["key"]
        items.append(item)
    metadata = {
        "format": FORMAT,
        "version": VERSION,
        "groups": {name: list(devices) for devices, name in names.items()},
        "leaves": items,
    }
    temporary = os.path.join(path, METADATA + ".tmp")
    with open(temporary, "w") as handle:
        json.dump(metadata, handle, indent=1)
    os.replace(temporary, os.path.join(path, METADATA))


# ----------------------------------------------------------------- restoring


def _saved_without_manifest(path: str) -> bool:
    """Whether ``path`` is a complete checkpoint of version 1 (saved before manifests:
    its metadata, written last, is there and says so; it has no manifest)."""
    if os.path.lexists(os.path.join(path, manifests.MANIFEST)):
        return False
    metadata = confine.checkpoint_file(path, METADATA, f"the checkpoint {path}")
    try:
        with open(metadata, "rb") as handle:
            old = json.loads(handle.read().decode("utf-8")).get("version") == 1
    except (OSError, ValueError, AttributeError):
        return False  # manifests.read names what is missing
    if old:
        logger.warning(
            "%s was saved in checkpoint format 1 (before manifests): its files are read "
            "without checksums; save it again to have them checked",
            path,
        )
    return old


def _read_metadata(path: str, manifest: dict[str, Any] | None) -> dict[str, Any]:
    file = os.path.join(path, METADATA)
    confine.checkpoint_file(path, METADATA, f"the checkpoint {path}")
    if not os.path.exists(file):
        raise CheckpointError(f"{path} is an incomplete checkpoint: it has no {METADATA}")
    if manifest is not None:
        manifests.verify_metadata(path, manifest, METADATA)
    try:
        with open(file, "rb") as handle:
            metadata = json.loads(handle.read().decode("utf-8"))
        if not isinstance(metadata, dict):
            raise ValueError(f"a JSON {type(metadata).__name__}, not an object")
    except ValueError as e:
        raise CheckpointError(f"{file} of the checkpoint {path} is unreadable: {e}") from None
    if metadata.get("format") != FORMAT or metadata.get("version") not in READABLE_VERSIONS:
        raise CheckpointError(
            f"{file} is not a {FORMAT} checkpoint of a version this library reads "
            f"{READABLE_VERSIONS} (format {metadata.get('format')!r}, version "
            f"{metadata.get('version')!r})"
        )
    return metadata


def _as_keys(data: Any, key: str | None) -> Any:
    """``data`` (a leaf read from the checkpoint) as keys of the implementation ``key``."""
    return data if key is None else jax.random.wrap_key_data(data, impl=key)


def _data_sharding(sharding: Any, key: str | None, item: dict) -> Any:
    """Where the data of a leaf goes: the target's sharding (for keys, the same placement
    of their data, whose trailing dimensions are whole on every device)."""
    if key is None or isinstance(sharding, NamedSharding | SingleDeviceSharding):
        return sharding  # a NamedSharding's spec leaves the data's trailing dimensions whole
    raise CheckpointError(
        f"leaf {item['path']}: keys are restored onto a NamedSharding or a single device, "
        f"not a {type(sharding).__name__}"
    )


def _host(path: str, manifest: dict, item: dict) -> np.ndarray:
    from jaxpp_mlir.checkpoint import store as checkpoint_store

    file = leaf_file(path, manifest, item)
    return checkpoint_store.read_host_array(file, tuple(item["shape"]), item["dtype"])


def _placeholder(path: str, manifest: dict, item: dict, target: Any, index: int) -> RemoteOutput:
    """A leaf of another process: a ``RemoteOutput`` that reads it here if needed here."""
    sharding = None if target_sharding(target) is Elsewhere else target_sharding(target)
    if isinstance(target, RemoteOutput):
        rank, process = target.rank, target.process
    else:
        process = min(d.process_index for d in sharding.device_set)
        ranks = getattr(target, "mpmd_idxs", ())
        rank = ranks[0] if ranks else -1
    spec = TensorSpec(tuple(item["shape"]), item["dtype"])
    return RemoteOutput(
        -1, -1, index, rank, process, spec, sharding, lambda: _host(path, manifest, item)
    )
