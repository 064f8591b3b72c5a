"""``pp.ray.start``'s arguments, checked before Ray or any worker starts: a bad one is a
``CallError`` naming it, and nothing is left running."""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping
from typing import Any

from jaxpp_mlir.distributed.launch_args import MAX_DEVICES_PER_PROCESS, MAX_PROCESSES
from jaxpp_mlir.errors import CallError

PLATFORMS = ("cpu", None)


def _count(name: str, value: Any, limit: int) -> int:
    """``value`` as an int from 1 to ``limit`` (a Python or numpy integer, not a bool)."""
    if not isinstance(value, bool):
        try:
            number = operator.index(value)
        except TypeError:
            number = None
        if number is not None and 1 <= number <= limit:
            return number
    raise CallError(
        f"pp.ray.start: {name} must be an int from 1 to {limit}, got {value!r} "
        f"({type(value).__name__})"
    )


def _seconds(name: str, value: Any, *, optional: bool = False) -> float | None:
    """``value`` as a finite number of seconds greater than 0 (None when ``optional``)."""
    if value is None and optional:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        if math.isfinite(value) and value > 0:
            return float(value)
    also = " or None" if optional else ""
    raise CallError(
        f"pp.ray.start: {name} must be a finite number of seconds greater than 0{also}, got "
        f"{value!r} ({type(value).__name__})"
    )


def check_start_args(
    num_workers: Any,
    devices_per_worker: Any,
    platform: Any,
    address: Any,
    start_timeout_s: Any,
    step_timeout_s: Any,
    worker_options: Any,
) -> tuple[int, int | None, float, float | None]:
    """The checked ``num_workers``, ``devices_per_worker`` (None: the host's devices),
    ``start_timeout_s`` and ``step_timeout_s``; raises ``CallError`` naming a bad one."""
    workers = _count("num_workers", num_workers, MAX_PROCESSES)
    if platform not in PLATFORMS:
        raise CallError(
            f"pp.ray.start: platform must be 'cpu' (CPU devices, devices_per_worker each) or "
            f"None (each worker uses its host's devices, GPUs), got {platform!r}"
        )
    devices = None
    if platform == "cpu":
        given = 1 if devices_per_worker is None else devices_per_worker
        devices = _count("devices_per_worker", given, MAX_DEVICES_PER_PROCESS)
    elif devices_per_worker is not None:
        raise CallError(
            f"pp.ray.start: devices_per_worker={devices_per_worker!r} applies to "
            f"platform='cpu' only; with platform=None each worker uses its host's devices"
        )
    if address is not None and not isinstance(address, str):
        raise CallError(
            f"pp.ray.start: address must be a Ray address ('auto', 'host:port') or None, got "
            f"{address!r} ({type(address).__name__})"
        )
    start_s = _seconds("start_timeout_s", start_timeout_s)
    step_s = _seconds("step_timeout_s", step_timeout_s, optional=True)
    if worker_options is not None and not isinstance(worker_options, Mapping):
        raise CallError(
            f"pp.ray.start: worker_options must be a dict of Ray actor options or None, got "
            f"{type(worker_options).__name__}"
        )
    return workers, devices, start_s, step_s
