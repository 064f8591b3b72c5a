"""A small step value every rank reads (Adam's count) lives on all of them between steps.

The post-loop code recomputes ``count + 1`` on each rank that reads it; the
step returns those copies as ONE array replicated over the devices of all
those ranks, and the next call takes each rank's own copy without moving it.
``JAXPP_MLIR_REPLICATE_MAX_BYTES=0`` gives the earlier behaviour (the output on
one rank, copied to the others at each call), the baseline measured here.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import toolkit
from jaxpp_mlir.runtime.execution.arguments import place_arguments
from toolkit import make_mesh

import jaxpp_mlir as pp
from jaxpp_mlir import partition_options

# Compares numbers with plain jax.jit or between runs: CI runs it under capped ISAs too.
pytestmark = pytest.mark.numerics

WIDTH = 8
NUM_STAGES = 4
NUM_STEPS = 3
# The Adam update runs as small per-rank programs, so XLA may contract its
# elementwise arithmetic differently from one jitted program: parameters and
# moments can differ from jax.jit by a few float32 ulps (as in test_training_step),
# and so the losses of later steps. Counts, step counters and the first step's
# losses must be identical; against the same program without replication, everything.

OPTIMIZER = optax.adam(1e-2)


def loss_fn(params, microbatch):
    x, y = microbatch
    for w in params:
        x = pp.pipeline_enter_stage(jnp.tanh(x @ w))
    return jnp.mean((x - y) ** 2)


def train_step(state, batch):
    """A TrainState-like step: (params, opt_state, step) -> the next state and the losses."""
    params, opt_state, step = state
    losses, grads = pp.treduce(
        lambda mb: jax.value_and_grad(loss_fn)(params, mb), batch, operation=(pp.Concat(), pp.Add)
    )
    updates, opt_state = OPTIMIZER.update(grads, opt_state, params)
    return (optax.apply_updates(params, updates), opt_state, step + 1), losses


# numpy's generator: jax.random would compile programs (here and in each worker process).
def initial_state():
    rng = np.random.default_rng(0)
    scale = np.float32(1 / np.sqrt(WIDTH))
    params = [
        jnp.asarray(rng.standard_normal((WIDTH, WIDTH), np.float32) * scale)
        for _ in range(NUM_STAGES)
    ]
    return params, OPTIMIZER.init(params), jnp.asarray(np.int32(0))


def make_batch():
    rng = np.random.default_rng(1)
    shape = (4, 2, WIDTH)
    return (
        jnp.asarray(rng.standard_normal(shape, np.float32)),
        jnp.asarray(rng.standard_normal(shape, np.float32)),
    )


SCHEDULES = {
    "std1f1b": (lambda: pp.Std1F1B(NUM_STAGES), NUM_STAGES),
    "interleaved": (lambda: pp.Interleaved1F1B(NUM_STAGES, mpmd_dim=2), 2),
}


def compile_step(schedule: str, max_bytes: int | None) -> pp.CompiledProgram:
    """``train_step`` partitioned and compiled; ``max_bytes`` None: the option's default."""
    make_schedule, num_ranks = SCHEDULES[schedule]
    lowered = jax.jit(train_step).lower(initial_state(), make_batch())
    with pytest.MonkeyPatch.context() as patch:
        if max_bytes is not None:
            patch.setenv(partition_options.REPLICATE_MAX_BYTES.env, str(max_bytes))
        program = pp.partition(lowered, mesh=make_mesh(num_ranks), schedule=make_schedule())
    return program.compile()


