"""The Ray single-controller runtime: a driver (this process) and 2 worker processes.

One cluster for the module (2 workers of 1 CPU device, jax.distributed among them)
runs the multi-process tests' 2-stage training step; the single-process run of the
same plan is the reference (the same stage programs: bit for bit).
"""

from __future__ import annotations

import importlib.util
import pathlib

import jax
import numpy as np
import pytest
import toolkit

pytest.importorskip("ray", reason="the Ray runtime needs ray: pip install -e '.[ray]'")

import jaxpp_mlir as pp  # noqa: E402
from jaxpp_mlir import checkpoint  # noqa: E402

pytestmark = pytest.mark.slow  # a Ray instance and 2 jax.distributed workers start
HERE = pathlib.Path(__file__).parents[1] / "support" / "multiprocess"
spec = importlib.util.spec_from_file_location("jaxpp_ray_model", HERE / "model.py")
model = importlib.util.module_from_spec(spec)
spec.loader.exec_module(model)
NUM_RANKS = 2


@pytest.fixture(scope="module")
def cluster():
    with pp.ray.start(NUM_RANKS, devices_per_worker=1, step_timeout_s=120) as running:
        yield running


@pytest.fixture(scope="module")
def program():
    return model.partition_pipeline(np.array(jax.devices()[:NUM_RANKS]))


@pytest.fixture(scope="module")
def step(cluster, program):
    return cluster.compile(program)


def ray_train(step, params, steps: int = model.STEPS):
    batch = model.make_batch()
    history = []
    for _ in range(steps):
        params, losses = step(params, batch)
        history.append(losses)
    return params, history


def test_pp_ray_is_reachable_and_lazy():
    assert "ray" in pp.__all__
    assert pp.ray.start is pp.ray.cluster.start


def test_steps_match_the_single_process_run_bit_for_bit(step, program):
    _, reference_params, reference_losses = model.train(program)
    params, history = ray_train(step, model.make_params(NUM_RANKS))
    assert all(isinstance(p, pp.ray.RayArray) and not p.fetched for p in params)
    assert all(losses.fetched for losses in history)  # small: came back with the step
    assert [p.worker for p in params] == [0, 1]  # rank r's parameter stays with its worker
    toolkit.assert_same_program(np.stack(history), np.stack(reference_losses))
    toolkit.assert_same_program(step.gather(params), [np.asarray(p) for p in reference_params])


def test_workers_drop_what_the_driver_drops(cluster, step):
    params, history = ray_train(step, model.make_params(NUM_RANKS))
    live = {h.id for h in [*params, *history]}
    held = cluster.wait(cluster.everyone("held"), "listing arrays", 30)
    # The last release travels with the next message: the ids of this call's outputs
    # and at most the previous call's, never the whole history.
    for ids in held:
        assert live <= set(ids) and len(ids) <= 2 * len(live), (ids, live)


def test_checkpoint_written_by_workers_restores_in_either_runtime(cluster, step, tmp_path):
    params, _ = ray_train(step, model.make_params(NUM_RANKS), steps=1)
    expected = step.gather(params)
    path = tmp_path / "ray_ckpt"
    cluster.save(path, {"params": params})
    here = checkpoint.restore(path, {"params": [np.zeros_like(e) for e in expected]})
    toolkit.assert_same_program(here["params"], expected)
    restored = cluster.restore(path, {"params": params})["params"]
    assert [p.worker for p in restored] == [0, 1]
    toolkit.assert_same_program(step.gather(restored), expected)
    after_restore, _ = ray_train(step, restored, steps=1)
    after_original, _ = ray_train(step, params, steps=1)
    toolkit.assert_same_program(step.gather(after_restore), step.gather(after_original))


def test_single_process_checkpoint_restores_on_the_workers(cluster, step, tmp_path):
    params, _ = ray_train(step, model.make_params(NUM_RANKS), steps=1)
    saved = [np.full(p.shape, float(i + 1), p.dtype) for i, p in enumerate(params)]
    checkpoint.save(tmp_path / "here", saved)
    restored = cluster.restore(tmp_path / "here", params)
    toolkit.assert_same_program(step.gather(restored), saved)


def test_a_handle_of_another_cluster_is_refused_before_anything_ships(step):
    class Stranger:
        def release(self, array_id: int) -> None:
            pass

    stranger = pp.ray.RayArray(Stranger(), 0, (model.WIDTH, model.WIDTH), np.float32, 0)
    params = [stranger, *model.make_params(NUM_RANKS)[1:]]
    with pytest.raises(pp.CallError, match="another Ray cluster"):
        step(params, model.make_batch())
