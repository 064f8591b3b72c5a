"""The runtime's one door to private or unstable JAX/jaxlib names.

Every use of ``jax._src``, of ``jaxlib.xla_client`` internals or of a private
attribute of a JAX object by the runtime goes through a function or name of
this module; version branches live here and nowhere else. Each entry says what
it replaces and the jax/jaxlib versions it was checked on. Supported range:
0.10.2 to 0.12.x (checked: 0.10.2 on Python 3.11; 0.11.2 and 0.12.x on 3.12).

The compiler side has its own adapter (``jaxpp_mlir/_jax_compat.py``); this
module imports nothing from the compiler side.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import jax
from jax._src import compiler as _compiler
from jax.sharding import Sharding
from jaxlib import xla_client as _xc

#: ``get_compile_options(num_replicas, num_partitions, device_assignment, backend=...)``,
#: the very function ``jax.extend.backend`` re-exports (0.10.2, 0.11.2, 0.12.x): importing
#: anything under ``jax.extend`` runs its package, which imports Pallas, about 20 ms of
#: CPU in the first compile for nothing the runtime uses. (The transfer programs of
#: several processes, ``multiprocess/collectives.py``, build IR with
#: ``jax.extend.mlir.dialects``; one process never loads them.)
get_compile_options = _compiler.get_compile_options

# --- types used in annotations and exact type tests (0.10.2, 0.11.2, 0.12.x) ---------------

#: A compiled, loaded PJRT executable (``xla_client.LoadedExecutable``).
LoadedExecutable = _xc.LoadedExecutable
#: An ordered device list as PJRT takes it (``xla_client.DeviceList``).
DeviceList = _xc.DeviceList
#: XLA compile options (``xla_client.CompileOptions``).
CompileOptions = _xc.CompileOptions
#: The concrete ``jax.Array`` class (``xla_client.ArrayImpl``): an exact type test is cheapest.
ArrayImpl = _xc.ArrayImpl
#: Copy semantics that reuse the source buffer when source and destination are one device
#: (``xla_client.ArrayCopySemantics.REUSE_INPUT``).
REUSE_INPUT = _xc.ArrayCopySemantics.REUSE_INPUT
#: ``xla_client.batched_copy_array_to_devices_with_sharding(arrays, device_lists, shardings,
#: semantics)``: copies shard k of each array to device k of its list, no compilation.
batched_copy = _xc.batched_copy_array_to_devices_with_sharding


def _accepts_skip_checks(function: Any) -> bool:
    """Whether a nanobind function's signature names ``_skip_checks``."""
    try:
        return "_skip_checks" in str(inspect.signature(function))
    except (TypeError, ValueError):
        return "_skip_checks" in (getattr(function, "__doc__", None) or "")


# jaxlib 0.10.x takes ``_skip_checks`` in both; 0.11.2 and 0.12.x dropped it from
# ``array_result_handler`` (a TypeError otherwise). Decided once, at import.
_HANDLER_SKIPS_CHECKS = _accepts_skip_checks(_xc.array_result_handler)
_ARRAY_SKIPS_CHECKS = _accepts_skip_checks(_xc.ArrayImpl.__init__)


def prng_key_impl(dtype: Any) -> Any:
    """The PRNG implementation of a typed key dtype (``key<fry>``), for ``wrap_key_data``."""
    return dtype._impl


def device_list(devices: Sequence[jax.Device]) -> Any:
    """``xla_client.DeviceList(tuple(devices))`` (0.10.2, 0.11.2, 0.12.x)."""
    return _xc.DeviceList(tuple(devices))


def sharding_device_list(sharding: Sharding) -> Any:
    """The ordered device list of ``sharding``: ``sharding._internal_device_list``
    (0.10.2, 0.11.2, 0.12.x)."""
    return sharding._internal_device_list


def hlo_sharding(sharding: Sharding, ndim: int) -> Any:
    """``sharding._to_xla_hlo_sharding(ndim)``: the HLO sharding of an ``ndim`` array
    (comparable with ``==``, printable, ``.to_proto()``) (0.10.2, 0.11.2, 0.12.x)."""
    return sharding._to_xla_hlo_sharding(ndim)


def sharding_from_hlo_proto(devices: Sequence[jax.Device], proto: Any) -> Sharding:
    """``GSPMDSharding(DeviceList(devices), HloSharding.from_proto(proto))``: a sharding
    from an executable's parameter/output sharding proto (0.10.2, 0.11.2, 0.12.x; no
    public name for an HLO sharding)."""
    from jax._src.sharding_impls import GSPMDSharding

    return GSPMDSharding(device_list(devices), _xc.HloSharding.from_proto(proto))


def result_handler(aval: Any, sharding: Sharding) -> Any:
    """A handler turning one executable output into a committed ``jax.Array``:
    ``xla_client.array_result_handler(aval, sharding, committed=True[, _skip_checks=True])``.
    0.10.2 takes ``_skip_checks``; 0.11.2 and 0.12.x do not (the checks it skipped are
    cheap there)."""
    if _HANDLER_SKIPS_CHECKS:
        return _xc.array_result_handler(aval, sharding, committed=True, _skip_checks=True)
    return _xc.array_result_handler(aval, sharding, committed=True)


def make_array(aval: Any, sharding: Sharding, shards: Sequence[jax.Array]) -> jax.Array:
    """Per-device arrays (in ``sharding``'s device order) as one committed array without
    re-checking them: ``ArrayImpl(aval, sharding, shards, committed=True, _skip_checks=True)``
    (0.10.2, 0.11.2, 0.12.x take ``_skip_checks``; dropped if a release stops taking it)."""
    if _ARRAY_SKIPS_CHECKS:
        return _xc.ArrayImpl(aval, sharding, list(shards), committed=True, _skip_checks=True)
    return _xc.ArrayImpl(aval, sharding, list(shards), committed=True)


