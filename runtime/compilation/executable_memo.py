"""Stage executables this process already has, kept in memory and rebound to other devices.

Partitioning one model again (another schedule, another mesh of the same submesh size,
the same step compiled twice, a test that builds several programs) often yields stage
modules that this process compiled before, for the same or other devices. This cache
remembers, per compiled program, the executable and how to serialize it; asked for the
same program on other devices of the same kind it deserializes it onto them (about a
millisecond) instead of compiling it again (tens to hundreds of milliseconds), and asked
for the same devices it hands out the executable it already loaded there.

The key is everything a compilation depends on except which devices it runs on: the
module text (its sha256), the serialized compile options of a program over as many
devices with the device assignment replaced by ``0..n-1``, the PJRT client, and each
device's platform, kind and process index. The cache is bounded: it keeps the
``JAXPP_MLIR_EXECUTABLE_MEMORY_CACHE`` (default 256) programs used last (each with the
executables loaded from it, one per device list); ``0`` turns it off. Executables stay
alive while a cache entry or a compiled program holds them.

XLA:CPU cannot serialize an executable that was itself deserialized (the copy lacks its
compiled functions), so an entry serializes the executable XLA compiled (once, on the
first rebind), or, for one loaded from JAX's persistent cache, reads its cache entry.
"""

from __future__ import annotations

import collections
import hashlib
import logging
import threading
from collections.abc import Callable, Sequence

import jax
import numpy as np

from .. import _jax_compat as jc
from .. import options

_logger = logging.getLogger("jaxpp_mlir.runtime.compilation.executable_memo")

# (module digest, canonical compile options, client, (platform, kind, process) per device)
Key = tuple[bytes, bytes, object, tuple[tuple[str, str, int], ...]]

_lock = threading.Lock()
_entries: collections.OrderedDict[Key, Entry] = collections.OrderedDict()
#: Executables this process got from the cache instead of compiling (or loading from
#: the persistent cache): reused on the same devices or rebound to others.
reuses = 0


def capacity() -> int:
    """How many programs the cache keeps (0: off), from ``JAXPP_MLIR_EXECUTABLE_MEMORY_CACHE``."""
    return options.EXECUTABLE_MEMORY_CACHE.value()  # the option refuses a negative size


class Entry:
    """One compiled program: the executable it was made as and the ones loaded from it."""

    def __init__(
        self,
        exe: jc.LoadedExecutable,
        devices: Sequence[jax.Device],
        serialize: Callable[[], bytes | None],
        compile_seconds: float,
    ):
        self.compile_seconds = compile_seconds
        self._serialize = serialize
        self._serialized: bytes | None = None
        self._lock = threading.Lock()
        self._loaded: dict[tuple[int, ...], jc.LoadedExecutable] = {_ids(devices): exe}

    def serialized(self) -> bytes:
        """The serialized executable (made once; ``RuntimeError`` if it cannot be had)."""
        with self._lock:
            if self._serialized is None:
                self._serialized = self._serialize()
                if self._serialized is None:
                    raise RuntimeError("the executable's persistent cache entry is gone")
            return self._serialized

    def load(
        self, devices: Sequence[jax.Device], compile_options: jc.CompileOptions
    ) -> jc.LoadedExecutable:
        """This program's executable on ``devices``: the one loaded there already, or the
        serialized program deserialized onto them."""
        ids = _ids(devices)
        with self._lock:
            exe = self._loaded.get(ids)
        if exe is not None:
            return exe
        client = devices[0].client
        exe = client.deserialize_executable(
            self.serialized(), jc.device_list(devices), compile_options
        )
        with self._lock:
            return self._loaded.setdefault(ids, exe)

    def remember(self, devices: Sequence[jax.Device], exe: jc.LoadedExecutable) -> None:
        """Keeps ``exe`` (this program, loaded on ``devices`` by other means) for reuse."""
        with self._lock:
            self._loaded.setdefault(_ids(devices), exe)


def _ids(devices: Sequence[jax.Device]) -> tuple[int, ...]:
    return tuple(d.id for d in devices)


def key(module_text: str, devices: Sequence[jax.Device]) -> Key:
    """What a compilation of ``module_text`` for ``devices`` depends on, but the device ids."""
    client = devices[0].client
    canonical = jc.get_compile_options(
        num_replicas=1,
        num_partitions=len(devices),
        device_assignment=np.arange(len(devices)).reshape(1, -1),
        backend=client,
    )
    return (
        hashlib.sha256(module_text.encode()).digest(),
        canonical.SerializeAsString(),
        client,  # the object, not its id: a client made after one is dropped is another
        tuple((d.platform, d.device_kind, d.process_index) for d in devices),
    )


def find(cache_key: Key) -> Entry | None:
    """The entry of ``cache_key`` (now the most recently used), or None."""
    with _lock:
        entry = _entries.get(cache_key)
        if entry is not None:
            _entries.move_to_end(cache_key)
        return entry


def load(
    name: str, cache_key: Key, devices: Sequence[jax.Device], compile_options: jc.CompileOptions
) -> tuple[jc.LoadedExecutable, Entry] | None:
    """The executable of ``cache_key`` on ``devices`` and its entry (counted as a reuse), or
    None when the cache has no usable entry for it."""
    entry = find(cache_key)
    if entry is None:
        return None
    try:
        exe = entry.load(devices, compile_options)
    except Exception as e:  # XLA refusing the bytes, a persistent entry gone: compile instead
        _logger.warning(
            "cannot rebind the executable of %r kept in memory (%s): dropping it", name, e
        )
        forget(cache_key)
        return None
    global reuses
    with _lock:
        reuses += 1
    return exe, entry


def add(cache_key: Key, entry: Entry) -> Entry:
    """Keeps ``entry`` under ``cache_key`` unless one is there already; returns the kept one.
    The least recently used entries go when the cache is over its capacity."""
    size = capacity()
    with _lock:
        kept = _entries.setdefault(cache_key, entry)
        _entries.move_to_end(cache_key)
        while len(_entries) > size:
            _entries.popitem(last=False)
        return kept


def forget(cache_key: Key) -> None:
    with _lock:
        _entries.pop(cache_key, None)


def clear() -> None:
    """Drops every entry (the executables stay alive where compiled programs hold them)."""
    with _lock:
        _entries.clear()


def size() -> int:
    """How many programs the cache holds now."""
    with _lock:
        return len(_entries)
