"""A single-controller runtime on Ray: one driver process, one worker process per host.

    import jaxpp_mlir as pp

    with pp.ray.start(2, devices_per_worker=4) as cluster:
        program = pp.partition(lowered, mesh=mesh, schedule=schedule)   # on the driver
        step = cluster.compile(program)          # each worker compiles its ranks
        params, opt_state, loss = step(params, opt_state, batch)
        print(float(loss))                       # small outputs come back with the step
        cluster.save("ckpt", (params, opt_state))   # written by the workers

The driver partitions once and ships the plan (stage modules as text, the task
graph as data); the workers run it with the multi-controller runtime
(``jaxpp_mlir.runtime.multiprocess``) over ``jax.distributed``. Step results stay
on the workers (``RayArray`` handles). Needs Ray: ``pip install 'jaxpp_mlir[ray]'``;
importing this package does not import Ray (``start`` does).
"""

from __future__ import annotations

from jaxpp_mlir.runtime.lazy_exports import lazy_getattr

_SOURCES = {
    "RayArray": "jaxpp_mlir.ray.handles",
    "RayCluster": "jaxpp_mlir.ray.cluster",
    "RayCompiledProgram": "jaxpp_mlir.ray.program",
    "WorkerFailure": "jaxpp_mlir.ray.waiting",
    "start": "jaxpp_mlir.ray.cluster",
}

__all__ = sorted(_SOURCES)

__getattr__ = lazy_getattr(__name__, _SOURCES, globals())


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
