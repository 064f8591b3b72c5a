"""The driver's side: a Ray cluster of workers, one ``jax.distributed`` process each.

``start`` starts (or joins) Ray, places the workers as actors, picks a free port
for the coordinator on worker 0's host and initialises ``jax.distributed`` among
the workers. ``RayCluster.compile`` ships a partitioned program's plan to every
worker, each of which compiles its own ranks (``runtime.multiprocess``, as in a
multi-controller run); steps then run there and leave their results there.
"""

from __future__ import annotations

import collections
import itertools
import logging
import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxpp_mlir.errors import CallError, JaxppError, RuntimeFailure
from jaxpp_mlir.ray.handles import RayArray
from jaxpp_mlir.ray.layout import MeshLayout
from jaxpp_mlir.ray.stacked import StackedRef, leaf_ids
from jaxpp_mlir.ray.start_args import check_start_args
from jaxpp_mlir.ray.waiting import WorkerFailure, probe, wait_all
from jaxpp_mlir.ray.worker import HandleRef, Worker
from jaxpp_mlir.runtime import options
from jaxpp_mlir.runtime.stacked_array import Chunk, StackedArray

logger = logging.getLogger(__name__)

FETCH_MAX_BYTES = 4096  # outputs at most this big come back with the step's answer
_PROBE_TIMEOUT_S = 2.0  # after a failure, how long the other workers get to answer a ping
_SHUT_DOWN = "the cluster was shut down"  # the stop that is no failure


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as e:
        raise ImportError(
            "jaxpp_mlir.ray needs Ray: pip install 'jaxpp_mlir[ray]' (or pip install 'ray>=2.40')"
        ) from e
    return ray


def start(
    num_workers: int,
    *,
    devices_per_worker: int | None = None,
    platform: str | None = "cpu",
    address: str | None = None,
    start_timeout_s: float = 120.0,
    step_timeout_s: float | None = None,
    worker_options: dict[str, Any] | None = None,
) -> RayCluster:
    """Starts ``num_workers`` workers and ``jax.distributed`` among them.

    ``address`` joins a running Ray cluster (``"auto"``, ``"host:port"``); without
    it, a Ray instance local to this machine starts (on 127.0.0.1, no dashboard)
    unless this process already joined one. ``platform="cpu"`` gives each worker
    ``devices_per_worker`` CPU devices (``XLA_FLAGS``; 1 by default); ``None`` leaves
    the workers' devices to their host (GPUs). ``start_timeout_s`` bounds each wait of
    the start-up; ``step_timeout_s`` (default: ``JAXPP_MLIR_TRANSFER_TIMEOUT``, the
    longest a multi-controller process waits in a transfer) each wait of a step.
    ``worker_options`` go to Ray's ``.options`` of every worker actor (resources,
    scheduling strategy); by default a worker reserves no CPU. Every argument is
    checked before anything starts (``CallError`` naming it); when the start fails
    later, a Ray instance it started is stopped.
    """
    num_workers, devices_per_worker, start_timeout_s, step_timeout_s = check_start_args(
        num_workers,
        devices_per_worker,
        platform,
        address,
        start_timeout_s,
        step_timeout_s,
        worker_options,
    )
    ray = _import_ray()
    started_ray = False
    if not ray.is_initialized():
        start = time.perf_counter()
        if address is None:
            ray.init(
                address="local",
                include_dashboard=False,
                _node_ip_address="127.0.0.1",
                configure_logging=False,
                log_to_driver=True,
            )
        else:
            ray.init(address=address, configure_logging=False, log_to_driver=True)
        started_ray = True
        logger.info("ray started in %.2f s", time.perf_counter() - start)
    try:
        env = {}
        if devices_per_worker is not None:
            env = {
                "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices_per_worker}",
                "JAX_PLATFORMS": "cpu",
            }
        # Two threads: a ping (after a failure) is answered next to a step blocked in XLA.
        actor_options = {"num_cpus": 0, "max_concurrency": 2, **(worker_options or {})}
        actor_options.setdefault("runtime_env", {}).setdefault("env_vars", {}).update(env)
        remote_worker = ray.remote(Worker)
        workers = [
            remote_worker.options(**actor_options).remote(i, num_workers)
            for i in range(num_workers)
        ]
    except BaseException:
        if started_ray:
            ray.shutdown()
        raise
    timeout = options.TRANSFER_TIMEOUT.value() if step_timeout_s is None else step_timeout_s
    return RayCluster(workers, start_timeout_s, timeout, owns_ray=started_ray)


def _host_value(leaf: Any) -> Any:
    """A leaf as ``gather`` gives it: host data (keys stay jax key arrays)."""
    import jax

    if isinstance(leaf, StackedArray):
        return np.concatenate([_host_value(c.array) for c in leaf.chunks], axis=0)
    if isinstance(leaf, RayArray):
        return leaf.as_host_value()
    if isinstance(leaf, jax.Array) and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
        return leaf
    return np.asarray(leaf)


