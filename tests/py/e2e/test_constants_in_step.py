"""Constants anywhere in the step partition and equal jax.jit.

JAX hoists an array the step closes over (a sinusoidal position table, ``np.arange``)
to the top of ``@main`` and reads it inside the microbatch loop: each stage function
that reads it gets its own copy (jaxpp-outline-stages), with and without
``in_shardings`` (Shardy's ``sdy.constant``), whatever its shape and dtype, read by one
stage or by several, forward and backward, before the loop, after it or returned.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import toolkit
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import jaxpp_mlir as pp

pytestmark = pytest.mark.numerics

WIDTH = 8
NUM_STAGES = 2

shared_stage_compiles = toolkit.stage_compiles_shared_by_file()


def _sinusoids(length: int, width: int) -> np.ndarray:
    position = np.arange(length, dtype=np.float32)[:, None]
    rate = 1.0 / 10000 ** (np.arange(0, width, 2, dtype=np.float32) / width)
    table = np.zeros((length, width), np.float32)
    table[:, 0::2] = np.sin(position * rate)
    table[:, 1::2] = np.cos(position * rate)
    return table


POSITIONS = _sinusoids(2, WIDTH)  # one row per position of a 2-row microbatch
EVEN_COLUMNS = np.arange(WIDTH) % 2 == 0  # a bool constant
GATHER_ROWS = np.arange(WIDTH, dtype=np.int32)[::-1].copy()  # an int32 constant


def _loss(case: str):
    def loss(params, microbatch):
        x, y = microbatch
        if case == "position_table":  # read by stage 0 only
            x = x + POSITIONS
        if case == "in_a_cond":  # read inside a region of a stage op
            x = jax.lax.cond(jnp.sum(x) > 0, lambda v: v + POSITIONS, lambda v: v * 0.5, x)
        for w in params:
            if case == "every_dtype":  # bool, int32 and bf16 constants in every stage
                x = jnp.where(EVEN_COLUMNS, x, 0.5 * x)
                x = x + jnp.take(w, GATHER_ROWS, axis=0)[:2]
                x = (x.astype(jnp.bfloat16) * np.full(WIDTH, 0.75, jnp.bfloat16)).astype(
                    jnp.float32
                )
            x = jnp.tanh(x @ w)
            if case in ("arange_in_every_stage", "sharded"):  # forward and backward read it
                x = x * (np.arange(1, WIDTH + 1, dtype=np.float32) / WIDTH)
            x = pp.pipeline_enter_stage(x)
        if case == "position_table_last":  # read by the last stage
            x = x * POSITIONS
        return jnp.mean((x - y) ** 2)

    return loss


def _step(case: str):
    loss = _loss(case)

    def step(params, batch):
        xs, ys = batch
        if case == "before_the_loop":
            xs = xs + np.arange(WIDTH, dtype=np.float32)
        total, grads = pp.treduce(
            lambda mb: jax.value_and_grad(loss)(params, mb), (xs, ys), operation=(pp.Add, pp.Add)
        )
        params = [p - 0.1 * g for p, g in zip(params, grads, strict=True)]
        if case == "after_the_loop":
            params = [p + np.float32(1e-3) * np.eye(WIDTH, dtype=np.float32) for p in params]
        if case == "returned":
            return params, total, np.arange(3, dtype=np.int32)
        return params, total

    return step


CASES = [
    "position_table",
    "position_table_last",
    "arange_in_every_stage",
    "every_dtype",
    "in_a_cond",
    "before_the_loop",
    "after_the_loop",
    "returned",
]


def _inputs():
    params = toolkit.mlp_params(NUM_STAGES, WIDTH, seed=0)
    return params, toolkit.mlp_batch(4, 2, WIDTH, seed=1)


@pytest.mark.parametrize("case", CASES)
def test_constants_partition_and_match_jax_jit(case):
    params, batch = _inputs()
    step = jax.jit(_step(case))
    program = pp.partition(
        step.lower(params, batch), mesh=toolkit.make_mesh(NUM_STAGES), schedule=pp.Std1F1B(2)
    )
    toolkit.assert_matches_reference(
        program.compile()(params, batch), step(params, batch), toolkit.SEPARATE_PROGRAMS
    )


def test_constants_read_by_every_stage_are_copied_not_sent():
    """The task graph holds no constant, no task takes the table as an argument (nothing
    is sent for it), and every stage function that reads it has its own copy."""
    params, batch = _inputs()
    program = pp.partition(
        toolkit.lower_cached(_step("arange_in_every_stage"), params, batch),
        mesh=toolkit.make_mesh(NUM_STAGES),
        schedule=pp.Std1F1B(2),
    )
    ir_text = program.ir()
    table = "dense<[1.250000e-01, 2.500000e-01, 3.750000e-01, 5.000000e-01"
    main = ir_text[ir_text.index("func.func public @main") : ir_text.index("func.func private")]
    assert table not in main
    functions = ir_text.split("func.func private @")[1:]
    readers = [f.split("(")[0] for f in functions if table in f]
    assert sorted(readers) == ["stage0_bwd", "stage0_fwd", "stage1_bwd", "stage1_fwd"]


def test_constants_with_in_shardings_partition_and_match_jax_jit():
    """With ``in_shardings``, Shardy turns the constants into ``sdy.constant``s."""
    mesh = toolkit.mpmd_mesh({"stage": NUM_STAGES, "data": 2})
    lowering_mesh = mesh.lowering_mesh()
    params, batch = _inputs()
    param_shardings = [NamedSharding(lowering_mesh, P()) for _ in params]
    batch_shardings = (NamedSharding(lowering_mesh, P(None, "data")),) * 2
    params = jax.device_put(params, param_shardings)
    batch = jax.device_put(batch, batch_shardings)
    step = jax.jit(_step("sharded"), in_shardings=(param_shardings, batch_shardings))
    program = pp.partition(step.lower(params, batch), mesh=mesh, schedule=pp.Std1F1B(2))
    assert "sdy.constant" in program.stage_ir(0)
    toolkit.assert_matches_reference(
        program.compile()(params, batch), step(params, batch), toolkit.SEPARATE_PROGRAMS
    )
