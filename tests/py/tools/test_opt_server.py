"""The jaxpp-opt fork server the lit suite uses: a run through it is a run of the plain tool."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest
import toolkit

REPO = pathlib.Path(__file__).resolve().parents[3]
CLIENT = REPO / "tests" / "fork_servers" / "opt_client.py"
INPUT = REPO / "tests" / "lit" / "inputs" / "mlp_forward.mlir"
PIPELINE = "builtin.module(jaxpp-inline-calls,jaxpp-normalize-loop,jaxpp-assign-segments)"
START_SECONDS = 120
RUN_SECONDS = 120


@pytest.fixture(scope="module")
def server_socket(tmp_path_factory):
    with toolkit.running_opt_server(
        str(tmp_path_factory.mktemp("opt-server")), start_seconds=START_SECONDS
    ) as socket_path:
        yield socket_path


def run_client(args: list[str], socket_path: str | None, stdin: bytes = b""):
    env = {k: v for k, v in os.environ.items() if k != "JAXPP_OPT_SERVER"}
    if socket_path is not None:
        env["JAXPP_OPT_SERVER"] = socket_path
    command = [sys.executable, "-I", "-S", str(CLIENT), *args]  # as lit.cfg.py runs it
    return subprocess.run(command, input=stdin, capture_output=True, env=env, timeout=RUN_SECONDS)


def run_plain_tool(args: list[str], stdin: bytes = b""):
    command = [sys.executable, "-m", "jaxpp_mlir.tools.opt", *args]
    return subprocess.run(command, input=stdin, capture_output=True, timeout=RUN_SECONDS)


def assert_same_run(actual, expected):
    assert actual.returncode == expected.returncode, actual.stderr.decode()
    assert actual.stdout == expected.stdout
    assert actual.stderr == expected.stderr


def test_a_pipeline_on_stdin_gives_the_plain_tools_output(server_socket):
    args = ["--pass-pipeline", PIPELINE, "-"]
    text = INPUT.read_bytes()
    through_server = run_client(args, server_socket, stdin=text)
    assert through_server.returncode == 0, through_server.stderr.decode()
    assert b"jaxpp.segment" in through_server.stdout
    assert_same_run(through_server, run_plain_tool(args, stdin=text))


def test_a_failing_run_gives_the_plain_tools_status_and_error(server_socket, tmp_path):
    missing = str(tmp_path / "missing.mlir")
    through_server = run_client([missing], server_socket)
    assert through_server.returncode == 1
    assert b"cannot read" in through_server.stderr
    assert_same_run(through_server, run_plain_tool([missing]))


def test_the_client_runs_the_plain_tool_without_a_server(tmp_path):
    args = ["--pass-pipeline", PIPELINE, str(INPUT)]
    without_server = run_client(args, str(tmp_path / "no-server.sock"))
    assert without_server.returncode == 0, without_server.stderr.decode()
    assert_same_run(without_server, run_plain_tool(args))


# FileCheck through the server: lit's `filecheck` RUN-line command.
CHECKS = "// CHECK: jaxpp.stage\n// CHECK-NOT: no-such-op\n"


def run_plain_filecheck(args: list[str], stdin: bytes):
    command = [sys.executable, "-m", "filecheck", *args]
    return subprocess.run(command, input=stdin, capture_output=True, timeout=RUN_SECONDS)


@pytest.mark.parametrize("matches", [True, False], ids=["match", "mismatch"])
@pytest.mark.parametrize("served", [True, False], ids=["server", "no-server"])
def test_filecheck_through_the_client_is_the_plain_filecheck(
    server_socket, tmp_path, matches, served
):
    checks = tmp_path / "checks.mlir"
    checks.write_text(CHECKS)
    text = b"%0 = jaxpp.stage\n" if matches else b"%0 = no-such-op\n"
    socket_path = server_socket if served else str(tmp_path / "no-server.sock")
    through_client = run_client(["--tool=filecheck", str(checks)], socket_path, stdin=text)
    assert through_client.returncode == (0 if matches else 1), through_client.stderr.decode()
    if not matches:
        assert b"no-such-op" in through_client.stderr
    assert_same_run(through_client, run_plain_filecheck([str(checks)], text))


def test_an_unknown_tool_is_refused_by_name(server_socket):
    refused = run_client(["--tool=no-such-tool", "x"], server_socket)
    assert refused.returncode == 2
    assert b"unknown tool 'no-such-tool'" in refused.stderr
