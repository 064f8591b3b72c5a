"""Checkpoints of pipelined programs' pytrees: ``save(path, tree)`` and ``restore(path, like)``.

Modules: ``save_restore`` (the two calls and the directory's metadata), ``leaves``
(what each checkpointed leaf is, matching a target tree), ``store`` (arrays as Zarr
arrays through TensorStore, written and read shard by shard).
"""

from jaxpp_mlir.checkpoint.save_restore import (
    FORMAT,
    METADATA,
    VERSION,
    CheckpointError,
    restore,
    save,
)

__all__ = ["FORMAT", "METADATA", "VERSION", "CheckpointError", "restore", "save"]
