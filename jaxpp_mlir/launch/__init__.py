"""The launcher's historical name: ``jaxpp_mlir.distributed.launch`` under ``jaxpp_mlir.launch``.

``python -m jaxpp_mlir.launch`` runs it, and ``from jaxpp_mlir.launch import
initialize_from_env, pipeline_devices`` (and any other of its names) keeps working.
"""

from __future__ import annotations

from typing import Any

from jaxpp_mlir.distributed import launch as _launch
from jaxpp_mlir.distributed.launch import initialize_from_env, main, pipeline_devices

__all__ = ["initialize_from_env", "main", "pipeline_devices"]


def __getattr__(name: str) -> Any:
    return getattr(_launch, name)
