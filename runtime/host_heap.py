"""``collector_paused``: Python's cyclic garbage collector off during one heavy call."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector off while importing the library's modules on first use,
    partitioning, compiling or simulating a schedule.

    These allocate many objects (IR wrappers, schedule tasks, plan entries, executables,
    a module's functions and classes) that reference counting frees or that live as long
    as the process, so the collector would run again and again during them, and each
    full collection walks the host program's whole heap (a training script's arrays,
    jax's own modules): a full collection during the main job's compile cost 48-56 ms
    here, a third of a large schedule's simulation went to collections, the collections
    during the first partition's imports 5-10 ms. Nothing is leaked: the collector runs
    again afterwards.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
