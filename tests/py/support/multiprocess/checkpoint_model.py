"""The pipelined Adam step that the multi-process checkpoint test trains, saves and restores.

Four ranks of two devices each (``stage`` x ``model``), one stage per rank, each
stage's weight sharded over ``model``. Imported by the checkpoint worker and by
the test itself (the single-process side); the XLA device count must be set
before jax is imported.
"""

from __future__ import annotations

import pathlib
import sys

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import jaxpp_mlir as pp

sys.path.insert(0, str(pathlib.Path(__file__).parents[1]))  # tests/py/support: the shared toolkit
from toolkit import ADAM as OPTIMIZER  # noqa: E402
from toolkit import adam_train_step as train_step  # noqa: E402

NUM_RANKS = 4
DEVICES_PER_RANK = 2
WIDTH = 8
SPECS = [{"w": P(None, "model"), "b": P("model")}] * NUM_RANKS
SCHEDULES = {"std1f1b": pp.Std1F1B(NUM_RANKS), "gpipe": pp.GPipe(NUM_RANKS)}


def initial_state():
    """Parameters, optimizer state and batch as host (numpy) values."""
    # numpy's generator: jax.random would compile programs in every process
    rng = np.random.default_rng(0)
    params = [
        {"w": rng.standard_normal((WIDTH, WIDTH), np.float32) / 2, "b": np.zeros(WIDTH, "f4")}
        for _ in range(NUM_RANKS)
    ]
    opt_state = jax.tree.map(np.asarray, OPTIMIZER.init(params))
    shape = (4, 2, WIDTH)
    batch = (rng.standard_normal(shape, np.float32), rng.standard_normal(shape, np.float32))
    return params, opt_state, batch


def mesh(devices: np.ndarray) -> pp.MpmdMesh:
    """``devices`` is ``[ranks, devices per rank]``."""
    return pp.MpmdMesh(jax.sharding.Mesh(np.asarray(devices), ("stage", "model")), "stage")


def compile_programs(
    devices: np.ndarray, schedules: tuple[str, ...] = tuple(SCHEDULES)
) -> dict[str, pp.CompiledProgram]:
    """The step partitioned with each of ``schedules`` over ``devices``, compiled."""
    mpmd = mesh(devices)
    lowering = mpmd.lowering_mesh()
    param_sh = [{k: NamedSharding(lowering, s) for k, s in layer.items()} for layer in SPECS]
    shapes = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), initial_state())
    lowered = jax.jit(train_step, in_shardings=(param_sh, None, None)).lower(*shapes)
    return {
        name: pp.partition(lowered, mesh=mpmd, schedule=schedule).compile()
        for name, schedule in SCHEDULES.items()
        if name in schedules
    }


def train(step, params, opt_state, batch, steps: int):
    for _ in range(steps):
        params, opt_state, _ = step(params, opt_state, batch)
    return params, opt_state


def jit_reference(steps: int):
    """``steps`` steps of plain ``jax.jit`` from the initial state (host values)."""
    params, opt_state, batch = initial_state()
    step = jax.jit(train_step)
    for _ in range(steps):
        params, opt_state, _ = step(params, opt_state, batch)
    return jax.tree.map(np.asarray, (params, opt_state))
