"""The worker: one Ray actor per host (or device group), one ``jax.distributed`` process.

It holds the devices, the compiled part of every program the driver shipped and
every array a step left on its devices, under the ids the driver names them by
(an array held by another worker is a ``RemoteOutput`` here, as in a
multi-controller run). It imports the runtime, never the compiler: the driver
ships plans, not modules to partition.

This module imports neither ray nor jax at its top: the actor's environment
(``XLA_FLAGS``) must be set before jax loads, and the driver wraps the class with
``ray.remote`` itself.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxpp_mlir.ray.layout import MeshLayout
from jaxpp_mlir.ray.stacked import StackedRef, leaf_ids, output_ids

logger = logging.getLogger(__name__)


class HandleRef:
    """A stand-in for a ``RayArray`` in what the driver ships: the id of a stored array
    (``key``: the PRNG implementation when it holds typed keys, stored as their data)."""

    __slots__ = ("id", "key")

    def __init__(self, id: int, key: str | None = None):
        self.id, self.key = id, key

    def __reduce__(self) -> tuple:
        return (HandleRef, (self.id, self.key))


class Worker:
    """One ``jax.distributed`` process; every method is called by the driver through Ray."""

    def __init__(self, index: int, count: int):
        self.index, self.count = index, count
        self.programs: dict[int, Any] = {}  # program id -> (DistributedPlan, index arrays)
        self.store: dict[int, Any] = {}  # array id -> jax.Array, RemoteOutput or host value

    def ping(self) -> int:
        return os.getpid()

    def coordinator_address(self) -> str:
        """``host:port`` for the ``jax.distributed`` coordinator: this worker's node, a free
        port there."""
        import ray

        host = ray.util.get_node_ip_address()
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            return f"{host}:{s.getsockname()[1]}"

    def initialize(self, coordinator: str, heartbeat_timeout_s: int, init_timeout_s: int) -> dict:
        """Joins ``jax.distributed`` as process ``index`` and starts the watchdog."""
        import jax

        from jaxpp_mlir.runtime.failure import watchdog

        jax.distributed.initialize(
            coordinator_address=coordinator,
            num_processes=self.count,
            process_id=self.index,
            heartbeat_timeout_seconds=heartbeat_timeout_s,
            initialization_timeout=init_timeout_s,
        )
        watchdog.ensure_started()
        return {
            "pid": os.getpid(),
            "process": jax.process_index(),
            "local_devices": jax.local_device_count(),
            "devices": jax.device_count(),
        }

    # ------------------------------------------------------------------ programs
    def load(self, program_id: int, plan: Any, layout: MeshLayout) -> dict:
        """Compiles this process's part of ``plan`` (every worker at once: a collective).

        Returns each rank's process and the compile time.
        """

        from jaxpp_mlir.runtime.multiprocess.distributed import compile_distributed

        start = time.perf_counter()
        rank_devices, rank_meshes = layout.on_workers()
        executable = compile_distributed(plan, rank_devices, rank_meshes=rank_meshes)
        self.programs[program_id] = (executable, executable.place_constants())
        return {
            "process_of": list(executable.process_of),
            "compile_s": time.perf_counter() - start,
        }

    def call(
        self,
        program_id: int,
        first_id: int,
        arguments: Sequence[Any],
        released: Sequence[int],
        fetched: Sequence[int],
    ) -> dict[int, np.ndarray]:
        """Runs this process's part of one step; stores output j as ``first_id + j`` (the
        pieces of an output made of pieces each under its own id, ``stacked.output_ids``).

        Waits until this process's outputs are computed (so a failure ends the
        call), and returns those of the outputs ``fetched`` that it holds.
        """
        import jax

        from jaxpp_mlir.runtime.stacked_array import StackedArray

        self.release(released)
        executable, index_arrays = self.programs[program_id]
        flat = [self._resolve(x) for x in arguments]
        outputs = executable(*flat, *index_arrays)
        small: dict[int, np.ndarray] = {}
        _, ids = output_ids(executable.plan, first_id)
        held: list[tuple[int, Any]] = []
        for j, x in enumerate(outputs):
            if isinstance(x, StackedArray):
                held += [(i, chunk.array) for i, chunk in zip(ids[j], x.chunks, strict=True)]
            else:
                held.append((ids[j], x))
        jax.block_until_ready([x for _, x in held if isinstance(x, jax.Array)])
        for array_id, x in held:
            self.store[array_id] = x
        for j in fetched:
            if isinstance(outputs[j], jax.Array):
                small[first_id + j] = np.asarray(outputs[j])
        return small

    def _as_keys(self, x: Any) -> Any:
        """``x`` resolved, an array of keys (held as its data) as keys: what a checkpoint
        records as keys."""
        import jax

        value = self._resolve(x)
        if isinstance(x, HandleRef) and x.key is not None and isinstance(value, jax.Array):
            return jax.random.wrap_key_data(value, impl=x.key)
        return value  # held here as data, or by another worker (a RemoteOutput)

    def _resolve(self, x: Any) -> Any:
        if isinstance(x, StackedRef):
            return x.resolve(self._resolve)
        if isinstance(x, HandleRef):
            if x.id not in self.store:
                from jaxpp_mlir.errors import CallError

                raise CallError(
                    f"array {x.id} was released or never made on worker {self.index} "
                    f"(a handle of another cluster, or used after the driver dropped it)"
                )
            return self.store[x.id]
        return x

    # ------------------------------------------------------------------ arrays
    def fetch(self, ids: Sequence[int], released: Sequence[int] = ()) -> dict[int, np.ndarray]:
        """The stored arrays among ``ids`` that this process holds, on the host."""
        import jax

        self.release(released)
        return {
            i: np.asarray(self.store[i])
            for i in ids
            if i in self.store and isinstance(self.store[i], jax.Array)
        }

    def held(self) -> list[int]:
        """The ids of the arrays this worker keeps."""
        return sorted(self.store)

    def release(self, ids: Sequence[int]) -> None:
        for i in ids:
            self.store.pop(i, None)

    # -------------------------------------------------------------- checkpoints
    def save(self, path: str, tree: Any, force: bool, timeout_s: float | None) -> None:
        """``jaxpp_mlir.checkpoint.save`` of ``tree`` (every worker at once: a collective)."""
        import jax

        from jaxpp_mlir import checkpoint

        checkpoint.save(
            path, jax.tree_util.tree_map(self._as_keys, tree), force=force, timeout_s=timeout_s
        )

    def restore(self, path: str, like: Any, first_id: int) -> list[tuple[int, Any]]:
        """``jaxpp_mlir.checkpoint.restore``; stores leaf i as ``first_id + i``.

        Returns per leaf ``(process holding it, host value or None)``: a leaf
        restored as an array stays here (its holder answers with its process).
        """
        import jax

        from jaxpp_mlir import checkpoint
        from jaxpp_mlir.runtime.multiprocess.remote_output import RemoteOutput
        from jaxpp_mlir.runtime.stacked_array import StackedArray

        restored = checkpoint.restore(path, jax.tree_util.tree_map(self._as_keys, like))
        _, ids = leaf_ids(jax.tree_util.tree_leaves(like), first_id)
        answer: list[tuple[Any, Any]] = []
        for i, leaf in enumerate(jax.tree_util.tree_leaves(restored)):
            if isinstance(leaf, StackedArray):  # each chunk under its id; who holds it
                for array_id, chunk in zip(ids[i], leaf.chunks, strict=True):
                    self.store[array_id] = chunk.array
                answer.append(("stacked", [_holder(c.array) for c in leaf.chunks]))
                continue
            if isinstance(leaf, jax.Array) and jax.dtypes.issubdtype(
                leaf.dtype, jax.dtypes.prng_key
            ):
                leaf = jax.random.key_data(leaf)  # held as data, as a step's key outputs
            self.store[ids[i]] = leaf
            if isinstance(leaf, RemoteOutput):
                answer.append((leaf.process, None))
            elif isinstance(leaf, jax.Array):
                answer.append((jax.process_index(), None))
            else:
                answer.append((-1, leaf))
        return answer


def _holder(array: Any) -> int:
    """The process holding ``array`` (this one's for a jax.Array)."""
    import jax

    from jaxpp_mlir.runtime.multiprocess.remote_output import RemoteOutput

    return array.process if isinstance(array, RemoteOutput) else jax.process_index()
