"""Small outputs of a distributed program, readable in every process.

A step's small results (a loss, a step count, metrics) are computed on the
rank of one process; every process of a ``jax.distributed`` run reads them
(``np.asarray(loss)``). After each call, the process holding such an output
(at most ``SHARED_OUTPUT_MAX_BYTES``) publishes its host copy under one key
of ``jax.distributed``'s key-value store per other process, and each other
process fetches its key: the publishes on a thread per call that the
process's exit waits for (a peer may still read them), the fetches on a daemon
thread of the program, so a call still returns as soon as its work is
dispatched. The placeholder of
the other processes (``RemoteOutput``) reads the fetched copy; larger outputs
keep ``gather``.

A publish waits only for this process's device work and a fetch only for a
peer's publish, never for a peer's fetch, so no cycle of waits exists. A fetch
waits at most the transfer timeout; its failure is raised where the output is
read.
"""

from __future__ import annotations

import concurrent.futures
import logging
import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import RuntimeFailure
from ..plan import TensorSpec
from .coordination import ROOT, client

logger = logging.getLogger(__name__)

_VALUE, _FAILURE = b"v", b"e"  # the first byte of a published entry


def shareable(spec: TensorSpec, max_bytes: int) -> bool:
    """Whether an output of ``spec`` is sent to every process (numpy dtypes only)."""
    try:
        itemsize = np.dtype(spec.dtype).itemsize
    except TypeError:
        return False  # a typed PRNG key: read through gather
    return int(np.prod(spec.shape, dtype=np.int64)) * itemsize <= max_bytes


class OutputSharing:
    """Publishes this process's small outputs and fetches the other processes' ones.

    ``owners[j]`` is the process holding output j, for every shared output j.
    """

    def __init__(
        self,
        serial: int,
        process: int,
        num_processes: int,
        owners: dict[int, int],
        specs: Sequence[TensorSpec],
        timeout_s: float,
    ):
        self.prefix = f"{ROOT}/program{serial}/shared"
        self.process = process
        self.num_processes = num_processes
        self.owners = owners
        self.specs = specs
        self.timeout_s = timeout_s
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._name = f"jaxpp-shared-outputs-{serial}"
        self._publishing: dict[int, concurrent.futures.Future] = {}  # id(array) -> publish

    def after_call(
        self, call: int, outputs: Mapping[int, Any]
    ) -> dict[int, concurrent.futures.Future]:
        """Starts this call's publishes of ``outputs`` (this process's, by index) and queues
        its fetches; returns a future per fetched output."""
        mine = [(j, outputs[j]) for j, owner in self.owners.items() if owner == self.process]
        if mine:
            published = [concurrent.futures.Future() for _ in mine]
            for (_, array), future in zip(mine, published, strict=True):
                if hasattr(array, "copy_to_host_async"):
                    array.copy_to_host_async()
                self._publishing[id(array)] = future
            # Not a daemon: the process's exit (even os._exit after multiprocessing's
            # threading._shutdown) waits until its peers have what they will read.
            threading.Thread(
                target=self._publish_all,
                args=(call, mine, published),
                name=f"{self._name}-publish-{call}",
            ).start()
        return {
            j: self._submit(self._fetch, call, j, owner)
            for j, owner in self.owners.items()
            if owner != self.process
        }

    def _publish_all(
        self, call: int, outputs: list[tuple[int, Any]], published: list[concurrent.futures.Future]
    ) -> None:
        for (j, array), future in zip(outputs, published, strict=True):
            try:
                self._publish(call, j, array)
                future.set_result(None)
            except BaseException as e:  # the key-value store is gone: the peers will know
                future.set_exception(e)

    def _submit(self, job: Callable[..., Any], *args: Any) -> concurrent.futures.Future:
        """Runs ``job(*args)`` on the program's fetching thread, after the jobs before it."""
        if self._thread is None:
            # A daemon: a fetch waiting for a lost peer must not hold the process at exit.
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._queue.put((future, job, args))
        return future

    def _run(self) -> None:
        while True:
            future, job, args = self._queue.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(job(*args))
            except BaseException as e:
                future.set_exception(e)

    def before_call(self, arguments: Sequence[Any]) -> None:
        """Waits for the publishes of arguments this call may consume (donate)."""
        if not self._publishing:
            return
        for x in arguments:
            pending = self._publishing.get(id(x))
            if pending is not None:
                concurrent.futures.wait([pending])
        self._publishing = {k: f for k, f in self._publishing.items() if not f.done()}

    def _key(self, call: int, j: int, reader: int) -> str:
        return f"{self.prefix}/{call}/{j}/{reader}"

    def _publish(self, call: int, j: int, array: Any) -> None:
        try:
            data = _VALUE + np.ascontiguousarray(np.asarray(array)).tobytes()
        except Exception as e:  # the readers raise this where they read the output
            logger.warning("output %d of call %d cannot be shared: %s", j, call, e)
            data = _FAILURE + f"{type(e).__name__}: {e}".encode()[:2000]
        kv = client()
        for reader in range(self.num_processes):
            if reader != self.process:
                kv.key_value_set_bytes(self._key(call, j, reader), data)

    def _fetch(self, call: int, j: int, owner: int) -> np.ndarray:
        key = self._key(call, j, self.process)
        spec = self.specs[j]
        kv = client()
        try:
            data = kv.blocking_key_value_get_bytes(key, int(self.timeout_s * 1000))
        except Exception as e:
            raise RuntimeFailure(
                f"output {j} ({spec}) of call {call} did not come from process {owner} within "
                f"{self.timeout_s:.0f} s (the transfer timeout): {e}"
            ) from e
        try:
            kv.key_value_delete(key)
        except Exception:
            pass  # the service is going away; nothing to free
        if data[:1] != _VALUE:
            raise RuntimeFailure(
                f"process {owner} could not read output {j} ({spec}) of call {call}: "
                f"{data[1:].decode(errors='replace')}"
            )
        value = np.frombuffer(data[1:], dtype=np.dtype(spec.dtype)).reshape(tuple(spec.shape))
        return value.copy()  # writable, like np.asarray of a jax.Array's host copy


def share_owners(
    outputs: Sequence[Any], process_of: Sequence[int], max_bytes: int
) -> dict[int, int]:
    """Output index -> its process, for every output of at most ``max_bytes`` (but one
    made of pieces on several ranks: each process keeps its own)."""
    return {
        j: process_of[out.rank]
        for j, out in enumerate(outputs)
        if max_bytes > 0 and shareable(out.spec, max_bytes) and not out.pieces
    }
