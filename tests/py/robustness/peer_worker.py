"""One process of the peer-failure tests (run by ``jaxpp_mlir.launch``, 2 processes).

peer_worker.py MODE   process 0 trains; process 1 trains too and, at step 2, leaves or
                      stalls as MODE says (process 0 is then inside step 2, waiting in
                      a transfer with it):

- ``sys_exit``: ``sys.exit(3)``;  ``raise``: an exception escapes;  ``os_exit``: ``os._exit(5)``;
- ``sigkill``: SIGKILL to itself;  ``sigterm``: SIGTERM to itself (jax.distributed takes
  it as a preemption notice: the process goes on, stalled here);
- ``stall``: loops in Python (its watchdog keeps beating);
- ``freeze``: blocks in C holding the GIL (no heartbeat);
- ``stall_after_init``: loops in Python right after ``initialize_from_env()`` while
  process 0 finishes without running anything with it.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support", "multiprocess")
)

from jaxpp_mlir.launch import initialize_from_env, pipeline_devices  # noqa: E402

initialize_from_env()
MODE = sys.argv[1]
VICTIM = os.environ["JAXPP_PROCESS_ID"] == "1"
NUM_RANKS = 2


def stall() -> None:
    while True:
        time.sleep(0.05)


if MODE == "stall_after_init":
    if VICTIM:
        stall()
    print("process 0 finished its work", flush=True)
    sys.exit(0)

import jax  # noqa: E402
import model  # noqa: E402


def leave() -> None:
    print(f"leaving: {MODE}", flush=True)
    if MODE == "sys_exit":
        sys.exit(3)
    if MODE == "raise":
        raise RuntimeError("the victim's data loader broke")
    if MODE == "os_exit":
        os._exit(5)
    if MODE == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    if MODE == "sigterm":
        os.kill(os.getpid(), signal.SIGTERM)
        stall()
    if MODE == "stall":
        stall()
    if MODE == "freeze":
        ctypes.PyDLL(None).sleep(600)  # a PyDLL call keeps the GIL: no thread runs
    raise SystemExit(f"unknown mode {MODE}")


# The smallest pipeline over both processes: one rank (one stage) in each.
step = model.partition_pipeline(pipeline_devices(NUM_RANKS).reshape(-1)).compile()
params, batch = model.make_params(NUM_RANKS), model.make_batch()
for n in range(4):
    if n == 2 and VICTIM:
        leave()
    print(f"step {n}", flush=True)
    params, losses = step(params, batch)
    jax.block_until_ready((params, losses))
print("finished all steps", flush=True)
