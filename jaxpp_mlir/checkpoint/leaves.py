"""The leaves of a checkpointed pytree: what each is, where it is written, how it is matched.

A leaf is one of:

- ``array``: a ``jax.Array`` whose devices all belong to this process (a
  pipeline rank's array), or a ``RemoteOutput`` held by another process;
  written by the process that holds it, into the directory of its device
  group (the devices of its rank's submesh);
- ``stacked``: an array of rows held on several ranks, a ``StackedArray`` (its chunks
  ``jax.Array``s or ``RemoteOutput``s) or a ``jax.Array`` over the devices of several
  processes (a stacked output sharded along the mpmd axis); written as one Zarr array
  per chunk of rows, each by the first process holding it;
- ``host``: a numpy array or scalar, written by process 0;
- ``python``: a Python scalar (bool, int, float, str), kept in the metadata
  file itself (``None`` is an empty subtree to jax, not a leaf).

An array of typed PRNG keys is written as its ``uint32`` data (``jax.random.key_data``),
its metadata entry naming the PRNG implementation (``"key": "threefry2x32"``); it is
restored as keys into a key leaf, or as that data into a ``uint32`` leaf.
"""

from __future__ import annotations

import functools
import typing
from typing import Any

import jax
import numpy as np
from jax.sharding import NamedSharding

from jaxpp_mlir.errors import CheckpointError
from jaxpp_mlir.runtime import records
from jaxpp_mlir.runtime.multiprocess.distributed import RemoteOutput
from jaxpp_mlir.runtime.stacked_array import StackedArray

PYTHON_TYPES = {"bool": bool, "int": int, "float": float, "str": str}


@records.frozen
class Leaf:
    """One flat leaf as this process sees it."""

    path: str
    kind: str  # "array", "remote", "host" or "python"
    shape: tuple[int, ...] = ()
    dtype: str = ""
    devices: tuple[int, ...] = ()  # "array": the ids of its devices, sorted
    spec: list | None = None  # its PartitionSpec as JSON, when it has one
    rank: int | None = None  # "remote": the rank that holds it
    value: Any = None  # "array": the jax.Array; "host": the numpy array; "python": the value
    key: str | None = None  # typed PRNG keys: the implementation (shape and dtype: the data's)
    # "stacked": the rows this process holds, (start, stop, rank or None, array, first row
    # of the array), each written from ``array``'s rows [start - first, stop - first).
    chunks: tuple[tuple[int, int, int | None, Any, int], ...] = ()

    def public(self) -> dict[str, Any]:
        """What other processes need to know about this leaf (JSON)."""
        return {
            "devices": list(self.devices),
            "spec": self.spec,
            "rank": self.rank,
            "key": self.key,
            "chunks": [[start, stop, rank] for start, stop, rank, _, _ in self.chunks],
        }


class LeafFile(typing.NamedTuple):
    """A leaf's Zarr array: its folder, and the words naming the leaf in errors."""

    folder: str
    name: str


def spec_json(sharding: Any) -> list | None:
    """A ``NamedSharding``'s PartitionSpec as a JSON list (None for other shardings)."""
    if not isinstance(sharding, NamedSharding):
        return None
    return [list(p) if isinstance(p, tuple) else p for p in sharding.spec]


def describe(tree: Any) -> list[Leaf]:
    """Every leaf of ``tree``, classified; raises ``CheckpointError`` naming a leaf
    that cannot be checkpointed."""
    leaves = []
    for key_path, x in jax.tree_util.tree_flatten_with_path(tree)[0]:
        path = jax.tree_util.keystr(key_path)
        leaves.append(_describe_leaf(path, x))
    return leaves


