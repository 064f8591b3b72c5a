"""The pipelined treduce training step that the multi-process tests run.

Imported by the worker processes and by the test itself (for the single-process
reference); the XLA device count must be set before jax is imported.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

import jaxpp_mlir as pp

WIDTH = 8
NUM_RANKS = 4
NUM_MICROBATCHES = 8
MICROBATCH_SIZE = 2
STEPS = 3
SCHEDULES = {
    "std1f1b": lambda: pp.Std1F1B(NUM_RANKS),
    "interleaved": lambda: pp.Interleaved1F1B(2 * NUM_RANKS, NUM_RANKS),
}


# Host (numpy) random values: jax.random would compile a program per shape in every
# process (seconds of CPU per worker on this machine).
def make_params(num_stages: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    scale = np.float32(1 / np.sqrt(WIDTH))
    return [rng.standard_normal((WIDTH, WIDTH), np.float32) * scale for _ in range(num_stages)]


def make_batch() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    shape = (NUM_MICROBATCHES, MICROBATCH_SIZE, WIDTH)
    return rng.standard_normal(shape, np.float32), rng.standard_normal(shape, np.float32)


def loss_fn(params, microbatch):
    x, y = microbatch
    for w in params:
        x = pp.pipeline_enter_stage(jnp.tanh(x @ w))
    return jnp.mean((x - y) ** 2)


def train_step(params, batch):
    losses, grads = pp.treduce(
        lambda mb: jax.value_and_grad(loss_fn)(params, mb), batch, operation=(pp.Concat(), pp.Add)
    )
    return [p - 0.1 * g for p, g in zip(params, grads, strict=True)], losses


def mesh(devices: np.ndarray) -> pp.MpmdMesh:
    """A 1-D pipeline mesh over ``devices`` (one device per rank)."""
    return pp.MpmdMesh(jax.sharding.Mesh(np.asarray(devices).reshape(-1), ("stage",)), "stage")


def partition(schedule_name: str, devices: np.ndarray) -> pp.PartitionedProgram:
    schedule = SCHEDULES[schedule_name]()
    params, batch = make_params(schedule.num_stages), make_batch()
    lowered = jax.jit(train_step).lower(params, batch)
    return pp.partition(lowered, mesh=mesh(devices), schedule=schedule)


def partition_pipeline(devices: np.ndarray) -> pp.PartitionedProgram:
    """Std1F1B over ``len(devices)`` ranks of one device each, one stage per rank."""
    num_ranks = len(devices)
    lowered = jax.jit(train_step).lower(make_params(num_ranks), make_batch())
    return pp.partition(lowered, mesh=mesh(devices), schedule=pp.Std1F1B(num_ranks))


def train(
    program: pp.PartitionedProgram, steps: int = STEPS, step: pp.CompiledProgram | None = None
):
    """``steps`` steps from the initial parameters (with ``step``, the program compiled
    already); returns (the compiled step, params, losses per step)."""
    step = program.compile() if step is None else step
    params, batch = make_params(program.schedule.num_stages), make_batch()
    history = []
    for _ in range(steps):
        params, losses = step(params, batch)
        history.append(losses)
    return step, params, history


def per_process_order(plan):
    """The plan with each process's instructions listed one process after the other
    (as per-process action lists would be written), ranks 0-1 being process 0."""
    half = plan.num_ranks // 2
    first = [i for i in plan.instructions if i.rank < half]
    second = [i for i in plan.instructions if i.rank >= half]
    return dataclasses.replace(plan, instructions=tuple(first + second))


def partition_sharded(devices: np.ndarray) -> pp.PartitionedProgram:
    """Two ranks of two devices each (data parallel inside a stage), Std1F1B(2).

    ``devices`` is ``[2 ranks, 2 devices]``. The step is lowered from shapes
    (no arrays), as every process can do without holding the data.
    """
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mpmd = pp.MpmdMesh(jax.sharding.Mesh(np.asarray(devices), ("stage", "data")), "stage")
    lowering_mesh = mpmd.lowering_mesh()
    replicated = NamedSharding(lowering_mesh, P())
    rows = NamedSharding(lowering_mesh, P(None, "data", None))
    params, batch = make_params(2), make_batch()
    step = jax.jit(
        train_step,
        in_shardings=([replicated] * 2, (rows, rows)),
        out_shardings=([replicated] * 2, replicated),
    )
    shapes = jax.tree_util.tree_map(
        lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), (params, batch)
    )
    return pp.partition(step.lower(*shapes), mesh=mpmd, schedule=pp.Std1F1B(2))
