"""The machinery both fork servers share (``tests/fork_servers/fork_server.py``, and the
clients' ``fork_client.py``), checked with a server of its own whose children report the
request they got and end as it asks: a child runs in its client's place (streams,
directory, environment), its client gets its exit status (128 + the signal where it was
killed), a malformed request is dropped without harming the server, a client that
leaves takes its child along, and the server stops when its socket goes or when idle."""

from __future__ import annotations

import json
import os
import pathlib
import select
import signal
import socket
import subprocess
import sys
import time

import pytest

FORK_SERVERS = pathlib.Path(__file__).resolve().parents[3] / "tests" / "fork_servers"
START_SECONDS = 120
WAIT_SECONDS = 30

SERVER_SCRIPT = (
    f"import sys\nsys.path.insert(0, {str(FORK_SERVERS)!r})\n"
    + """
import json, os, sys, time
import fork_server

class ReportingServer(fork_server.ForkServer):
    def start_child(self, request, fds):
        fork_server.adopt_client(request, fds)
        action, value = request["argv"]
        report = {"argv": request["argv"], "cwd": os.getcwd(), "pid": os.getpid(),
                  "FORK_TEST": os.environ.get("FORK_TEST")}
        print(json.dumps(report), flush=True)
        if action == "kill":
            os.kill(os.getpid(), int(value))
        if action == "sleep":
            time.sleep(float(value))
        os._exit(int(value) if action == "exit" else 0)

socket_path, idle_timeout = sys.argv[1], float(sys.argv[2])
ReportingServer(fork_server.listen(socket_path), socket_path, idle_timeout).serve()
"""
)

# Loads fork_client the way the clients do under `python -I -S`: from its directory.
CLIENT_SCRIPT = f"""
import sys
sys.path.insert(0, {str(FORK_SERVERS)!r})
import fork_client
client = fork_client.connect(sys.argv[1])
fork_client.send_request(client, {{"argv": sys.argv[2:]}})
reply = b""
while chunk := client.recv(64):
    reply += chunk
sys.stderr.write(reply.decode("ascii"))
"""


def start_server(directory: pathlib.Path, idle_timeout: float) -> tuple[subprocess.Popen, str]:
    socket_path = str(directory / "server.sock")
    command = [sys.executable, "-c", SERVER_SCRIPT, socket_path, str(idle_timeout)]
    server = subprocess.Popen(command, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + START_SECONDS
    while not os.path.exists(socket_path):
        assert server.poll() is None, f"the server exited with {server.returncode}"
        assert time.monotonic() < deadline, "the server did not come up"
        time.sleep(0.05)
    return server, socket_path


@pytest.fixture(scope="module")
def server_socket(tmp_path_factory):
    server, socket_path = start_server(tmp_path_factory.mktemp("fork-server"), 300.0)
    try:
        yield socket_path
    finally:
        if os.path.exists(socket_path):
            os.unlink(socket_path)
        try:
            server.wait(timeout=WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=WAIT_SECONDS)
    assert server.returncode == 0, f"the server exited with {server.returncode}"


def run_client(socket_path: str, argv: list[str], cwd: pathlib.Path, marker: str):
    command = [sys.executable, "-I", "-S", "-c", CLIENT_SCRIPT, socket_path, *argv]
    env = {**os.environ, "FORK_TEST": marker}
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=WAIT_SECONDS
    )


def header_message(argv: list[str], cwd: str, *, length: int | None = None) -> bytes:
    body = json.dumps({"argv": argv, "cwd": cwd, "env": dict(os.environ)}).encode()
    return (len(body) if length is None else length).to_bytes(8, "big") + body


def reply_of(conn: socket.socket) -> bytes:
    conn.settimeout(WAIT_SECONDS)
    reply = b""
    while chunk := conn.recv(64):
        reply += chunk
    return reply


@pytest.mark.parametrize("code", [0, 7])
def test_a_child_runs_in_its_clients_place_and_reports_its_exit_code(server_socket, tmp_path, code):
    done = run_client(server_socket, ["exit", str(code)], tmp_path, f"marker-{code}")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["argv"] == ["exit", str(code)]
    assert report["cwd"] == str(tmp_path)
    assert report["FORK_TEST"] == f"marker-{code}"
    assert done.stderr == str(code)


def test_a_killed_child_reports_128_plus_the_signal(server_socket, tmp_path):
    done = run_client(server_socket, ["kill", str(int(signal.SIGKILL))], tmp_path, "k")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["argv"] == ["kill", str(int(signal.SIGKILL))]
    assert done.stderr == str(128 + signal.SIGKILL)


@pytest.mark.parametrize("fault", ["no descriptors", "too long", "cut short"])
def test_a_malformed_request_is_dropped_and_the_server_serves_on(server_socket, tmp_path, fault):
    message = header_message(["exit", "0"], str(tmp_path))
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(server_socket)
        if fault == "no descriptors":
            conn.sendall(message)
        elif fault == "too long":
            too_long = header_message(["exit", "0"], str(tmp_path), length=1 << 21)
            socket.send_fds(conn, [too_long], [0, 1, 2])
        else:
            socket.send_fds(conn, [message[: len(message) // 2]], [0, 1, 2])
            conn.shutdown(socket.SHUT_WR)
        assert reply_of(conn) == b""  # closed without a child or a status
    done = run_client(server_socket, ["exit", "5"], tmp_path, "after")
    assert (done.returncode, done.stderr) == (0, "5")


def test_a_client_that_leaves_takes_its_child_along(server_socket, tmp_path):
    output_read, output_write = os.pipe()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(server_socket)
            message = header_message(["sleep", "120"], str(tmp_path))
            socket.send_fds(conn, [message], [0, output_write, output_write])
            os.close(output_write)
            output_write = -1
            ready, _, _ = select.select([output_read], [], [], WAIT_SECONDS)
            assert ready, "the child did not start"
            report = json.loads(os.read(output_read, 4096))
            assert report["argv"] == ["sleep", "120"]
        # The connection is closed: the server kills the child, the pipe's last writer.
        ready, _, _ = select.select([output_read], [], [], WAIT_SECONDS)
        assert ready and os.read(output_read, 4096) == b"", f"child {report['pid']} still runs"
    finally:
        os.close(output_read)
        if output_write >= 0:
            os.close(output_write)


def test_an_idle_server_stops_and_removes_its_socket(tmp_path):
    server, socket_path = start_server(tmp_path, idle_timeout=0.5)
    try:
        assert server.wait(timeout=WAIT_SECONDS) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(timeout=WAIT_SECONDS)
    assert not os.path.exists(socket_path)