def _describe_leaf(path: str, x: Any) -> Leaf:
    if isinstance(x, StackedArray):
        return _stacked_leaf(path, x)
    if isinstance(x, RemoteOutput):
        return Leaf(
            path,
            "remote",
            x.shape,
            x.dtype.name,
            spec=spec_json(x.sharding),
            rank=x.rank,
        )
    if isinstance(x, jax.Array):
        if x.is_deleted():
            raise CheckpointError(
                f"leaf {path} is an array that was deleted (donated to an earlier call, or "
                f"deleted): save the arrays that call returned instead"
            )
        if not x.is_fully_addressable:
            return _global_leaf(path, x)
        devices = tuple(sorted(d.id for d in x.sharding.device_set))
        key = key_name(x.dtype)
        value = jax.random.key_data(x) if key is not None else x
        return Leaf(
            path,
            "array",
            tuple(value.shape),
            np.dtype(value.dtype).name,
            devices=devices,
            spec=spec_json(x.sharding),
            value=value,
            key=key,
        )
    if isinstance(x, np.ndarray | np.generic):
        host = np.asarray(x)
        return Leaf(path, "host", host.shape, host.dtype.name, value=host)
    if isinstance(x, bool | int | float | str):
        return Leaf(path, "python", value=x)
    raise CheckpointError(
        f"leaf {path} is a {type(x).__name__}; a checkpoint holds jax and numpy arrays and "
        f"Python scalars (bool, int, float, str)"
    )


def _stacked_leaf(path: str, x: StackedArray) -> Leaf:
    chunks = []
    for chunk in x.chunks:
        if isinstance(chunk.array, RemoteOutput):
            continue
        if chunk.array.is_deleted():
            raise CheckpointError(
                f"leaf {path}: its rows [{chunk.rows.start}, {chunk.rows.stop}) on rank "
                f"{chunk.rank} were deleted (donated to an earlier call, or deleted)"
            )
        rows = (chunk.rows.start, chunk.rows.stop)
        chunks.append((*rows, chunk.rank, chunk.array, chunk.rows.start))
    return Leaf(path, "stacked", x.shape, x.dtype.name, chunks=tuple(chunks))


def _global_leaf(path: str, x: jax.Array) -> Leaf:
    """A jax.Array over several processes' devices, as the rows this process holds: each
    range of rows its shards hold, where they hold all of its other dimensions."""
    if x.ndim == 0 or x.is_deleted() or key_name(x.dtype) is not None:
        raise CheckpointError(
            f"leaf {path} spans the devices of several processes; a stage-local checkpoint "
            f"holds those only as rows split over processes (save global arrays with orbax)"
        )
    blocks: dict[tuple[int, int], dict[str, int]] = {}
    for shard in x.addressable_shards:
        start, stop, _ = shard.index[0].indices(x.shape[0])
        blocks.setdefault((start, stop), {})[repr(shard.index)] = int(np.prod(shard.data.shape))
    chunks = []
    for (start, stop), sizes in sorted(blocks.items()):
        if sum(sizes.values()) != (stop - start) * int(np.prod(x.shape[1:])):
            raise CheckpointError(
                f"leaf {path} spans the devices of several processes, and its rows [{start}, "
                f"{stop}) are split between processes; a stage-local checkpoint holds a "
                f"global array only as rows, each held whole by one process (save it with orbax)"
            )
        chunks.append((start, stop, None, x, 0))
    spec = spec_json(x.sharding)
    return Leaf(path, "stacked", tuple(x.shape), np.dtype(x.dtype).name, spec=spec,
                chunks=tuple(chunks))  # fmt: skip


def key_name(dtype: Any) -> str | None:
    """The PRNG implementation of a typed-key ``dtype`` (``"threefry2x32"``); None for
    another dtype."""
    if not jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        return None
    from jaxpp_mlir.runtime import _jax_compat

    return impl_name(_jax_compat.prng_key_impl(dtype))


@functools.cache
def impl_name(impl: Any) -> str:
    """The name ``jax.random.key(..., impl=name)`` knows the PRNG implementation ``impl`` by
    (``"threefry2x32"``; its dtype says ``key<fry>``)."""
    return str(jax.random.key_impl(jax.random.key(0, impl=impl)))


@functools.cache
def key_data_shape(key: str) -> tuple[int, ...]:
    """The ``uint32`` data shape of one key of the implementation ``key``."""
    one = jax.eval_shape(lambda: jax.random.key_data(jax.random.key(0, impl=key)))
    return tuple(one.shape)


