"""treduce's loop body stages one call of the traced microbatch function (where jax can,
``_jax_compat.staged_call``) instead of replaying its equations: the step computes the
same numbers under ``jax.jit`` and partitions into the same program."""

from __future__ import annotations

import jax
import numpy as np
from toolkit import make_mesh, mlp_batch, mlp_params, mlp_train_step

import jaxpp_mlir as pp
from jaxpp_mlir import _jax_compat
from jaxpp_mlir.frontend import treduce as treduce_module

NUM_STAGES = 4


def _lower(monkeypatch, staged: bool) -> jax.stages.Lowered:
    if not staged:
        monkeypatch.setattr(treduce_module, "staged_call", _jax_compat.jaxpr_as_fun)
    params, batch = mlp_params(NUM_STAGES), mlp_batch(num_microbatches=4)
    # A fresh function each time: jax.jit's cache would return the other's trace.
    return jax.jit(lambda p, b: mlp_train_step(p, b)).lower(params, batch)


def test_staged_and_replayed_bodies_partition_into_the_same_program(monkeypatch):
    mesh, schedule = make_mesh(NUM_STAGES), pp.Std1F1B(NUM_STAGES)
    staged = pp.partition(_lower(monkeypatch, True), mesh=mesh, schedule=schedule)
    replayed = pp.partition(_lower(monkeypatch, False), mesh=mesh, schedule=schedule)
    assert staged.ir() == replayed.ir()


def test_staged_and_replayed_bodies_compute_the_same_step(monkeypatch):
    params, batch = mlp_params(NUM_STAGES), mlp_batch(num_microbatches=4)
    staged = _lower(monkeypatch, True).compile()(params, batch)
    replayed = _lower(monkeypatch, False).compile()(params, batch)
    # JAX inlines the staged call when lowering: both sides compile the same program, so
    # the numbers are equal bit for bit.
    for a, b in zip(jax.tree.leaves(staged), jax.tree.leaves(replayed), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
