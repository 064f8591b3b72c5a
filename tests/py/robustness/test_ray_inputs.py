"""Hostile use of the Ray runtime (issue 37): a cluster used after ``shutdown()`` says it
stopped, on every kind of use; a typed PRNG key output comes back as a key. (Ray's
arguments, refused before anything starts, are cases of ``entry_point_cases.py``.)

One cluster of 2 workers for the module: the key test runs on it, the last test shuts it
down and uses it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("ray", reason="the Ray runtime needs ray: pip install -e '.[ray]'")

import jaxpp_mlir as pp  # noqa: E402

pytestmark = pytest.mark.slow  # a Ray instance and 2 jax.distributed workers start
WIDTH = 4
STOPPED = "the Ray cluster stopped: it was shut down (cluster.shutdown(), or the end of its"


def train_step(params, batch, key):
    def loss(params, microbatch):
        x = microbatch
        for w in params:
            x = pp.pipeline_enter_stage(jnp.tanh(x @ w))
        return (x**2).mean()

    key, noise = jax.random.split(key)
    scale = jax.random.uniform(noise)
    losses, grads = pp.treduce(
        lambda mb: jax.value_and_grad(loss)(params, mb * scale), batch, operation=(pp.Add, pp.Add)
    )
    return [p - 0.1 * g for p, g in zip(params, grads, strict=True)], losses, key


@pytest.fixture(scope="module")
def inputs():
    params = [np.eye(WIDTH, dtype=np.float32) for _ in range(2)]
    return params, np.ones((4, 2, WIDTH), np.float32), jax.random.key(11)


@pytest.fixture(scope="module")
def program(inputs):
    mesh = pp.MpmdMesh(jax.sharding.Mesh(np.array(jax.devices()[:2]), ("stage",)), "stage")
    lowered = jax.jit(train_step).lower(*inputs)
    return pp.partition(lowered, mesh=mesh, schedule=pp.Std1F1B(2))


@pytest.fixture(scope="module")
def cluster():
    running = pp.ray.start(2, step_timeout_s=120)
    yield running
    running.shutdown()


@pytest.fixture(scope="module")
def step(cluster, program):
    return cluster.compile(program)


def test_a_key_output_comes_back_as_a_key(step, program, inputs, tmp_path):
    params, batch, key = inputs
    here = program.compile()
    _, _, expected = here(params, batch, key)
    new_params, _, got = step(params, batch, key)
    assert got.is_key and got.key_shape == () and got.key_impl == "threefry2x32", got
    with pytest.raises(pp.CallError, match="holds typed PRNG keys, which numpy cannot hold"):
        np.asarray(got)
    gathered = step.gather({"key": got})["key"]
    assert jax.dtypes.issubdtype(gathered.dtype, jax.dtypes.prng_key), gathered
    np.testing.assert_array_equal(jax.random.key_data(gathered), jax.random.key_data(expected))
    jax.random.split(gathered)  # usable as a key
    # Passed back to a step, saved and restored by the workers: still the same key.
    _, _, again = step(new_params, batch, got)
    reference_params, _, _ = here(params, batch, key)
    _, _, expected_again = here(reference_params, batch, expected)
    np.testing.assert_array_equal(
        jax.random.key_data(step.gather(again)), jax.random.key_data(expected_again)
    )
    step.cluster.save(tmp_path / "keys", {"key": again})
    restored = step.cluster.restore(tmp_path / "keys", {"key": again})["key"]
    assert restored.is_key, restored
    np.testing.assert_array_equal(
        jax.random.key_data(step.gather(restored)), jax.random.key_data(expected_again)
    )
    on_driver = pp.checkpoint.restore(tmp_path / "keys", {"key": expected_again})["key"]
    np.testing.assert_array_equal(
        jax.random.key_data(on_driver), jax.random.key_data(expected_again)
    )


def test_every_use_of_a_shut_down_cluster_says_it_stopped(cluster, step, program, inputs):
    params, batch, key = inputs
    outputs = step(params, batch, key)
    held = outputs[0][0]
    assert not held.fetched  # a parameter stays on its worker
    cluster.shutdown()
    uses = {
        "an array": lambda: np.asarray(held),
        "gather": lambda: step.gather(outputs),
        "a step": lambda: step(*outputs[:1], batch, key),
        "compile": lambda: cluster.compile(program),
        "save": lambda: cluster.save("/nonexistent/ckpt", outputs[0]),
    }
    for what, use in uses.items():
        with pytest.raises(pp.RuntimeFailure) as stopped:
            use()
        assert str(stopped.value).startswith(STOPPED), (what, str(stopped.value))
