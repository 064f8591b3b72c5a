"""Stage-local checkpoints with orbax: every array saved and restored where it lives.

A pipelined program's parameters and optimizer state are ``jax.Array``s on
their rank's submesh, each with a ``NamedSharding`` (mpmd axis of size 1).
``save`` hands the pytree to orbax's ``StandardCheckpointer``, which writes
each array shard by shard from the devices that hold it (OCDBT/Zarr3 under
``path``): nothing is gathered on one host or device, and with several
processes orbax has each process write only the shards on its own devices (a
program's outputs held by other processes, ``RemoteOutput``s, are refused for
now: the multi-process round trip is not done yet).

``restore(path, like)`` reads the checkpoint back onto the shardings of
``like``: a pytree of arrays (the state of the program to continue with),
``ShapeDtypeStruct``s with shardings, or the ``program.placement(...)`` of
one. Each leaf is read straight onto its rank's submesh. Because only the
target shardings matter, a checkpoint restores into a program with another
schedule over the same stages.

orbax (``pip install 'jaxpp_mlir[checkpoint]'``) is imported on first use.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import jax

from jaxpp_mlir.placement import ArrayPlacement

logger = logging.getLogger(__name__)


def _orbax() -> Any:
    try:
        import orbax.checkpoint as ocp
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "jaxpp_mlir.checkpoint needs orbax: pip install 'jaxpp_mlir[checkpoint]'"
        ) from e
    return ocp


def save(path: str | os.PathLike, tree: Any, *, force: bool = False) -> None:
    """Writes ``tree`` (arrays where they live, Python scalars) to the directory ``path``.

    ``force`` overwrites an existing checkpoint. Raises ``NotImplementedError``
    for outputs held by another process (``RemoteOutput``).
    """
    _refuse_remote_outputs(tree)
    ocp = _orbax()
    path = os.path.abspath(os.fspath(path))
    with ocp.StandardCheckpointer() as checkpointer:
        checkpointer.save(path, tree, force=force)
        checkpointer.wait_until_finished()
    logger.info("saved checkpoint %s", path)


def restore(path: str | os.PathLike, like: Any) -> Any:
    """The checkpoint at ``path``, each leaf placed with the sharding of ``like``'s leaf."""
    ocp = _orbax()
    path = os.path.abspath(os.fspath(path))
    target = jax.tree_util.tree_map(_abstract, like)
    with ocp.StandardCheckpointer() as checkpointer:
        return checkpointer.restore(path, target)


def _refuse_remote_outputs(tree: Any) -> None:
    from jaxpp_mlir.runtime.distributed import RemoteOutput

    paths = [
        jax.tree_util.keystr(path)
        for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]
        if isinstance(leaf, RemoteOutput)
    ]
    if paths:
        raise NotImplementedError(
            f"checkpoint.save got outputs held by other processes ({', '.join(paths[:3])}"
            f"{', ...' if len(paths) > 3 else ''}): saving a state spread over several "
            "processes is not supported yet; save from one process that holds every rank"
        )


def _abstract(leaf: Any) -> Any:
    if isinstance(leaf, ArrayPlacement):
        return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=leaf.sharding)
    if isinstance(leaf, jax.Array | jax.ShapeDtypeStruct):
        return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=leaf.sharding)
    return leaf
