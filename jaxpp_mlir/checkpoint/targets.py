"""Where a restore reads a leaf from and puts it: the target's sharding, this process or
another, the leaf's files checked against the manifest."""

from __future__ import annotations

import os
from typing import Any

import jax

from jaxpp_mlir.checkpoint import confine
from jaxpp_mlir.checkpoint import manifest as manifests
from jaxpp_mlir.checkpoint.leaves import LeafFile
from jaxpp_mlir.placement import ArrayPlacement
from jaxpp_mlir.runtime.multiprocess.remote_output import RemoteOutput


def target_sharding(target: Any) -> Any:
    """Where ``target`` wants its leaf (None: on the host)."""
    if isinstance(target, ArrayPlacement | RemoteOutput):
        return target.sharding if target.sharding is not None else Elsewhere
    if isinstance(target, jax.Array | jax.ShapeDtypeStruct):
        return target.sharding
    return None


class Elsewhere:
    """The sharding of a ``RemoteOutput`` whose sharding is unknown: not this process."""


def here(sharding: Any) -> bool:
    """Whether ``sharding`` has a device of this process."""
    if sharding is Elsewhere:
        return False
    me = jax.process_index()
    return any(d.process_index == me for d in sharding.device_set)


def leaf_file(path: str, manifest: dict | None, item: dict) -> LeafFile:
    """Where leaf ``item`` is (with what names it in errors), once every file of its folder
    resolves inside the checkpoint and matches the manifest."""
    name = f"leaf {item['path']} of the checkpoint {path}"
    present = confine.leaf_files(path, item.get("file"), name)
    manifests.verify_leaf(path, manifest, item, present)
    return LeafFile(os.path.join(path, item["file"]), name)