def _renamed_chunks(like: StackedArray, ids: list[int], workers: list[int]) -> StackedArray:
    """``like`` (a ``StackedArray`` of handles) with each chunk renamed to its new id."""
    return StackedArray(
        [
            Chunk(c.rows, c.rank, c.array.renamed(array_id, worker))
            for c, array_id, worker in zip(like.chunks, ids, workers, strict=True)
        ]
    )


class RayCluster:
    """The workers of a Ray cluster, driven from this process.

    ``compile(program)`` returns a ``RayCompiledProgram``; ``gather`` fetches
    arrays; ``save``/``restore`` write and read checkpoints on the workers;
    ``shutdown`` (or leaving a ``with`` block) stops the workers. After a worker
    fails (or raises: the others may be mid-step), the workers stop and every later
    call raises ``RuntimeFailure`` (``jax.distributed`` cannot go on without a
    process): start a new cluster.
    """

    def __init__(
        self, workers: list[Any], start_timeout_s: float, step_timeout_s: float, *, owns_ray: bool
    ):
        self.workers = workers
        self.start_timeout_s, self.step_timeout_s = start_timeout_s, step_timeout_s
        self._owns_ray = owns_ray
        self._failure: str | None = None
        self._ids = itertools.count()
        self._programs = itertools.count()
        self._released: collections.deque[int] = collections.deque()
        self.names = [f"worker {i}" for i in range(len(workers))]
        try:
            self.info = self._start_distributed()
        except BaseException:
            self.shutdown()
            raise

    def _start_distributed(self) -> list[dict]:
        pids = self.wait(
            [w.ping.remote() for w in self.workers], "starting the workers", self.start_timeout_s
        )
        self.names = [f"worker {i} (pid {pid})" for i, pid in enumerate(pids)]
        coordinator = self.wait(
            [self.workers[0].coordinator_address.remote()],
            "asking worker 0 for a coordinator address",
            self.start_timeout_s,
        )[0]
        init_timeout = max(1, int(self.start_timeout_s))
        refs = [
            w.initialize.remote(coordinator, options.HEARTBEAT_TIMEOUT.value(), init_timeout)
            for w in self.workers
        ]
        return self.wait(
            refs, f"initialising jax.distributed at {coordinator}", self.start_timeout_s + 5
        )

    # ------------------------------------------------------------------ waiting
    def wait(self, refs: Sequence[Any], what: str, timeout_s: float) -> list[Any]:
        """The workers' answers; on any failure the cluster stops and the error names the
        worker."""
        self.check_running()
        try:
            return wait_all(refs, self.names, what, timeout_s)
        except WorkerFailure as e:
            skip = -1 if e.stalled else e.worker
            others = probe(self.workers, self.names, skip, _PROBE_TIMEOUT_S)
            if others:
                e.args = (f"{e}; {others}",)
            self._stop_after(e)
            raise
        except JaxppError as e:  # a worker's own error: the others may be mid-step
            self._stop_after(e)
            raise

    def _stop_after(self, error: Exception) -> None:
        self._failure = f"{type(error).__name__}: {error}"
        self._kill_workers()

    def check_running(self) -> None:
        """Raises ``RuntimeFailure`` once the cluster stopped (before any call reaches Ray,
        whose own error for a stopped worker names no cause)."""
        if self._failure is None:
            return
        if self._failure == _SHUT_DOWN:
            raise RuntimeFailure(
                "the Ray cluster stopped: it was shut down (cluster.shutdown(), or the end of "
                "its with block), and its workers and the arrays they held are gone; start a "
                "new cluster with pp.ray.start"
            )
        raise RuntimeFailure(f"the Ray cluster stopped after a failure: {self._failure}")

    def everyone(self, method: str, *args: Any) -> list[Any]:
        """Calls ``method`` on every worker (not waiting)."""
        self.check_running()
        return [getattr(w, method).remote(*args) for w in self.workers]

    # ------------------------------------------------------------------ programs
    def compile(self, program: Any) -> Any:
        """Ships ``program`` (a ``PartitionedProgram``) to the workers, which compile their
        ranks; returns a ``RayCompiledProgram`` to call like ``program.compile()``'s."""
        from jaxpp_mlir.ray.program import RayCompiledProgram, RemoteExecutable

        program_id = next(self._programs)
        layout = MeshLayout.of(program.mesh)
        if layout.mpmd_dim % len(self.workers):
            raise CallError(
                f"the program's {layout.mpmd_dim} ranks do not split evenly over "
                f"{len(self.workers)} workers"
            )
        answers = self.wait(
            self.everyone("load", program_id, program.plan, layout),
            f"compiling program {program_id}",
            options.SETUP_TIMEOUT.value(),
        )
        executable = RemoteExecutable(
            self, program_id, program.plan, answers[0]["process_of"], program.output_key_impls
        )
        logger.info(
            "program %d compiled on the workers in %.2f s",
            program_id,
            max(a["compile_s"] for a in answers),
        )
        return RayCompiledProgram(program, executable, [])

    def new_ids(self, count: int) -> int:
        """The first of ``count`` fresh array ids."""
        first = next(self._ids)
        for _ in range(count - 1):
            next(self._ids)
        return first

    def take_released(self) -> list[int]:
        """The ids the driver dropped since the last message (the workers drop them too)."""
        taken = []
        while self._released:
            taken.append(self._released.popleft())
        return taken

    # ------------------------------------------------------------------ arrays
    def release(self, array_id: int) -> None:
        self._released.append(array_id)

    def fetch(self, handles: list[RayArray]) -> list[np.ndarray]:
        """The data of ``handles`` (arrays of this cluster), from the workers holding them."""
        self.check_running()
        by_worker: dict[int, list[int]] = collections.defaultdict(list)
        for h in handles:
            if h._owner is not self:
                raise CallError(f"{h!r} belongs to another Ray cluster")
            by_worker[h.worker].append(h.id)
        workers = sorted(by_worker)
        released = self.take_released()
        answers = self.wait(
            [self.workers[w].fetch.remote(by_worker[w], released) for w in workers],
            f"fetching {len(handles)} arrays",
            self.step_timeout_s,
        )
        found = {i: a for answer in answers for i, a in answer.items()}
        return [found[h.id] for h in handles]

    def gather(self, tree: Any) -> Any:
        """``tree`` with every ``RayArray`` leaf fetched (host numpy arrays; an array of
        typed PRNG keys as a jax key array)."""
        import jax

        leaves, treedef = jax.tree_util.tree_flatten(tree)
        parts = [
            part
            for x in leaves
            for part in ([c.array for c in x.chunks] if isinstance(x, StackedArray) else [x])
        ]
        wanted = [x for x in parts if isinstance(x, RayArray) and not x.fetched]
        if wanted:
            for h, value in zip(wanted, self.fetch(wanted), strict=True):
                h._value = value
        return jax.tree_util.tree_unflatten(treedef, [_host_value(x) for x in leaves])

    def to_workers(self, tree: Any) -> Any:
        """``tree`` as shipped: each ``RayArray`` of this cluster as the id the workers know."""
        import jax

        def ship(x: Any) -> Any:
            if isinstance(x, StackedArray):
                if all(isinstance(c.array, RayArray) for c in x.chunks):
                    return StackedRef(
                        [(c.rows.start, c.rows.stop, c.rank, ship(c.array)) for c in x.chunks]
                    )
                return np.asarray(x)  # chunks on the driver: shipped as host data
            if isinstance(x, RayArray):
                if x._owner is not self:
                    raise CallError(f"{x!r} belongs to another Ray cluster")
                return HandleRef(x.id, x.key_impl)
            if isinstance(x, jax.Array):
                if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
                    return np.asarray(jax.random.key_data(x))  # a step reads keys as data
                return np.asarray(x)
            return x

        return jax.tree_util.tree_map(ship, tree)

    # ------------------------------------------------------------------ checkpoints
    def save(self, path: str | os.PathLike, tree: Any, *, force: bool = False) -> None:
        """Each worker writes the leaves it holds (``jaxpp_mlir.checkpoint.save``): a
        checkpoint that ``jaxpp_mlir.checkpoint.restore`` reads in any runtime."""
        path = os.path.abspath(os.fspath(path))
        shipped = self.to_workers(tree)
        timeout = options.SETUP_TIMEOUT.value()
        self.wait(self.everyone("save", path, shipped, force, timeout), f"saving {path}", timeout)

    def restore(self, path: str | os.PathLike, like: Any) -> Any:
        """The checkpoint at ``path`` read by the workers, each leaf where ``like``'s is.

        ``like``'s ``RayArray`` leaves (say the outputs of an earlier step) say where each
        array goes; the result's arrays are new ``RayArray``s on those workers.
        """
        import jax

        path = os.path.abspath(os.fspath(path))
        leaves, treedef = jax.tree_util.tree_flatten(like)
        first = self.new_ids(leaf_ids(leaves, 0)[0])
        _, ids = leaf_ids(leaves, first)
        answers = self.wait(
            self.everyone("restore", path, self.to_workers(like), first),
            f"restoring {path}",
            options.SETUP_TIMEOUT.value(),
        )
        result = []
        for i, leaf in enumerate(leaves):
            process, value = answers[0][i]
            if process == "stacked":  # each chunk on the worker holding it
                result.append(_renamed_chunks(leaf, ids[i], value))
            elif isinstance(leaf, RayArray):
                result.append(leaf.renamed(ids[i], process))
            else:
                self.release(ids[i])
                result.append(value)
        return jax.tree_util.tree_unflatten(treedef, result)

    # ------------------------------------------------------------------ stopping
    def _kill_workers(self) -> None:
        ray = _import_ray()
        for w in self.workers:
            try:
                ray.kill(w, no_restart=True)
            except Exception as e:  # already gone
                logger.debug("killing a worker: %s", e)

    def shutdown(self) -> None:
        """Stops the workers (and the local Ray instance this cluster started)."""
        self._kill_workers()
        if self._failure is None:
            self._failure = _SHUT_DOWN
        if self._owns_ray:
            _import_ray().shutdown()
            self._owns_ray = False

    def __enter__(self) -> RayCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        state = "stopped" if self._failure else "running"
        return f"RayCluster({len(self.workers)} workers, {state})"
