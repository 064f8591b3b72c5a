"""Stage executables in JAX's persistent compilation cache.

When JAX's persistent compilation cache is on (``jax_compilation_cache_dir`` /
``JAX_COMPILATION_CACHE_DIR`` set, ``jax_enable_compilation_cache`` true), each stage
module is looked up there before it is compiled and stored after, so a second process
(the next run, another process of a launch) loads instead of compiling. The cache
follows JAX's own settings: entries compiled faster than
``jax_persistent_cache_min_compile_time_secs`` or smaller than
``jax_persistent_cache_min_entry_size_bytes`` are not written.
``JAXPP_MLIR_COMPILATION_CACHE=0`` keeps stage executables out of it.

The key hashes the module text, what JAX's own key hashes besides the module
(jaxlib version, backend platform and version, XLA flags, compile options with
the device assignment, accelerator topology or device kinds, compression), the
jax version and each device's id, platform, kind and process index. Unlike ``jax.jit``, which writes
from process 0 only, every process writes its own executables (their device ids
differ, so no two processes write one key).

An entry is ``MAGIC + sha256(key + body) + body`` where ``body`` is the compressed
``compile milliseconds (4 bytes) + serialized executable``: the digest binds the
entry to the key it answers, so an intact entry of another program put under this
key (a copied or renamed file) fails it like a damaged one. An entry that is
unreadable, truncated, or fails its digest or deserialization is logged as a
warning and the module compiles again: a broken cache never gives an executable.
The keys this process loaded are remembered (``origin``), so that an error about
an executable that came from the cache says so, and where.
XLA:CPU cannot serialize an executable that was itself deserialized (the copy lacks
its compiled functions), so ``compile.py`` rebinds a loaded executable to other
devices from its entry (``cached_serialization``), never from ``exe.serialize()``.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Protocol

import jax

from .. import _jax_compat as jc
from .. import options, records

_logger = logging.getLogger("jaxpp_mlir.runtime.compilation.executable_cache")

_MAGIC = b"jaxpp_mlir stage executable v2\n"  # v2: the digest covers the key
_DIGEST_BYTES = 32
_TIME_BYTES = 4
_KEY_PREFIX = "jaxpp_mlir-"

#: Stage executables this process loaded from the persistent cache.
hits = 0
#: Stage modules this process looked up and did not find (or found unusable).
misses = 0
_lock = threading.Lock()
_loaded: dict[str, str] = {}  # key -> the cache directory, for every entry loaded here


class CorruptEntry(ValueError):
    """A cache entry that is not a whole, intact entry of this format."""


class Store(Protocol):
    """JAX's persistent compilation cache, as this module uses it."""

    def get(self, key: str) -> bytes | None: ...

    def put(self, key: str, value: bytes) -> None: ...


@records.frozen
class Slot:
    """Where one stage executable lives in the cache: the store and the key."""

    store: Store
    key: str


def stats() -> tuple[int, int]:
    """``(hits, misses)`` of this process so far."""
    with _lock:
        return hits, misses


def _count(hit: bool) -> None:
    global hits, misses
    with _lock:
        if hit:
            hits += 1
        else:
            misses += 1


def _enabled() -> bool:
    return options.COMPILATION_CACHE.value() != 0


def cache_key(
    module_text: str, devices: Sequence[jax.Device], compile_options: jc.CompileOptions
) -> str:
    """The cache key of ``module_text`` compiled with ``compile_options`` for ``devices``."""
    digest = hashlib.sha256(_MAGIC)
    digest.update(hashlib.sha256(module_text.encode()).digest())
    jc.hash_cache_key_context(digest, devices, compile_options, devices[0].client)
    digest.update(f"jax {jax.__version__}\n".encode())
    for device in devices:
        digest.update(
            f"{device.id} {device.platform} {device.device_kind} {device.process_index}\n".encode()
        )
    return _KEY_PREFIX + digest.hexdigest()


def _digest(key: str, body: bytes) -> bytes:
    return hashlib.sha256(key.encode() + b"\n" + body).digest()


def pack(serialized: bytes, compile_seconds: float, key: str) -> bytes:
    """The cache entry for ``key`` holding ``serialized`` and its compile time."""
    millis = min(int(compile_seconds * 1000), (1 << (8 * _TIME_BYTES)) - 1)
    body = jc.compress_cache_entry(millis.to_bytes(_TIME_BYTES, "big") + serialized)
    return _MAGIC + _digest(key, body) + body


def unpack(entry: bytes, key: str) -> bytes:
    """The serialized executable of ``entry``, read under ``key``; ``CorruptEntry`` if it
    is not an intact entry of that key."""
    head = len(_MAGIC) + _DIGEST_BYTES
    if len(entry) <= head or not entry.startswith(_MAGIC):
        raise CorruptEntry("not an entry of this format (or truncated)")
    body = entry[head:]
    if _digest(key, body) != entry[len(_MAGIC) : head]:
        raise CorruptEntry(
            "its digest does not match its key and contents (damaged, or another program's "
            "entry put under this key)"
        )
    try:
        data = jc.decompress_cache_entry(body)
    except Exception as e:  # zlib.error, zstandard.ZstdError
        raise CorruptEntry(f"it does not decompress ({e})") from e
    if len(data) <= _TIME_BYTES:
        raise CorruptEntry("it holds no executable")
    return data[_TIME_BYTES:]


