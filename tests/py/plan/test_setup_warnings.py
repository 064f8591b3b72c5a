"""partition warns (PartitionWarning) on set-ups that leave part of the machine idle."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import pytest
import toolkit

import jaxpp_mlir as pp
from jaxpp_mlir import setup_advice

WIDTH = 16  # matmuls dominate the stages' cost, as in a real model


def _params(widths: tuple[int, ...]) -> list:
    """One ``widths[s] x widths[s + 1]`` weight per stage (toolkit's MLP, a layer a stage)."""
    return [
        toolkit.normal((m, n), seed=s, scale=m**-0.5)
        for s, (m, n) in enumerate(zip(widths[:-1], widths[1:], strict=True))
    ]


def _setup_warnings(widths, num_microbatches, num_ranks) -> list[str]:
    batch = toolkit.mlp_batch(num_microbatches, 2, WIDTH)
    lowered = toolkit.lower_cached(toolkit.mlp_train_step, _params(widths), batch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pp.partition(lowered, mesh=toolkit.make_mesh(num_ranks))
    found = [w for w in caught if issubclass(w.category, pp.PartitionWarning)]
    for w in found:
        assert w.filename == __file__, "the warning points at the partition(...) call"
    return [str(w.message) for w in found]


def test_balanced_setup_is_silent():
    assert _setup_warnings((WIDTH,) * 4, num_microbatches=4, num_ranks=3) == []


def test_fewer_microbatches_than_stages():
    (message,) = _setup_warnings((WIDTH,) * 5, num_microbatches=2, num_ranks=4)
    assert message.startswith("2 microbatches for 4 stages: at most 2 of the 4 stages work")
    assert "use at least 4 microbatches" in message


def test_ranks_without_a_stage():
    (message,) = _setup_warnings((WIDTH,) * 3, num_microbatches=4, num_ranks=4)
    assert message.startswith("ranks [2, 3] of the mesh's 4 run no stage")


def test_uneven_stages():
    (message,) = _setup_warnings((WIDTH, 64, 64, WIDTH), num_microbatches=4, num_ranks=3)
    assert message.startswith("stage 1 costs about ")
    ratio = float(message.split("about ")[1].split("x")[0])
    # 3 matmuls of 2x64x64 (forward, input and weight gradients) against 2 of 2x16x64 (stage
    # 0 needs no input gradient): 6x, less the tanh and loss elementwise ops.
    assert 5.0 < ratio < 6.0


def test_switched_off_by_the_option(monkeypatch):
    monkeypatch.setenv("JAXPP_MLIR_SETUP_WARNINGS", "0")
    assert _setup_warnings((WIDTH,) * 5, num_microbatches=2, num_ranks=4) == []


def test_silenced_by_a_warnings_filter():
    lowered = toolkit.lower_cached(
        toolkit.mlp_train_step, _params((WIDTH,) * 3), toolkit.mlp_batch(4, 2, WIDTH)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=pp.PartitionWarning)
        pp.partition(lowered, mesh=toolkit.make_mesh(4))


def test_flop_estimate_of_a_matmul():
    text = jax.jit(lambda a, b: a @ b).lower(jnp.ones((2, 3)), jnp.ones((3, 5))).as_text()
    assert setup_advice.estimate_flops(text) == pytest.approx(2 * 2 * 3 * 5)