@pytest.fixture(scope="module", params=sorted(SCHEDULES))
def schedule(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def steps(schedule):
    """Per schedule: the step with replicated values (default) and without (baseline)."""
    return compile_step(schedule, None), compile_step(schedule, 0)


def run(step, num_steps: int):
    state, batch = initial_state(), make_batch()
    history = []
    for _ in range(num_steps):
        state, losses = step(state, batch)
        history.append(losses)
    return state, history


def count_input(step: pp.CompiledProgram) -> int:
    """The program input holding Adam's count (named by jax's lowering)."""
    (index,) = [i for i, b in enumerate(step.program.plan.inputs) if b.name.endswith(".count")]
    return index


def placement_copies(step: pp.CompiledProgram, state, batch, index: int) -> int:
    """How many ranks' copies of input ``index`` placing these arguments makes: targets
    whose buffer is not one of the argument's own buffers."""
    plan = step.executable
    flat = [*step._flatten_inputs((state, batch), {}), *step._index_arrays]
    env = [None] * plan.dispatch.num_slots
    place_arguments(flat, plan._inputs, env)
    own = {shard.data.unsafe_buffer_pointer() for shard in flat[index].addressable_shards}
    targets = plan._inputs[index].targets
    return sum(env[t.slot].unsafe_buffer_pointer() not in own for t in targets)


def test_count_and_step_match_jax_jit(steps):
    replicated, _ = steps
    state, history = run(replicated, NUM_STEPS)
    want_state, want_history = initial_state(), []
    for _ in range(NUM_STEPS):
        want_state, losses = jax.jit(train_step)(want_state, make_batch())
        want_history.append(losses)
    # The counts are integers: exact. The floats come from other programs than jax.jit's.
    np.testing.assert_array_equal(state[1][0].count, want_state[1][0].count)
    np.testing.assert_array_equal(state[2], want_state[2])
    toolkit.assert_matches_reference(history[0], want_history[0], toolkit.SEPARATE_PROGRAMS)
    toolkit.assert_matches_reference(
        (history, state), (want_history, want_state), toolkit.SEVERAL_STEPS
    )


def test_training_equals_the_one_without_replication(steps):
    replicated, baseline = steps
    state, history = run(replicated, NUM_STEPS)
    base_state, base_history = run(baseline, NUM_STEPS)
    # A replicated step value is computed inside each reader's update program (where XLA
    # may fuse and vectorize it) instead of once and sent: not the same programs.
    toolkit.assert_matches_reference(
        (history, state), (base_history, base_state), toolkit.SEVERAL_STEPS
    )


def test_count_is_one_array_over_every_rank_reading_it(steps):
    replicated, _ = steps
    state, _ = run(replicated, 1)
    count = state[1][0].count
    readers = replicated.program.plan.inputs[count_input(replicated)].ranks
    assert len(readers) > 1
    mesh = replicated.program.mesh
    want_devices = {d for r in readers for d in mesh.rank_devices(r)}
    assert count.sharding.device_set == want_devices
    assert count.sharding.is_fully_replicated
    assert count.sharding.spec == jax.sharding.PartitionSpec()
    assert replicated.placement(count).mpmd_idxs == tuple(readers)


def test_no_copy_of_the_count_from_the_second_call(steps):
    replicated, baseline = steps
    index = count_input(replicated)
    assert count_input(baseline) == index
    readers = baseline.program.plan.inputs[index].ranks
    batch = make_batch()
    base_state, _ = run(baseline, 1)
    # The baseline: the count lives on one reader and is copied to every other one.
    measured = placement_copies(baseline, base_state, batch, index)
    assert measured == len(readers) - 1 > 0
    state, _ = run(replicated, 1)
    assert placement_copies(replicated, state, batch, index) == 0
    state, _ = replicated(state, batch)
    assert placement_copies(replicated, state, batch, index) == 0


def test_a_replicated_input_is_accepted_by_a_program_that_reads_it_on_fewer_ranks(steps):
    """An array over more devices than a rank's is cut to each reader's devices, not copied."""
    replicated, _ = steps
    state, _ = run(replicated, 1)
    step = state[2]  # read on one rank only
    everywhere = jax.device_put(step, state[1][0].count.sharding)
    again, _ = replicated((state[0], state[1], everywhere), make_batch())
    np.testing.assert_array_equal(again[2], np.asarray(step) + 1)


def test_donated_state_with_a_replicated_count():
    """The donated count's copies are each rank's own buffers: donating them is safe."""
    lowered = jax.jit(train_step, donate_argnums=0).lower(initial_state(), make_batch())
    program = pp.partition(lowered, mesh=make_mesh(NUM_STAGES), schedule=pp.Std1F1B(NUM_STAGES))
    step = program.compile()
    state, want = initial_state(), initial_state()
    for _ in range(NUM_STEPS):
        previous_count = state[1][0].count
        state, _ = step(state, make_batch())
        want, _ = jax.jit(train_step)(want, make_batch())
        assert previous_count.is_deleted()
    assert len(state[1][0].count.sharding.device_set) == NUM_STAGES
    np.testing.assert_array_equal(state[1][0].count, want[1][0].count)
    toolkit.assert_matches_reference(state, want, toolkit.SEVERAL_STEPS)


@pytest.mark.slow
def test_two_processes_keep_the_count_right(python_server):
    """Several processes keep the earlier behaviour (the count on its first rank,
    forwarded between processes at each call) and the same numbers."""
    worker = (
        pathlib.Path(__file__).parents[1]
        / "support"
        / "multiprocess"
        / "replicated_count_worker.py"
    )
    limits = {"JAXPP_MLIR_SETUP_TIMEOUT": "60", "JAXPP_MLIR_TRANSFER_TIMEOUT": "60"}
    result = toolkit.launch_two_processes(str(worker), python_server, limits)
    for process in range(2):
        assert f"replicated count ok (process {process})" in result.stdout


@pytest.mark.slow
def test_benchmark_runs_and_checks_its_numbers(python_server):
    script = pathlib.Path(__file__).parents[3] / "benchmarks" / "replicated_step_values.py"
    result = subprocess.run(
        [*python_server.command, str(script), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **python_server.env},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads(result.stdout.strip().splitlines()[-1])
    assert record["count_copies"]["replicated"] == 0
    assert record["count_copies"]["baseline"] > 0
    assert record["count_matches_jit"]
    # Different stage programs (the count returned on every rank, or copied from rank 0),
    # after 12 Adam steps.
    assert record["max_ulps_replicated_from_baseline"] <= toolkit.SEVERAL_STEPS.ulps


def test_count_over_ranks_of_two_devices_each():
    """Ranks with a submesh of 2 devices: the count is replicated over all 4 devices,
    a NamedSharding over the submeshes stacked along the mpmd axis."""
    mesh = pp.MpmdMesh(
        jax.sharding.Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("stage", "model")), "stage"
    )
    columns = jax.sharding.NamedSharding(
        mesh.lowering_mesh(), jax.sharding.PartitionSpec(None, "model")
    )
    state, batch = initial_state(), make_batch()
    step_shardings = (([columns] * NUM_STAGES, None, None), None)
    lowered = jax.jit(train_step, in_shardings=step_shardings).lower(state, batch)
    program = pp.partition(lowered, mesh=mesh, schedule=pp.Interleaved1F1B(NUM_STAGES, mpmd_dim=2))
    step = program.compile()
    want = state
    for _ in range(NUM_STEPS):
        state, _ = step(state, batch)
        want, _ = jax.jit(train_step)(want, batch)
    count = state[1][0].count
    np.testing.assert_array_equal(count, want[1][0].count)
    assert count.sharding.mesh.devices.shape == mesh.jax_mesh.devices.shape
    assert count.sharding.device_set == set(mesh.jax_mesh.devices.flat)
    assert count.sharding.spec == jax.sharding.PartitionSpec()
