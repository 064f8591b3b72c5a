"""Train a small MLP as a 4-stage pipeline on CPU devices and check it against jax.jit.

Run: python examples/train_mlp.py [--steps N] [--schedule NAME] [--dump-dir DIR]
                                  [--trace step.json] [--plot schedule.png]

--trace records every compile and step as a Chrome/Perfetto trace (open it in
ui.perfetto.dev); --plot draws the schedule as planned (simulated) and, with
--trace, the last step as measured, one above the other.

The step is an ordinary JAX training step: a microbatch loop (treduce) of
value_and_grad over a marked model, then optax's Adam update. It is lowered
with jax.jit, partitioned into stage programs over 4 of the 8 CPU devices and
run; each step's loss is printed next to plain jax.jit's, and the script exits
non-zero if the losses, parameters or optimizer state differ beyond RTOL.

The same script runs as several processes (jax.distributed), one pipelined
training whose 4 ranks are spread over the processes:

    python -m jaxpp_mlir.launch --nproc 2 --devices-per-proc 4 examples/train_mlp.py
    python -m jaxpp_mlir.launch --nproc 4 --devices-per-proc 1 examples/train_mlp.py

Every process lowers and partitions the same step, compiles and runs its own
ranks' stages; each step's loss (held by the last stage's process) is gathered
to every process, and process 0 prints the same lines as a single-process run.
Each process checks against jax.jit on its own devices.

With --ray N, this process is the driver of a local Ray cluster of N worker
processes (4 CPU devices each, jax.distributed among them; needs the ray
extra: pip install -e ".[ray]"):

    python examples/train_mlp.py --ray 2

The driver lowers and partitions the step once and ships the plan; each worker
compiles and runs its ranks. Parameters and optimizer state stay on the
workers between steps; only each step's loss comes back, and the final state
is gathered once for the check against jax.jit (run on the driver's devices).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import jaxpp_mlir as pp  # noqa: E402
from jaxpp_mlir.launch import initialize_from_env, pipeline_devices  # noqa: E402

NUM_STAGES = 4
LAYERS_PER_STAGE = 2
WIDTH = 64
MICROBATCHES = 8
MICROBATCH_SIZE = 8
# Each stage and the Adam update run as programs of their own rather than inside
# one jitted program, so XLA may group a reduction's sums (by the CPU's vector
# width) or contract the update's arithmetic differently: a few float32 ulps per
# step, which later steps carry forward (README, "Numbers").
RTOL = 1e-5
RAY_DEVICES_PER_WORKER = 4
SCHEDULES = {
    "gpipe": lambda: pp.GPipe(NUM_STAGES),
    "1f1b": lambda: pp.Std1F1B(NUM_STAGES),
    "eager1f1b": lambda: pp.Eager1F1B(NUM_STAGES),
    "zerobubble": lambda: pp.ZeroBubble(NUM_STAGES),
}

optimizer = optax.adam(1e-3)


def init_params(key: jax.Array) -> list[dict[str, jax.Array]]:
    params = []
    for layer_key in jax.random.split(key, NUM_STAGES * LAYERS_PER_STAGE):
        w = jax.random.normal(layer_key, (WIDTH, WIDTH)) / np.sqrt(WIDTH)
        params.append({"w": w, "b": jnp.zeros((WIDTH,))})
    return params


def model(params: list[dict[str, jax.Array]], x: jax.Array) -> jax.Array:
    for index, layer in enumerate(params):
        x = x @ layer["w"] + layer["b"]
        if index < len(params) - 1:
            x = jnp.tanh(x)
        if index % LAYERS_PER_STAGE == LAYERS_PER_STAGE - 1:
            x = pp.pipeline_enter_stage(x)  # the end of a stage
    return x


def loss_fn(params, microbatch):
    x, y = microbatch
    return jnp.mean((model(params, x) - y) ** 2) / MICROBATCHES


def train_step(params, opt_state, batch):
    losses, grads = pp.treduce(
        lambda mb: jax.value_and_grad(loss_fn)(params, mb), batch, operation=(pp.Add, pp.Add)
    )
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, losses


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--schedule", choices=sorted(SCHEDULES), default="1f1b")
    parser.add_argument("--dump-dir", default=None, help="write the IR of every pass here")
    parser.add_argument("--trace", default=None, help="write a Chrome/Perfetto trace here")
    parser.add_argument("--plot", default=None, help="draw planned (and measured) schedule here")
    parser.add_argument(
        "--ray", type=int, default=0, metavar="N", help="run on a local Ray cluster of N workers"
    )
    args = parser.parse_args()
    if args.ray:
        with pp.ray.start(args.ray, devices_per_worker=RAY_DEVICES_PER_WORKER) as cluster:
            return run(args, False, cluster)
    # jax.distributed under jaxpp_mlir.launch (or Slurm, Open MPI); nothing in one process.
    return run(args, initialize_from_env(), None)


def run(args, several: bool, cluster) -> int:
    """The training; ``cluster``: the Ray cluster whose workers run it (None: here)."""
    me = jax.process_index()

    def say(*text: object) -> None:  # process 0 speaks for all
        if me == 0:  # one write per line: other writers of this stdout (Gloo) cannot split it
            sys.stdout.write(" ".join(map(str, text)) + "\n")
            sys.stdout.flush()

    key_params, key_x, key_y = jax.random.split(jax.random.PRNGKey(0), 3)
    params = init_params(key_params)
    opt_state = optimizer.init(params)
    shape = (MICROBATCHES, MICROBATCH_SIZE, WIDTH)
    batch = (jax.random.normal(key_x, shape), jax.random.normal(key_y, shape))

    devices = pipeline_devices(NUM_STAGES).reshape(-1)  # ranks spread over the processes
    mesh = pp.MpmdMesh(jax.sharding.Mesh(devices, ("stage",)), "stage")
    lowered = jax.jit(train_step).lower(params, opt_state, batch)
    dump_dir = args.dump_dir
    if dump_dir is not None and several:
        dump_dir = os.path.join(dump_dir, f"process{me}")
    program = pp.partition(
        lowered, mesh=mesh, schedule=SCHEDULES[args.schedule](), dump_dir=dump_dir
    )
    say(program)
    say(f"peak bytes per rank: {program.peak_bytes_per_rank()}")
    tracing = pp.program_trace(args.trace) if args.trace else contextlib.nullcontext()
    with tracing as recorder:
        if cluster is None:
            step = program.compile()
        else:
            step = cluster.compile(program)
            say(f"{args.ray} Ray workers; {step.executable!r}")
        ok = train(args, step, params, opt_state, batch, several, say)
    if args.plot and me == 0:
        plot(args, program, recorder)
    return 0 if ok else 1


def plot(args, program, recorder) -> None:
    from jaxpp_mlir.schedules.plot import plot_planned_vs_measured

    if recorder is None:
        program.schedule.plot(MICROBATCHES, path=args.plot)
        print(f"planned schedule drawn in {args.plot}")
    else:
        plot_planned_vs_measured(program.schedule, MICROBATCHES, recorder.path, path=args.plot)
        print(f"trace in {recorder.path}; planned and measured schedule drawn in {args.plot}")


def train(args, step, params, opt_state, batch, several, say) -> bool:
    """Runs ``args.steps`` pipelined steps next to jax.jit's; whether they agree."""
    if several:
        say(f"{jax.process_count()} processes; {step.executable!r}".splitlines()[0])

    reference_step = jax.jit(train_step)  # on this process's own devices
    ours = theirs = (params, opt_state)
    ok = True
    for index in range(args.steps):
        *ours, loss = step(*ours, batch)  # outputs held by other processes: RemoteOutput
        *theirs, reference_loss = reference_step(*theirs, batch)
        loss, reference_loss = float(step.gather(loss)), float(reference_loss)
        agrees = bool(np.isclose(loss, reference_loss, rtol=RTOL, atol=0))
        ok &= agrees
        say(
            f"step {index}: pipelined loss {loss:.8f}   jax.jit loss {reference_loss:.8f}"
            f"   {'ok' if agrees else 'MISMATCH'}"
        )
    gathered = step.gather(ours)  # every process calls it (a collective with several)
    for a, b in zip(
        jax.tree_util.tree_leaves(gathered), jax.tree_util.tree_leaves(theirs), strict=True
    ):
        if not np.allclose(a, np.asarray(b), rtol=RTOL, atol=1e-7):
            ok = False
            print("parameters or optimizer state differ from jax.jit's", file=sys.stderr)
            break
    say("pipelined training matches jax.jit" if ok else "MISMATCH against jax.jit")
    return ok


if __name__ == "__main__":
    sys.exit(main())