def entry(leaf: Leaf, file: str | None) -> dict[str, Any]:
    """The metadata entry of ``leaf`` (``file``: where its data is, under the checkpoint)."""
    if leaf.kind == "python":
        return {"path": leaf.path, "kind": "python", "type": type(leaf.value).__name__,
                "value": leaf.value}  # fmt: skip
    item = {
        "path": leaf.path,
        "kind": leaf.kind if leaf.kind in ("host", "stacked") else "array",
        "file": file,
        "shape": list(leaf.shape),
        "dtype": leaf.dtype,
    }
    if leaf.key is not None:
        item["key"] = leaf.key
    return item


def python_value(item: dict[str, Any]) -> Any:
    return PYTHON_TYPES[item["type"]](item["value"])


def match(entries: list[dict[str, Any]], like: Any, where: str) -> tuple[list, Any]:
    """``like``'s leaves, each paired with its checkpoint entry; raises ``CheckpointError``
    naming the first leaf that ``like`` and the checkpoint do not share."""
    flat, treedef = jax.tree_util.tree_flatten_with_path(like)
    by_path = {item["path"]: item for item in entries}
    paths = [jax.tree_util.keystr(p) for p, _ in flat]
    missing = [p for p in paths if p not in by_path]
    if missing:
        raise CheckpointError(
            f"the checkpoint {where} has no leaf {missing[0]} (the tree to restore into has "
            f"another structure: {len(missing)} of its {len(paths)} leaves are not in the "
            f"checkpoint)"
        )
    extra = sorted(set(by_path) - set(paths))
    if extra:
        raise CheckpointError(
            f"the tree to restore into has no leaf {extra[0]}, which the checkpoint {where} "
            f"holds ({len(extra)} checkpointed leaves are not in the tree)"
        )
    pairs = []
    for path, (_, x) in zip(paths, flat, strict=True):
        item = by_path[path]
        _check_like(item, x, where)
        pairs.append((item, x))
    return pairs, treedef


def _check_like(item: dict[str, Any], x: Any, where: str) -> None:
    path = item["path"]
    if item["kind"] == "python":
        if hasattr(x, "shape") and hasattr(x, "dtype"):
            raise CheckpointError(
                f"leaf {path} of the checkpoint {where} is the Python {item['type']} "
                f"{item['value']!r}, but the tree to restore into has an array there"
            )
        if type(x).__name__ != item["type"]:
            raise CheckpointError(
                f"leaf {path} of the checkpoint {where} is the Python {item['type']} "
                f"{item['value']!r}, but the tree to restore into has a {type(x).__name__} there"
            )
        return
    if not (hasattr(x, "shape") and hasattr(x, "dtype")):
        raise CheckpointError(
            f"leaf {path} of the checkpoint {where} is an array, but the tree to restore into "
            f"has a {type(x).__name__} there"
        )
    saved = _saved_as(item)
    key = key_name(x.dtype)
    if key is not None:
        if item.get("key") != key:
            raise CheckpointError(
                f"leaf {path} of the checkpoint {where} is {saved}, but the tree to restore "
                f"into has typed PRNG keys ({key}) there"
            )
        shape = (*x.shape, *key_data_shape(key))
        if shape != tuple(item["shape"]):
            raise CheckpointError(
                f"leaf {path} of the checkpoint {where} is {saved}, but the tree to restore "
                f"into has {key} keys of shape {tuple(x.shape)} there"
            )
        return
    shape, dtype = tuple(x.shape), np.dtype(x.dtype).name
    if shape != tuple(item["shape"]) or dtype != item["dtype"]:
        raise CheckpointError(
            f"leaf {path} of the checkpoint {where} has shape {tuple(item['shape'])} and dtype "
            f"{item['dtype']}, but the tree to restore into has shape {shape} and dtype {dtype}"
        )


def _saved_as(item: dict[str, Any]) -> str:
    """What a checkpointed array leaf holds, in words."""
    shape = tuple(item["shape"])
    if item.get("key") is not None:
        return f"{item['key']} keys saved as their data ({item['dtype']}{list(shape)})"
    return f"an array of shape {shape} and dtype {item['dtype']}"
