"""Whole training steps: optimizer after the loop, state kept on its stage's devices."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import toolkit
from jaxpp_mlir.runtime.instructions import receive
from toolkit import make_mesh

import jaxpp_mlir as pp

# Compares numbers with plain jax.jit or between runs: CI runs it under capped ISAs too.
pytestmark = pytest.mark.numerics

WIDTH = 8
NUM_STAGES = 4

# The optimizer's update runs in small per-rank programs instead of one fused
# program, and XLA may contract or reorder its elementwise arithmetic
# (divisions by the bias corrections, the square root) differently there: a
# few float32 ulps, far below 1e-5 relative.


shared_stage_compiles = toolkit.stage_compiles_shared_by_file()


def make_params(num_stages: int = NUM_STAGES):
    return {
        "w": toolkit.mlp_params(num_stages, WIDTH, seed=0),
        "b": [toolkit.on_device(np.zeros(WIDTH, np.float32)) for _ in range(num_stages)],
    }


def make_batch(num_microbatches: int = 4):
    return toolkit.mlp_batch(num_microbatches, 2, WIDTH, seed=1)


def loss_fn(params, microbatch):
    x, y = microbatch
    for w, b in zip(params["w"], params["b"], strict=True):
        x = pp.pipeline_enter_stage(jnp.tanh(x @ w + b))
    return jnp.mean((x - y) ** 2)


OPTIMIZER = optax.adam(1e-2)


def adam_step(params, opt_state, batch):
    losses, grads = pp.treduce(
        lambda mb: jax.value_and_grad(loss_fn)(params, mb), batch, operation=(pp.Concat(), pp.Add)
    )
    updates, opt_state = OPTIMIZER.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, jnp.mean(losses)


@pytest.fixture(scope="module")
def adam_program():
    params, batch = make_params(), make_batch()
    opt_state = OPTIMIZER.init(params)
    lowered = jax.jit(adam_step).lower(params, opt_state, batch)
    return pp.partition(lowered, mesh=make_mesh(NUM_STAGES))


def test_five_adam_steps_match_jax_jit(adam_program):
    params, batch = make_params(), make_batch()
    compiled = adam_program.compile()
    ours = theirs = (params, OPTIMIZER.init(params))
    for _ in range(5):
        *ours, loss = compiled(*ours, batch)
        *theirs, reference_loss = jax.jit(adam_step)(*theirs, batch)
        toolkit.assert_matches_reference(loss, reference_loss, toolkit.SEVERAL_STEPS)
    toolkit.assert_matches_reference(ours, theirs, toolkit.SEVERAL_STEPS)


def test_parameters_and_optimizer_state_stay_on_their_stage(adam_program):
    params, batch = make_params(), make_batch()
    new_params, opt_state, _ = adam_program.compile()(params, OPTIMIZER.init(params), batch)
    devices = jax.devices()
    adam_state = opt_state[0]
    for stage in range(NUM_STAGES):
        expected = {devices[stage]}
        for tree in (new_params, adam_state.mu, adam_state.nu):
            assert tree["w"][stage].devices() == expected
            assert tree["b"][stage].devices() == expected


def test_outputs_fed_back_are_not_copied_through_the_host(adam_program):
    params, batch = make_params(), make_batch()
    compiled = adam_program.compile()
    state = compiled(params, OPTIMIZER.init(params), jax.device_put(batch, jax.devices()[0]))
    with jax.transfer_guard_host_to_device("disallow"):
        jax.block_until_ready(compiled(*state[:2], jax.device_put(batch, jax.devices()[0])))


def _lr_from_loss_step(params, batch):
    losses, grads = pp.treduce(
        lambda mb: jax.value_and_grad(loss_fn)(params, mb), batch, operation=(pp.Concat(), pp.Add)
    )
    lr = 0.1 / (1.0 + jnp.mean(losses))  # a scalar computed on the last rank
    return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), jnp.mean(losses)


def _clipped_adamw_step(params, opt_state, batch):
    losses, grads = pp.treduce(
        lambda mb: jax.value_and_grad(loss_fn)(params, mb), batch, operation=(pp.Concat(), pp.Add)
    )
    updates, opt_state = CLIPPED_ADAMW.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, jnp.mean(losses)


CLIPPED_ADAMW = optax.chain(optax.clip_by_global_norm(0.05), optax.adamw(1e-2))


@pytest.mark.parametrize("step_kind", ["lr_from_loss", "clipped_adamw"])
def test_updates_with_cross_rank_scalars_stay_on_their_stage(step_kind):
    """A global scalar (a gradient norm over every stage, a learning rate from the loss)
    is sent to each rank; parameters and optimizer state do not move."""
    params, batch = make_params(), make_batch()
    if step_kind == "lr_from_loss":
        step, state = _lr_from_loss_step, (params,)
    else:
        step, state = _clipped_adamw_step, (params, CLIPPED_ADAMW.init(params))
    program = pp.partition(jax.jit(step).lower(*state, batch), mesh=make_mesh(NUM_STAGES))
    compiled = program.compile()
    ours = theirs = state
    for _ in range(3):
        *ours, loss = compiled(*ours, batch)
        *theirs, reference_loss = jax.jit(step)(*theirs, batch)
        toolkit.assert_matches_reference(loss, reference_loss, toolkit.SEVERAL_STEPS)
    # Clipping rescales every gradient; near-zero Adam moments then differ by a few ulps
    # of their own size: the tolerance is in ulps of each leaf's largest magnitude.
    toolkit.assert_matches_reference(ours, theirs, toolkit.SEVERAL_STEPS)
    devices = jax.devices()
    for tree in (ours[0], *([ours[1][1][0].mu, ours[1][1][0].nu] if len(ours) > 1 else [])):
        for stage in range(NUM_STAGES):
            assert tree["w"][stage].devices() == {devices[stage]}
            assert tree["b"][stage].devices() == {devices[stage]}


def test_tied_weights_across_two_stages():
    embed, w = toolkit.mlp_params(2, WIDTH, seed=2)
    params = {"embed": embed, "w": w}
    batch = make_batch(4)

    def loss(params, microbatch):
        x, y = microbatch
        h = pp.pipeline_enter_stage(jnp.tanh(x @ params["embed"]))
        h = pp.pipeline_enter_stage(jnp.tanh(h @ params["w"]))
        out = pp.pipeline_enter_stage(h @ params["embed"].T)  # the same weight, stage 2
        return jnp.mean((out - y) ** 2)

    def step(params, batch):
        losses, grads = pp.treduce(
            lambda mb: jax.value_and_grad(loss)(params, mb), batch, operation=(pp.Concat(), pp.Add)
        )
        new_params = jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)
        return new_params, grads, losses

    program = pp.partition(jax.jit(step).lower(params, batch), mesh=make_mesh(3))
    # One accumulator per stage that uses the weight, summed once after the loop: the
    # only weight-sized transfer is stage 2's partial sum, sent to rank 0 once.
    weight_moves = [
        inst
        for inst in program.plan.instructions
        if inst.kind == receive.KIND and inst.spec.shape == (WIDTH, WIDTH)
    ]
    assert [(inst.peer, inst.rank) for inst in weight_moves] == [(2, 0)]
    new_params, grads, losses = program.compile()(params, batch)
    expected = jax.jit(step)(params, batch)
    # jax.jit adds the two stages' contributions to the tied weight's gradient per
    # microbatch and accumulates the sums; the pipeline accumulates each stage's
    # contributions and adds the two sums once: another rounding, a few ulps.
    toolkit.assert_matches_reference(
        (new_params, grads, losses), expected, toolkit.SEPARATE_PROGRAMS
    )
    assert new_params["embed"].devices() == {jax.devices()[0]}


def test_argument_only_contraction_before_the_loop_runs_once():
    """A costly value computed from parameters alone and read by two stages is sent, not
    recomputed; cheap ones (the bf16 cast of each weight) run where they are read."""
    width = 64  # 4096 elements: above the size below which any op is recomputed
    params = toolkit.mlp_params(3, width, seed=3)
    xs = toolkit.normal((4, 2, width), seed=4)

    def step(params, xs):
        mixed = params[0] @ params[1]  # read by both stages

        def loss(x):
            h = pp.pipeline_enter_stage(jnp.tanh(x @ mixed))
            h = pp.pipeline_enter_stage(jnp.tanh(h @ params[2].astype(jnp.bfloat16)) @ mixed)
            return jnp.mean(h**2)

        return pp.treduce(lambda x: jax.value_and_grad(loss)(x), xs, operation=(pp.Add, pp.Add))

    lowered = jax.jit(step).lower(params, xs)
    program = pp.partition(lowered, mesh=make_mesh(2))
    dots_in = lowered.as_text().count("stablehlo.dot_general")
    dots_out = sum(text.count("stablehlo.dot_general") for text in program.stage_modules.values())
    assert dots_out == dots_in
    result = program.compile()(params, xs)
    expected = jax.jit(step)(params, xs)
    toolkit.assert_matches_reference(result, expected, toolkit.SEPARATE_PROGRAMS)


def test_donated_input_cannot_be_used_again():
    params, batch = make_params(2), make_batch()

    def sgd_step(params, batch):
        losses, grads = pp.treduce(
            lambda mb: jax.value_and_grad(loss_fn)(params, mb),
            batch,
            operation=(pp.Concat(), pp.Add),
        )
        return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), losses

    lowered = jax.jit(sgd_step, donate_argnums=(0,)).lower(params, batch)
    program = pp.partition(lowered, mesh=make_mesh(2))
    assert program.donated_inputs == frozenset(range(4))
    compiled = program.compile()
    placed = jax.tree_util.tree_map(
        lambda p, d: jax.device_put(p, d),
        params,
        {"w": list(jax.devices()[:2]), "b": list(jax.devices()[:2])},
    )
    expected = jax.jit(sgd_step)(params, batch)
    new_params, _ = compiled(placed, batch)
    toolkit.assert_matches_reference(new_params, expected[0], toolkit.SEPARATE_PROGRAMS)
    assert all(leaf.is_deleted() for leaf in jax.tree_util.tree_leaves(placed))
    with pytest.raises(pp.CallError, match="deleted \\(or donated\\)"):
        compiled(placed, batch)
    again, _ = compiled(new_params, batch)  # the outputs are fresh arrays
    jax.block_until_ready(again)


def test_donated_input_returned_unchanged_stays_alive():
    params, batch = make_params(2), make_batch()
    frozen = jnp.arange(WIDTH, dtype=jnp.float32)

    def step(params, frozen, batch):
        losses, grads = pp.treduce(
            lambda mb: jax.value_and_grad(loss_fn)(params, mb),
            batch,
            operation=(pp.Concat(), pp.Add),
        )
        return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), frozen, losses

    lowered = jax.jit(step, donate_argnums=(0, 1)).lower(params, frozen, batch)
    compiled = pp.partition(lowered, mesh=make_mesh(2)).compile()
    donated_frozen = jnp.arange(WIDTH, dtype=jnp.float32)
    _, returned, _ = compiled(params, donated_frozen, batch)
    assert not returned.is_deleted()  # as jax.jit: the output is the donated buffer, alive
    np.testing.assert_array_equal(np.asarray(returned), np.asarray(frozen))


def sgd_program(schedule, num_microbatches):
    params, batch = make_params(), make_batch(num_microbatches)

    def step(params, batch):
        losses, grads = pp.treduce(
            lambda mb: jax.value_and_grad(loss_fn)(params, mb),
            batch,
            operation=(pp.Concat(), pp.Add),
        )
        return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), losses

    return pp.partition(
        jax.jit(step).lower(params, batch), mesh=make_mesh(NUM_STAGES), schedule=schedule
    )


def test_peak_bytes_gpipe_above_1f1b_and_1f1b_flat_in_microbatches():
    gpipe = sgd_program(pp.GPipe(NUM_STAGES), 8).peak_bytes_per_rank()
    one_f_one_b = sgd_program(pp.Std1F1B(NUM_STAGES), 8).peak_bytes_per_rank()
    one_f_one_b_16 = sgd_program(pp.Std1F1B(NUM_STAGES), 16).peak_bytes_per_rank()
    assert gpipe[0] > one_f_one_b[0]
    assert all(g >= o for g, o in zip(gpipe, one_f_one_b, strict=True))
    assert one_f_one_b[1:3] == one_f_one_b_16[1:3]  # ranks holding no batch input
    batch_bytes = 2 * 2 * WIDTH * 4  # the whole batch grows with the microbatch count
    growth = [b - a for a, b in zip(one_f_one_b, one_f_one_b_16, strict=True)]
    assert all(g <= 8 * batch_bytes for g in growth), growth
