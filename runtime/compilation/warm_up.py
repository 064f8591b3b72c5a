"""The backend's one-time setup, done on a core of its own while the step is partitioned.

XLA:CPU sets its dot library up the first time a program of the process runs a plain
``dot`` (the transposed products of a backward pass are such dots): about 25 ms of one
core on the 2-core machine, with jaxlib 0.10.2 to 0.12 (``benchmarks/first_step.py``;
``jax.jit``'s first step pays the same). ``partition()`` is Python on one core, so
``start_warm_up`` runs a 4x4 dot on a daemon thread meanwhile, and the first step no
longer waits for that setup. Other platforms have no such setup and are left alone.

The warm-up is a convenience: what fails in it is logged at DEBUG and changes nothing
else. It compiles outside ``compile_or_load`` (no cache entry, not in
``compile_count``). An interpreter that exits meanwhile waits for it (at most
``_EXIT_WAIT`` seconds) so that XLA is not torn down under it.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Iterable

import jax
import numpy as np

from .. import _jax_compat as jc
from ..options import WARM_UP
from .compile import compile_options

_logger = logging.getLogger(__name__)

#: A product XLA:CPU runs through its dot library rather than a fusion it generates
#: (a 4x4 operand is below the size it hands to its fused matmul kernels).
DOT_PROGRAM = """
module @jaxpp_mlir_warm_up {
  func.func public @main(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {
    %0 = stablehlo.dot_general %a, %a, contracting_dims = [1] x [0]
        : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    return %0 : tensor<4x4xf32>
  }
}
"""

#: Platforms whose first run sets something up that a warm-up takes off the first step.
WARMED_PLATFORMS = frozenset({"cpu"})

_EXIT_WAIT = 10.0

_lock = threading.Lock()
_started: dict[str, threading.Thread] = {}


def start_warm_up(devices: Iterable[jax.Device]) -> threading.Thread | None:
    """Starts the warm-up for the platform of ``devices``' first device of this process,
    unless this process started one already, ``JAXPP_MLIR_WARM_UP`` is 0 or the platform
    has nothing to warm. Returns the thread it started, else None."""
    device = _local_device(devices)
    if device is None or device.platform not in WARMED_PLATFORMS or not WARM_UP.value():
        return None
    with _lock:
        if device.platform in _started:
            return None
        thread = threading.Thread(
            target=_run_dot, args=(device,), name="jaxpp-mlir-warm-up", daemon=True
        )
        _started[device.platform] = thread
        if len(_started) == 1:
            atexit.register(_wait_at_exit)
        thread.start()
    return thread


def _local_device(devices: Iterable[jax.Device]) -> jax.Device | None:
    process = jax.process_index()
    return next((d for d in devices if d.process_index == process), None)


def _run_dot(device: jax.Device) -> None:
    started = time.perf_counter()
    try:
        options = compile_options((device,))
        exe = device.client.compile_and_load(DOT_PROGRAM, jc.device_list([device]), options)
        operand = jax.device_put(np.ones((4, 4), np.float32), device)
        results = exe.execute_sharded([operand])
        jax.block_until_ready(results.disassemble_into_single_device_arrays())
    except Exception:  # only a warm-up: the first step pays the setup instead
        _logger.debug("warm-up of %s failed", device, exc_info=True)
        return
    _logger.debug("warmed %s up in %.3f s", device.platform, time.perf_counter() - started)


def _wait_at_exit() -> None:
    for thread in list(_started.values()):
        thread.join(_EXIT_WAIT)
