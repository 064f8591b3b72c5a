"""Run one script as several ``jax.distributed`` processes on this machine.

    python -m jaxpp_mlir.launch --nproc 2 --devices-per-proc 4 script.py args...

starts ``script.py args...`` ``--nproc`` times (with this interpreter, or the command
in ``JAXPP_MLIR_LAUNCH_PYTHON``), each process with
``--devices-per-proc`` CPU devices, a coordinator on 127.0.0.1 at a free port,
and these environment variables:

- ``JAX_COORDINATOR_ADDRESS`` / ``JAX_COORDINATOR_BIND_ADDRESS``: ``127.0.0.1:PORT``
  (``jax.distributed.initialize`` reads both),
- ``JAXPP_NUM_PROCESSES``, ``JAXPP_PROCESS_ID``: the process count and this
  process's id, read by ``initialize_from_env``,
- ``XLA_FLAGS`` with ``--xla_force_host_platform_device_count`` and
  ``JAX_PLATFORMS=cpu``.

The script calls ``jaxpp_mlir.launch.initialize_from_env()`` first (it also
works under Slurm or Open MPI, and alone, without any of these variables).
Output lines are prefixed with ``[pN]``, each child line kept whole; Gloo's
connection messages (``[Gloo] Rank 0 is connected to 1 peer ranks...``, one per
collective set-up) are dropped unless ``--gloo-log`` is given. When a process fails, the others get
``--grace`` seconds to stop by themselves (the runtime's watchdog makes them
exit), then every process still running is killed by PID; the launcher exits
with the first failing process's code (128 + signal for a signal). At the end
it prints a summary on stderr: which process failed first and how (exit code
or signal), and what became of every other one (exited by itself, how long
after, or killed by the launcher). A process the launcher stops gets SIGTERM, then
SIGKILL ``JAXPP_MLIR_KILL_GRACE`` seconds later (3 by default). Once one process
has exited with 0, the others have ``JAXPP_MLIR_SHUTDOWN_TIMEOUT`` seconds (300 by
default: the longest a finished process waits for its peers) to exit too; a process
still running then has stalled (say, before its first jaxpp call, where no watchdog
watches it): the launcher names it, kills every process left and exits with 124.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence

from jaxpp_mlir.distributed import launch_args
from jaxpp_mlir.distributed.child_output import say
from jaxpp_mlir.distributed.child_setup import python_command
from jaxpp_mlir.distributed.script_setup import initialize_from_env, pipeline_devices
from jaxpp_mlir.distributed.supervision import Launch

# What a script run by the launcher imports from here; the rest is jaxpp_mlir.distributed's.
__all__ = ["initialize_from_env", "main", "pipeline_devices"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m jaxpp_mlir.launch",
        description="Run a script as several jax.distributed processes on this machine.",
    )
    parser.add_argument(
        "--nproc",
        type=launch_args.count(launch_args.MAX_PROCESSES),
        required=True,
        help="number of processes",
    )
    parser.add_argument(
        "--devices-per-proc",
        type=launch_args.count(launch_args.MAX_DEVICES_PER_PROCESS),
        default=None,
        help="CPU devices per process",
    )
    parser.add_argument(
        "--port", type=launch_args.port, default=None, help="coordinator port (default: free)"
    )
    parser.add_argument(
        "--grace",
        type=launch_args.non_negative_seconds,
        default=30.0,
        help="seconds the others get to exit after a process fails (default 30)",
    )
    parser.add_argument(
        "--timeout", type=launch_args.positive_seconds, default=None, help="limit for the whole run"
    )
    parser.add_argument("--no-prefix", action="store_true", help="do not prefix output lines")
    parser.add_argument(
        "--gloo-log",
        action="store_true",
        help="keep Gloo's connection messages (dropped by default)",
    )
    parser.add_argument("script", help="the Python script every process runs")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    ns = parser.parse_args(argv)
    if not os.path.isfile(ns.script):
        parser.error(f"script {ns.script!r} is not a file")
    launch = Launch(
        [*python_command(), ns.script, *ns.args],
        ns.nproc,
        devices_per_proc=ns.devices_per_proc,
        port=ns.port,
        prefix=not ns.no_prefix,
        gloo_log=ns.gloo_log,
    )

    def stop(signum: int, _frame: object) -> None:
        say(f"got signal {signum}; killing every process")
        launch.kill()
        sys.exit(128 + signum)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    return launch.wait(grace_s=ns.grace, timeout_s=ns.timeout)


if __name__ == "__main__":
    sys.exit(main())
