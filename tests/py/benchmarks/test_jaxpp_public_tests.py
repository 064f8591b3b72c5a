"""benchmarks/jaxpp_public_tests.py and its aliases, without JaxPP: CI has no network, so
JaxPP's own tests are a documented command (RESULTS.md); here a stand-in checkout of test
files of our own goes through the same runner, and the adapters run a step of our own."""

import json
import subprocess
import sys
from functools import partial
from pathlib import Path

import jax
import jax.extend.core as jcore
import jax.numpy as jnp
import numerics
import pytest
import toolkit

import jaxpp_mlir.jaxpp as jaxpp_api

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


@pytest.fixture
def aliases():
    module = toolkit.load_benchmark("jaxpp_test_aliases")
    finder = module.install(internals=True)
    yield module
    module.uninstall(finder)


def test_jaxpp_modules_are_jaxpp_mlir_names(aliases):
    import jaxpp.api
    import jaxpp.schedules
    from jaxpp.mesh import MpmdMesh

    assert jaxpp.schedules.Eager1F1B is jaxpp_api.Eager1F1B
    assert jaxpp.api.treduce is jaxpp_api.treduce
    assert issubclass(MpmdMesh, jaxpp_api.MpmdMesh) and MpmdMesh.mesh_stack == []
    with pytest.raises(ModuleNotFoundError, match="jaxpp.utils is JaxPP-internal"):
        import jaxpp.utils  # noqa: F401


def _two_branch_loss(params, microbatch):
    x, y = microbatch
    left = jaxpp_api.mark_stage_end(jnp.tanh(x @ params[0]))
    right = jaxpp_api.mark_stage_end(jnp.sin(x @ params[1]))
    out = jaxpp_api.mark_stage_end((left * right) @ params[2])
    return jnp.sum((out - y) ** 2)


def _step(params, xs, ys):
    loss, grads = jaxpp_api.treduce(
        partial(jax.value_and_grad(_two_branch_loss), params),
        (xs, ys),
        schedule=jaxpp_api.Eager1F1B(num_stages=3),
    )
    return loss, [p - 0.1 * g for p, g in zip(params, grads, strict=True)]


@pytest.mark.numerics
def test_scheduled_jaxpr_runs_the_pipelined_step(aliases):
    params = [toolkit.normal((4, 4), seed=i, scale=0.5) for i in range(3)]
    xs, ys = toolkit.normal((5, 2, 4), seed=3), toolkit.normal((5, 2, 4), seed=4)
    cjaxpr = jax.jit(_step).trace(params, xs, ys).jaxpr
    assert any(eqn.primitive is aliases.dax_pscan_p for eqn in cjaxpr.eqns)

    pending, _, _ = aliases.wrap_into_tasks(cjaxpr, used_invars=(True,) * 5, mpmd_dim=3)
    scheduled = aliases.maybe_unroll_loop(aliases.strip_inspect_sharding_eqns(pending))

    assert [eqn.primitive.name for eqn in scheduled.eqns] == ["jaxpp_mlir_pipelined_step"]
    (compiled,) = {eqn.params["compiled"] for eqn in scheduled.eqns}
    assert compiled.program.num_stages == 3  # one stage per marker, the branches apart
    flat = jax.tree.leaves((params, xs, ys))
    numerics.assert_matches_reference(
        jcore.jaxpr_as_fun(scheduled)(*flat),
        jax.tree.leaves(jax.jit(_step)(params, xs, ys)),
        numerics.SEPARATE_PROGRAMS,
    )


_STAND_IN_TESTS = """
import jaxpp
from jaxpp.schedules import Std1F1B


def test_uses_a_schedule():
    assert len(Std1F1B(num_stages=2).tasks(4)) == 2


def test_fails():
    assert jaxpp.treduce is None
"""


@pytest.mark.slow
def test_runner_counts_a_stand_in_checkout(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_stand_in.py").write_text(_STAND_IN_TESTS)
    (tmp_path / "tests" / "test_internal.py").write_text("from jaxpp import utils\n")
    report = tmp_path / "outcomes.json"
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "jaxpp_public_tests.py"), "--jaxpp", str(tmp_path)]
        + ["--json", str(report)],
        capture_output=True,
        text=True,
        timeout=300,
        env=toolkit.subprocess_env(),
    )
    assert done.returncode == 0, done.stderr
    outcomes = {
        nodeid: test["outcome"]
        for result in json.loads(report.read_text())
        for nodeid, test in result["tests"].items()
    }
    assert outcomes == {
        "tests/test_internal.py": "error",
        "tests/test_stand_in.py::test_uses_a_schedule": "passed",
        "tests/test_stand_in.py::test_fails": "failed",
    }
    assert "total" in done.stdout and "cannot import name 'utils'" in done.stdout
