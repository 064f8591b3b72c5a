"""Makes the ``jaxpp.enter_stage`` and ``jaxpp.loop_marker`` custom calls executable by XLA.

XLA refuses to compile a module holding a custom call it has no handler for,
so a marked model would not run under plain ``jax.jit``. This module builds
``marker_ffi.cc`` (a no-op typed-FFI handler) with ``g++`` on first need,
caches the shared library, and registers it as the handler of both marker
targets (the stage marker and ``treduce``'s loop marker on the integer
microbatch counter: the handler takes buffers of any dtype and rank).
``jaxpp_mlir.partition`` never needs it: it strips the markers before compiling.

The cache lives in ``$JAXPP_MLIR_CACHE_DIR`` (default ``~/.cache/jaxpp_mlir``);
the file name carries a hash of the source, the jaxlib version and the
platform, and is written atomically so concurrent processes may race safely.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings
from pathlib import Path

import jax

from jaxpp_mlir import _jax_compat
from jaxpp_mlir.dialect.ops import ENTER_STAGE_TARGET, LOOP_MARKER_TARGET
from jaxpp_mlir.runtime import options

__all__ = ["ensure_registered", "library_path"]

SOURCE = Path(__file__).with_name("marker_ffi.cc")
HOST_SYMBOL = "JaxppEnterStageHost"
DEVICE_SYMBOL = "JaxppEnterStageAliased"
BUILD_TIMEOUT_S = 120
#: The custom-call targets served by the no-op handler.
TARGETS = (ENTER_STAGE_TARGET, LOOP_MARKER_TARGET)

_lock = threading.Lock()
_attempted = False
_registered = False
_library: ctypes.CDLL | None = None


def cache_dir() -> Path:
    """The directory holding built libraries."""
    configured = options.CACHE_DIR.value()
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "jaxpp_mlir"


def library_path() -> Path:
    """Where the library built from the current source and jaxlib lives."""
    digest = hashlib.sha256()
    digest.update(SOURCE.read_bytes())
    digest.update(_jax_compat.jaxlib_version().encode())
    digest.update(f"{sys.platform}-{platform.machine()}-{platform.python_version()}".encode())
    return cache_dir() / f"marker_ffi-{digest.hexdigest()[:16]}.so"


def _build(target: Path) -> None:
    """Compiles the handler into ``target``, atomically."""
    compiler = shutil.which("g++")
    if compiler is None:
        raise RuntimeError("g++ was not found on PATH")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=target.stem + ".", suffix=".tmp", dir=target.parent)
    except OSError as e:
        raise RuntimeError(
            f"the marker library's directory {target.parent} is not writable ({e.strerror}); "
            f"set {options.CACHE_DIR.env} to a writable directory"
        ) from e
    os.close(fd)
    try:
        cmd = [
            compiler,
            "-O2",
            "-shared",
            "-fPIC",
            "-std=c++17",
            f"-I{jax.ffi.include_dir()}",
            str(SOURCE),
            "-o",
            tmp_name,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        if proc.returncode != 0:
            raise RuntimeError(
                f"g++ exited with status {proc.returncode}: {proc.stderr.strip()[-2000:]}"
            )
        os.chmod(tmp_name, 0o755)
        os.replace(tmp_name, target)
    finally:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)


def _load() -> ctypes.CDLL:
    path = library_path()
    if not path.exists():
        _build(path)
    return ctypes.CDLL(str(path))


def _has_gpu_backend() -> bool:
    try:
        return bool(jax.devices("gpu"))
    except RuntimeError:
        return False


def ensure_registered() -> bool:
    """Registers the FFI handler of the marker once per process.

    Returns whether the host handler is registered. When the library cannot be
    built or loaded, warns once and returns False; lowering still proceeds.
    """
    global _attempted, _registered
    if _attempted:
        return _registered
    with _lock:
        if not _attempted:
            _registered = _register()
            _attempted = True
    return _registered


def _register() -> bool:
    global _library
    try:
        _library = _load()
        for target in TARGETS:
            jax.ffi.register_ffi_target(
                target,
                jax.ffi.pycapsule(getattr(_library, HOST_SYMBOL)),
                platform="cpu",
            )
    except (OSError, RuntimeError, subprocess.SubprocessError, AttributeError) as exc:
        warnings.warn(
            f"jaxpp_mlir: could not build or register the FFI handler of the "
            f"{ENTER_STAGE_TARGET!r} stage marker and {LOOP_MARKER_TARGET!r} loop marker "
            f"({exc}). Plain jax.jit of a model with stage markers or treduce will fail to "
            f"compile; jaxpp_mlir.partition still works because it removes the markers.",
            RuntimeWarning,
            stacklevel=3,
        )
        return False
    if _has_gpu_backend():
        # The aliased handler touches no memory, so one build serves CUDA and ROCm alike;
        # registering for a platform whose plugin is absent is refused, hence suppress.
        for gpu_platform in ("CUDA", "ROCM"):
            for target in TARGETS:
                with contextlib.suppress(Exception):
                    jax.ffi.register_ffi_target(
                        target,
                        jax.ffi.pycapsule(getattr(_library, DEVICE_SYMBOL)),
                        platform=gpu_platform,
                    )
    return True
