"""In the script the launcher starts: ``initialize_from_env`` joins the processes,
``pipeline_devices`` lays the pipeline ranks out over their devices."""

from __future__ import annotations

import os

import numpy as np

from jaxpp_mlir.runtime import options


def initialize_from_env(*, heartbeat_timeout_s: int | None = None) -> bool:
    """Initializes ``jax.distributed`` from the launcher's (or a cluster's) environment.

    - ``JAXPP_NUM_PROCESSES`` and ``JAXPP_PROCESS_ID`` set (this launcher, or
      any launcher that sets them with ``JAX_COORDINATOR_ADDRESS``): initializes
      with them;
    - otherwise, under Slurm or Open MPI, or with ``JAX_COORDINATOR_ADDRESS``
      set: ``jax.distributed.initialize()``, which detects the rest;
    - otherwise: a single process, nothing to do.

    Returns whether several processes run. Also starts the jaxpp watchdog,
    which stops this process with a clear message when a peer is lost.
    ``heartbeat_timeout_s`` (default ``JAXPP_HEARTBEAT_TIMEOUT`` or 20) is how
    long jax's coordination service waits for a silent process;
    ``JAXPP_INIT_TIMEOUT`` (300) how long processes wait for each other to start.
    """
    import jax

    from jaxpp_mlir.runtime.failure import watchdog

    env = os.environ
    if heartbeat_timeout_s is None:
        heartbeat_timeout_s = options.HEARTBEAT_TIMEOUT.value()
    cluster = any(k in env for k in ("SLURM_JOB_ID", "OMPI_MCA_orte_hnp_uri", "PMIX_RANK"))
    timeouts = {
        "heartbeat_timeout_seconds": heartbeat_timeout_s,
        "initialization_timeout": options.INIT_TIMEOUT.value(),
    }
    process_id, num_processes = options.PROCESS_ID.value(), options.NUM_PROCESSES.value()
    if process_id is not None and num_processes is not None:
        jax.distributed.initialize(
            coordinator_address=env.get("JAX_COORDINATOR_ADDRESS"),
            num_processes=num_processes,
            process_id=process_id,
            **timeouts,
        )
    elif cluster or "JAX_COORDINATOR_ADDRESS" in env:
        jax.distributed.initialize(**timeouts)
    else:
        return False
    if jax.process_count() > 1:
        watchdog.ensure_started()
    return jax.process_count() > 1


def pipeline_devices(num_ranks: int, devices_per_rank: int = 1) -> np.ndarray:
    """Devices for ``num_ranks`` pipeline ranks, as an array ``[num_ranks, devices_per_rank]``.

    Ranks are spread evenly over the processes, in order (process 0 holds the
    first ranks), and every rank's devices belong to one process, as the
    multi-process runtime requires. In one process: the first devices.
    """
    import jax

    count = jax.process_count()
    if num_ranks % count:
        raise ValueError(f"{num_ranks} ranks do not split evenly over {count} processes")
    per_process = num_ranks // count
    grid = []
    for process in range(count):
        local = sorted((d for d in jax.devices() if d.process_index == process), key=lambda d: d.id)
        need = per_process * devices_per_rank
        if len(local) < need:
            raise ValueError(
                f"process {process} has {len(local)} devices; {per_process} ranks of "
                f"{devices_per_rank} devices need {need}"
            )
        for r in range(per_process):
            grid.append(local[r * devices_per_rank : (r + 1) * devices_per_rank])
    result = np.empty((num_ranks, devices_per_rank), dtype=object)
    for r, devices in enumerate(grid):
        for i, d in enumerate(devices):
            result[r, i] = d
    return result