def batched_device_put(
    aval: Any,
    sharding: Sharding,
    shards: list[Any],
    devices: Sequence[jax.Device],
    *,
    force_copy: bool = False,
) -> jax.Array:
    """``xla_client.batched_device_put(aval, sharding, shards, devices, committed=True,
    force_copy)``: host shards (one per device, in ``devices`` order) as one array; with
    ``force_copy`` the host data is copied before it returns, never aliased (0.10.2,
    0.11.2, 0.12.x)."""
    return _xc.batched_device_put(aval, sharding, shards, list(devices), True, force_copy)


def program_shape(exe: Any) -> Any:
    """The program shape of a compiled executable's first HLO module:
    ``XlaComputation(proto).program_shape()`` (0.10.2, 0.11.2, 0.12.x)."""
    proto = exe.hlo_modules()[0].as_serialized_hlo_module_proto()
    return _xc.XlaComputation(proto).program_shape()


def distributed_client() -> Any | None:
    """This process's coordination-service client, None before ``jax.distributed.initialize``:
    ``jax._src.distributed.global_state.client`` (no public accessor; 0.10.2, 0.11.2, 0.12.x)."""
    from jax._src import distributed

    return distributed.global_state.client


def coordinator_address() -> str | None:
    """The coordination service's address given to ``jax.distributed.initialize``:
    ``jax._src.distributed.global_state.coordinator_address`` (0.10.2, 0.11.2, 0.12.x)."""
    from jax._src import distributed

    return distributed.global_state.coordinator_address


# --- JAX's persistent compilation cache (jax._src.compilation_cache, jax._src.config) -------


def persistent_cache_store(backend: Any) -> Any | None:
    """JAX's persistent compilation cache for ``backend``, or None when JAX would not use one
    (no ``jax_compilation_cache_dir``, ``jax_enable_compilation_cache`` false, or a backend
    that cannot serialize executables). The store has ``get(key) -> bytes | None`` and
    ``put(key, value)``: ``compilation_cache.is_persistent_cache_enabled()``,
    ``is_cache_used(backend)`` and ``_get_cache(backend)`` (0.10.2, 0.12.0.1)."""
    from jax._src import compilation_cache

    if not compilation_cache.is_persistent_cache_enabled():
        return None
    if not compilation_cache.is_cache_used(backend):
        return None
    return compilation_cache._get_cache(backend)


def persistent_cache_thresholds() -> tuple[float, int]:
    """``(jax_persistent_cache_min_compile_time_secs, jax_persistent_cache_min_entry_size_bytes)``:
    JAX writes no entry for a faster compilation or a smaller entry (0.10.2, 0.12.0.1)."""
    from jax._src import config

    return (
        float(config.persistent_cache_min_compile_time_secs.value),
        int(config.persistent_cache_min_entry_size_bytes.value),
    )


def hash_cache_key_context(
    hash_obj: Any, devices: Sequence[jax.Device], options: Any, backend: Any
) -> None:
    """Feeds ``hash_obj`` everything but the module that JAX's persistent-cache key hashes:
    the jaxlib version, the backend's platform and version, the XLA flags (those that do not
    change code left out), the serialized compile options (debug-only fields cleared, the
    device assignment kept), the accelerator topology or device kinds, and the compression.
    ``cache_key._hash_platform``, ``_hash_xla_flags(h, get_flag_prefixes())``,
    ``_hash_serialized_compile_options(h, options, strip_device_assignment=False)`` and
    ``_hash_accelerator_config(h, devices)``: the pieces of ``cache_key.get`` that need no
    MLIR module (the runtime hashes its module text itself) (0.10.2, 0.12.0.1)."""
    import numpy as np
    from jax._src import cache_key

    device_array = np.empty(len(devices), dtype=object)
    device_array[:] = list(devices)
    cache_key._hash_string(hash_obj, _jaxlib_version())
    cache_key._hash_platform(hash_obj, backend)
    cache_key._hash_xla_flags(hash_obj, cache_key.get_flag_prefixes())
    cache_key._hash_serialized_compile_options(hash_obj, options, strip_device_assignment=False)
    cache_key._hash_accelerator_config(hash_obj, device_array)
    cache_key._hash_string(hash_obj, cache_compression())


def _jaxlib_version() -> str:
    import jaxlib.version

    return jaxlib.version.__version__


def cache_compression() -> str:
    """The compressor ``compress_cache_entry`` uses: ``zstd`` (Python 3.14's), ``zstandard``
    or ``zlib``, whichever ``jax._src.compilation_cache`` found (0.10.2, 0.12.0.1)."""
    from jax._src import compilation_cache

    for name in ("zstd", "zstandard"):
        if getattr(compilation_cache, name, None) is not None:
            return name
    return "zlib"


def compress_cache_entry(data: bytes) -> bytes:
    """``compilation_cache.compress_executable``: zstandard when installed, else zlib, as JAX
    compresses its own entries (0.10.2, 0.12.0.1)."""
    from jax._src import compilation_cache

    return compilation_cache.compress_executable(data)


def decompress_cache_entry(data: bytes) -> bytes:
    """``compilation_cache.decompress_executable`` (0.10.2, 0.12.0.1)."""
    from jax._src import compilation_cache

    return compilation_cache.decompress_executable(data)
