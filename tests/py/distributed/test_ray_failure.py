"""Failures of the Ray runtime: a killed or stalled worker ends the driver's step with an
error naming it, within bounds; the driver's exit stops the workers.

Each test ends its cluster, so each starts its own (in the module's one Ray instance).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="the Ray runtime needs ray: pip install -e '.[ray]'")

import jaxpp_mlir as pp  # noqa: E402

pytestmark = pytest.mark.slow  # each test starts 2 jax.distributed workers
WIDTH = 4


def train_step(params, batch):
    def loss(params, mb):
        x = mb
        for w in params:
            x = pp.pipeline_enter_stage(jnp.tanh(x @ w))
        return (x**2).mean()

    losses, grads = pp.treduce(
        lambda mb: jax.value_and_grad(loss)(params, mb), batch, operation=(pp.Add, pp.Add)
    )
    return [p - 0.1 * g for p, g in zip(params, grads, strict=True)], losses


@pytest.fixture(scope="module")
def ray_instance():
    ray.init(address="local", include_dashboard=False, _node_ip_address="127.0.0.1")
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def program():
    params = [np.eye(WIDTH, dtype=np.float32) for _ in range(2)]
    batch = np.ones((4, 2, WIDTH), np.float32)
    lowered = jax.jit(train_step).lower(params, batch)
    mesh = pp.MpmdMesh(jax.sharding.Mesh(np.array(jax.devices()[:2]), ("stage",)), "stage")
    return pp.partition(lowered, mesh=mesh, schedule=pp.Std1F1B(2)), params, batch


def one_step_then(program, ray_instance, harm, step_timeout_s: float):
    """Starts 2 workers, runs a step, harms worker 1's process, runs another step: the
    error and the seconds it took."""
    partitioned, params, batch = program
    cluster = pp.ray.start(2, step_timeout_s=step_timeout_s)
    try:
        step = cluster.compile(partitioned)
        params, _ = step(params, batch)
        victim = cluster.info[1]["pid"]
        harm(victim)
        start = time.monotonic()
        with pytest.raises(pp.ray.WorkerFailure) as failure:
            step(params, batch)
        took = time.monotonic() - start
        with pytest.raises(pp.RuntimeFailure, match="stopped after a failure"):
            step(params, batch)
        return failure.value, took, victim
    finally:
        cluster.shutdown()


def test_a_killed_worker_ends_the_step_naming_it(program, ray_instance):
    error, took, victim = one_step_then(
        program, ray_instance, lambda pid: os.kill(pid, signal.SIGKILL), step_timeout_s=60
    )
    assert error.worker == 1
    assert f"worker 1 (pid {victim}) died" in str(error)
    assert took < 30  # seen when Ray sees the process end, not at the 60 s step timeout


def test_a_stalled_worker_ends_the_step_at_the_timeout_naming_it(program, ray_instance):
    error, took, victim = one_step_then(
        program, ray_instance, lambda pid: os.kill(pid, signal.SIGSTOP), step_timeout_s=3
    )
    assert error.stalled
    assert f"worker 1 (pid {victim}) does not answer (stalled)" in str(error)
    assert "worker 0" not in str(error).split(";", 1)[1]  # worker 0 answers its ping
    assert 3 <= took < 3 + 20  # at the timeout, with room for a loaded 2-core machine


DRIVER = textwrap.dedent(
    """
    import jaxpp_mlir as pp
    cluster = pp.ray.start(2)
    print(" ".join(str(info["pid"]) for info in cluster.info), flush=True)
    import time; time.sleep(600)
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_drivers_exit_stops_the_workers():
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        line = driver.stdout.readline()
        workers = [int(pid) for pid in line.split()]
        assert len(workers) == 2 and all(_alive(pid) for pid in workers), line
    finally:
        driver.kill()
        driver.wait(timeout=30)
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = [pid for pid in workers if _alive(pid)]
    with contextlib.suppress(ProcessLookupError):  # Ray's agents of the driver's session
        os.killpg(driver.pid, signal.SIGKILL)
    for pid in left:  # the test's own children: never left behind
        os.kill(pid, signal.SIGKILL)
    assert not left, f"workers {left} outlived their driver"
