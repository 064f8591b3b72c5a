"""jaxpp-opt and partition() agree: the default pipeline gives the same IR either way.

For every module captured in tests/lit/inputs/ (regenerate them with
tests/lit/regenerate_inputs.py), running ``default_pipeline_text`` through the
``jaxpp-opt`` command line must print exactly ``partition(...).ir()``, so that
what the lit tests check is what users get.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from collections.abc import Iterator

import pytest
import toolkit

import jaxpp_mlir as pp
from jaxpp_mlir.passes.pipelines import default_pipeline_text

LIT_DIR = pathlib.Path(__file__).resolve().parents[2] / "lit"
INPUTS_DIR = LIT_DIR / "inputs"
INPUTS = sorted(INPUTS_DIR.glob("*.mlir"))
E2E_TESTS = sorted((LIT_DIR / "e2e").glob("*.mlir"))
MPMD_DIM = 3
OPT_CLIENT = (
    pathlib.Path(__file__).resolve().parents[3] / "tests" / "fork_servers" / "opt_client.py"
)


def test_captured_inputs_exist():
    names = {path.name for path in INPUTS}
    assert {"mlp_value_and_grad.mlir", "mlp_forward.mlir", "nested_jit.mlir"} <= names


@pytest.mark.parametrize("path", E2E_TESTS, ids=[path.stem for path in E2E_TESTS])
def test_e2e_lit_tests_run_the_default_pipeline(path: pathlib.Path):
    """The e2e lit tests spell the pipeline out: it must be what partition() runs."""
    expected = f"--pass-pipeline='{default_pipeline_text(mpmd_dim=MPMD_DIM)}'"
    run_lines = [line for line in path.read_text().splitlines() if line.startswith("// RUN:")]
    assert run_lines, f"{path.name} has no RUN line"
    for line in run_lines:
        assert expected in line, (
            f"{path.name} does not run default_pipeline_text(mpmd_dim={MPMD_DIM}); "
            f"update its RUN line to {expected}"
        )


def pipeline_for(path: pathlib.Path, mesh: pp.MpmdMesh) -> str:
    """What partition(path, mesh=mesh) runs, as jaxpp-opt pipeline text."""
    return default_pipeline_text(
        mpmd_dim=mesh.mpmd_dim,
        mpmd_axis=mesh.mpmd_axis_name,
        submesh_size=len(mesh.rank_devices(0)),
        sharded="sdy.mesh" in path.read_text(),
    )


@pytest.fixture(scope="module")
def opt_server(tmp_path_factory) -> Iterator[str]:
    """The socket of a ``jaxpp-opt`` fork server (``opt_server.py``), as the lit suite
    runs the tool: the captures share one process's jax import instead of one each."""
    with toolkit.running_opt_server(str(tmp_path_factory.mktemp("opt-server"))) as socket_path:
        yield socket_path


def run_jaxpp_opt(path: pathlib.Path, pipeline: str, server_socket: str) -> str:
    """``jaxpp-opt PATH --pass-pipeline=PIPELINE`` through the fork server's client."""
    command = [sys.executable, "-I", str(OPT_CLIENT), str(path), f"--pass-pipeline={pipeline}"]
    env = dict(os.environ, JAXPP_OPT_SERVER=server_socket)
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("path", INPUTS, ids=[path.stem for path in INPUTS])
def test_jaxpp_opt_matches_partition(path: pathlib.Path, opt_server: str):
    mesh = toolkit.lit_input_mesh(path, MPMD_DIM)
    from_tool = run_jaxpp_opt(path, pipeline_for(path, mesh), opt_server)
    from_api = pp.partition(path.read_text(), mesh=mesh).ir()
    assert from_tool.strip() == from_api.strip()
    assert '"jaxpp.task"' in from_tool
