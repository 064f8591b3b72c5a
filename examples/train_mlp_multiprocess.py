"""The main job (examples/train_mlp.py) as several processes, one or more stages each.

    python -m jaxpp_mlir.launch --nproc 2 --devices-per-proc 4 examples/train_mlp_multiprocess.py
    python -m jaxpp_mlir.launch --nproc 4 --devices-per-proc 1 examples/train_mlp_multiprocess.py

Every process runs this same script: it lowers and partitions the same step
(treduce over microbatches + optax Adam) on a 4-rank mesh whose ranks are
spread over the processes, compiles its own ranks' stages, and runs them.
Each step's loss (held by the process of the last stage) is gathered to every
process; process 0 prints it next to plain jax.jit's, in the format of
examples/train_mlp.py, so the lines can be compared with a single-process run
(``python examples/train_mlp.py``). At the end the parameters and optimizer
state are gathered and compared with jax.jit's; the exit code is non-zero on a
mismatch. Run alone (no launcher), it is a single-process run of the same code.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from jaxpp_mlir.launch import initialize_from_env, pipeline_devices  # noqa: E402

initialize_from_env()  # before anything touches jax's devices

import jax  # noqa: E402
import numpy as np  # noqa: E402
import train_mlp as job  # noqa: E402  (the model, the step and the optimizer)

import jaxpp_mlir as pp  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--schedule", choices=sorted(job.SCHEDULES), default="1f1b")
    args = parser.parse_args()
    me = jax.process_index()

    key_params, key_x, key_y = jax.random.split(jax.random.PRNGKey(0), 3)
    params = job.init_params(key_params)
    opt_state = job.optimizer.init(params)
    shape = (job.MICROBATCHES, job.MICROBATCH_SIZE, job.WIDTH)
    batch = (jax.random.normal(key_x, shape), jax.random.normal(key_y, shape))

    devices = pipeline_devices(job.NUM_STAGES).reshape(-1)  # ranks spread over processes
    mesh = pp.MpmdMesh(jax.sharding.Mesh(devices, ("stage",)), "stage")
    lowered = jax.jit(job.train_step).lower(params, opt_state, batch)
    program = pp.partition(lowered, mesh=mesh, schedule=job.SCHEDULES[args.schedule]())
    step = program.compile()
    if me == 0:
        print(f"{jax.process_count()} processes; {step.executable!r}".splitlines()[0])

    reference_step = jax.jit(job.train_step)  # on this process's own devices
    ours = theirs = (params, opt_state)
    ok = True
    for index in range(args.steps):
        *ours, loss = step(*ours, batch)  # outputs of other processes are RemoteOutputs
        *theirs, reference_loss = reference_step(*theirs, batch)
        loss, reference_loss = float(step.gather(loss)), float(reference_loss)
        agrees = bool(np.isclose(loss, reference_loss, rtol=job.RTOL, atol=0))
        ok &= agrees
        if me == 0:
            print(
                f"step {index}: pipelined loss {loss:.8f}   jax.jit loss {reference_loss:.8f}"
                f"   {'ok' if agrees else 'MISMATCH'}"
            )
    gathered = step.gather(ours)
    for a, b in zip(
        jax.tree_util.tree_leaves(gathered), jax.tree_util.tree_leaves(theirs), strict=True
    ):
        if not np.allclose(a, np.asarray(b), rtol=job.RTOL, atol=1e-7):
            ok = False
            print("parameters or optimizer state differ from jax.jit's", file=sys.stderr)
            break
    if me == 0:
        print("pipelined training matches jax.jit" if ok else "MISMATCH against jax.jit")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
