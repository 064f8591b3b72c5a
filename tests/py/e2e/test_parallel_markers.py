"""Markers on independent branches end a stage each, as in NVIDIA JaxPP (issue 35 item 5).

Two towers read the microbatch (a = mark(tanh(w1 @ x)), b = mark(sin(w2 @ x))), a third
stage reads both (c = mark(tanh(w3 @ (a * b)))), a fourth reads c and, over a skip
connection, a. Four markers, four stages, in program order, under every kind of schedule,
with the numbers of jax.jit; a tower whose output carries no gradient (stop_gradient,
a frozen encoder) gets no backward, and the other tower's gradient runs in its own stage.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
import toolkit

import jaxpp_mlir as pp

pytestmark = pytest.mark.numerics

WIDTH, ROWS, MICROBATCHES = 8, 2, 4


def _towers(params, microbatch, *, frozen: bool = False):
    x, y = microbatch
    w1, w2, w3, w4 = params
    a = pp.mark_stage_end(jnp.tanh(x @ w1), "a")
    b = jnp.sin(x @ w2)
    b = pp.mark_stage_end(jax.lax.stop_gradient(b) if frozen else b, "b")
    c = pp.mark_stage_end(jnp.tanh((a * b) @ w3), "c")
    d = pp.mark_stage_end((c + a) @ w4, "d")
    return jnp.mean((d - y) ** 2)


def _step(params, xs, ys, *, frozen: bool = False):
    return pp.treduce(
        lambda mb: jax.value_and_grad(_towers)(params, mb, frozen=frozen),
        (xs, ys),
        operation=(pp.Add, pp.Add),
    )


@pytest.fixture(scope="module")
def inputs():
    params = tuple(toolkit.normal((WIDTH, WIDTH), seed=i, scale=WIDTH**-0.5) for i in range(4))
    xs = toolkit.normal((MICROBATCHES, ROWS, WIDTH), seed=10)
    ys = toolkit.normal((MICROBATCHES, ROWS, WIDTH), seed=11)
    return params, xs, ys


@pytest.mark.parametrize(
    "schedule",
    [pp.Std1F1B(4), pp.ZeroBubble(4), pp.Interleaved1F1B(4, mpmd_dim=2)],
    ids=lambda s: type(s).__name__,
)
def test_independent_markers_end_a_stage_each_and_match_jit(inputs, schedule):
    lowered = jax.jit(_step).lower(*inputs)
    program = pp.partition(lowered, mesh=toolkit.make_mesh(schedule.mpmd_dim), schedule=schedule)
    assert program.num_stages == 4
    summary = program.summary()
    assert all(f"stage {s} ({name})" in summary for s, name in enumerate("abcd"))
    toolkit.assert_matches_reference(
        program.compile()(*inputs), jax.jit(_step)(*inputs), toolkit.SEPARATE_PROGRAMS
    )


def test_merging_them_on_request_gives_three_stages(inputs):
    lowered = jax.jit(_step).lower(*inputs)
    with pytest.warns(pp.PartitionWarning, match="do not depend on each other"):
        program = pp.partition(lowered, mesh=toolkit.make_mesh(3), merge_parallel_markers=True)
    assert program.num_stages == 3


def test_a_frozen_tower_has_no_backward_and_the_other_keeps_its_own(inputs):
    """Only a's marker has a transpose among the two towers': it opens a's backward (stage
    0), where w1's gradient is computed, not b's (stage 1), which has none."""

    def step(params, xs, ys):
        return _step(params, xs, ys, frozen=True)

    program = pp.partition(jax.jit(step).lower(*inputs), mesh=toolkit.make_mesh(4))
    text = program.ir()
    assert "@stage0_bwd" in text and "@stage1_bwd" not in text
    toolkit.assert_matches_reference(
        program.compile()(*inputs), jax.jit(step)(*inputs), toolkit.SEPARATE_PROGRAMS
    )