def _open_slot(
    module_text: str, devices: Sequence[jax.Device], compile_options: jc.CompileOptions
) -> Slot | None:
    """The slot of ``module_text`` on ``devices``; None when JAX's cache is off."""
    store = jc.persistent_cache_store(devices[0].client)
    if store is None:
        return None
    return Slot(store, cache_key(module_text, devices, compile_options))


def lookup(
    name: str, module_text: str, devices: Sequence[jax.Device], compile_options: jc.CompileOptions
) -> tuple[jc.LoadedExecutable | None, Slot | None]:
    """The cached executable of ``module_text`` for ``devices`` (or None) and the slot to
    store a fresh compilation in (None when the cache is off or unusable)."""
    if not _enabled():
        return None, None
    client = devices[0].client
    try:
        slot = _open_slot(module_text, devices, compile_options)
        if slot is None:
            return None, None
    except Exception as e:  # a cache that cannot be opened, a module JAX cannot key
        _logger.warning(
            "persistent compilation cache unusable for %r (%s: %s): compiling it",
            name,
            type(e).__name__,
            e,
        )
        return None, None
    try:
        entry = slot.store.get(slot.key)
    except Exception as e:  # an unreadable file, a lock that timed out
        _logger.warning(
            "cannot read the persistent compilation cache entry %s of %r (%s: %s): compiling it",
            slot.key,
            name,
            type(e).__name__,
            e,
        )
        _count(hit=False)
        return None, slot
    if entry is None:
        _count(hit=False)
        _logger.debug("persistent compilation cache miss for %r (key %s)", name, slot.key)
        return None, slot
    try:
        serialized = unpack(entry, slot.key)
        exe = client.deserialize_executable(serialized, jc.device_list(devices), compile_options)
    except Exception as e:  # CorruptEntry, or XLA refusing the bytes
        _logger.warning(
            "persistent compilation cache entry %s of %r is unusable (%s): compiling it again",
            slot.key,
            name,
            e,
        )
        _count(hit=False)
        return None, slot
    _count(hit=True)
    with _lock:
        _loaded[slot.key] = str(jax.config.jax_compilation_cache_dir)
    _logger.debug("persistent compilation cache hit for %r (key %s)", name, slot.key)
    return exe, slot


def origin(
    module_text: str, devices: Sequence[jax.Device], compile_options: jc.CompileOptions
) -> str | None:
    """Where this process loaded the executable of ``module_text`` on ``devices`` from, in
    words, or None when it did not load it from the persistent cache."""
    try:
        key = cache_key(module_text, devices, compile_options)
    except Exception:  # noqa: BLE001 - a module JAX cannot key was not loaded either
        return None
    with _lock:
        directory = _loaded.get(key)
    if directory is None:
        return None
    return (
        f"loaded from JAX's persistent compilation cache: entry {key} in {directory} "
        f"(remove the entry to compile the program again)"
    )


def cached_serialization(
    module_text: str, devices: Sequence[jax.Device], compile_options: jc.CompileOptions
) -> bytes | None:
    """The serialized executable that the cache holds for ``module_text`` on ``devices``,
    or None (the cache off, no entry, an entry not intact). Not counted as a lookup."""
    if not _enabled():
        return None
    try:
        slot = _open_slot(module_text, devices, compile_options)
        entry = None if slot is None else slot.store.get(slot.key)
        return None if entry is None else unpack(entry, slot.key)
    except Exception as e:  # an unreadable or damaged entry: the caller has the executable
        _logger.debug("no usable cache entry to rebind from (%s: %s)", type(e).__name__, e)
        return None


def store(
    slot: Slot,
    name: str,
    exe: jc.LoadedExecutable,
    compile_seconds: float,
    serialize: Callable[[], bytes] | None = None,
) -> bool:
    """Writes ``exe`` (compiled in ``compile_seconds``; ``serialize``, when given, makes its
    serialization) to ``slot`` when JAX's thresholds allow; returns whether it was written.
    A failing write is logged, never raised."""
    min_seconds, min_bytes = jc.persistent_cache_thresholds()
    if compile_seconds < min_seconds:
        _logger.debug(
            "not caching %r: compiled in %.3f s, under jax_persistent_cache_min_compile_time_secs"
            " (%g s)",
            name,
            compile_seconds,
            min_seconds,
        )
        return False
    try:
        entry = pack((serialize or exe.serialize)(), compile_seconds, slot.key)
        if len(entry) < min_bytes:
            _logger.debug(
                "not caching %r: %d bytes, under jax_persistent_cache_min_entry_size_bytes (%d)",
                name,
                len(entry),
                min_bytes,
            )
            return False
        slot.store.put(slot.key, entry)
    except Exception as e:  # a full disk, a read-only directory, a lock that timed out
        _logger.warning(
            "cannot write %r to the persistent compilation cache (%s: %s)",
            name,
            type(e).__name__,
            e,
        )
        return False
    _logger.debug("cached %r in the persistent compilation cache (key %s)", name, slot.key)
    return True
