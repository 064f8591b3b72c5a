"""The Python fork server (``tests/fork_servers/python_server.py``) and its client run a
script, ``-m`` module or ``-c`` code as the plain interpreter does (same output, exit
code, traceback), end as their child ended (exit code or signal), forward signals, lose
no child when the client is killed, and fall back to the plain interpreter where jax's
import-time configuration would differ."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import toolkit

from jaxpp_mlir.distributed import child_setup

SCRIPT = textwrap.dedent(
    """
    import atexit, os, sys
    atexit.register(lambda: print("atexit ran", flush=True))
    print("argv", sys.argv)
    print("path0", sys.path[0], "cwd", os.getcwd())
    print("name", __name__, "file", globals().get("__file__"))
    print("env", os.environ.get("PROBE"), "stdin", sys.stdin.read().strip())
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "exit":
        sys.exit(7)
    if mode == "raise":
        raise RuntimeError("the script broke")
    if mode == "kill":
        sys.stdout.flush()
        os.kill(os.getpid(), 9)
    if mode == "jax":
        import jax
        print("devices", len(jax.devices()), "platforms", jax.config.jax_platforms)
        print("x64", jax.config.jax_enable_x64)
    """
)


@pytest.fixture(scope="module")
def server(python_server, tmp_path_factory) -> dict[str, str]:
    """The environment that sends the client's runs to a fork server: the session's (see
    conftest.py), or one of this module where the session runs without it."""
    if "JAXPP_PYTHON_SERVER" in python_server.env:
        yield {"JAXPP_PYTHON_SERVER": python_server.env["JAXPP_PYTHON_SERVER"]}
        return
    with toolkit.running_python_server(str(tmp_path_factory.mktemp("server"))) as socket_path:
        yield {"JAXPP_PYTHON_SERVER": socket_path}


def _run(python: list[str], args: list[str], env: dict[str, str], cwd, **kwargs):
    return subprocess.run(
        [*python, *args],
        input="from stdin\n",
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, "PROBE": "probe value", **env},
        **kwargs,
    )


CLIENT = [sys.executable, "-I", "-S", toolkit.PYTHON_CLIENT]


@pytest.mark.parametrize("mode", ["ok", "exit", "raise", "kill"])
@pytest.mark.parametrize("form", ["script", "-c"])
def test_runs_as_the_plain_interpreter(server, tmp_path, form, mode):
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    args = [str(script), mode] if form == "script" else ["-c", SCRIPT, mode]
    plain = _run([sys.executable], args, {}, tmp_path)
    served = _run(CLIENT, args, server, tmp_path)
    assert (served.returncode, served.stdout, served.stderr) == (
        plain.returncode,
        plain.stdout,
        plain.stderr,
    )
    assert plain.returncode == {"ok": 0, "exit": 7, "raise": 1, "kill": -signal.SIGKILL}[mode]
    if mode == "raise":
        assert plain.stderr.startswith("Traceback") and "the script broke" in plain.stderr


def test_module_runs_as_with_dash_m(server, tmp_path):
    args = ["-m", "jaxpp_mlir.launch", "--nproc", "0", "job.py"]
    plain = _run([sys.executable], args, {}, tmp_path)
    served = _run(CLIENT, args, server, tmp_path)
    assert plain.returncode == 2 and "--nproc" in plain.stderr
    assert (served.returncode, served.stdout, served.stderr) == (
        plain.returncode,
        plain.stdout,
        plain.stderr,
    )


def test_jax_options_read_at_import_are_the_requests(server, tmp_path):
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)

    def run(env: dict[str, str]) -> subprocess.CompletedProcess:
        return _run(CLIENT, [str(script), "jax"], {**server, **env}, tmp_path)

    flags = {"XLA_FLAGS": "--xla_force_host_platform_device_count=3", "JAX_PLATFORMS": "cpu"}
    served = run(flags)
    assert served.returncode == 0, served.stderr
    assert "devices 3 platforms cpu" in served.stdout
    assert "x64 False" in served.stdout
    refused = run({**flags, "JAX_ENABLE_X64": "1"})  # read when jax is imported
    assert refused.returncode == 0, refused.stderr
    assert "devices 3 platforms cpu" in refused.stdout
    assert "x64 True" in refused.stdout


def test_served_and_refused_runs_are_other_and_same_processes(server, tmp_path):
    script = tmp_path / "pid.py"
    script.write_text("import os\nprint(os.getpid())\n")

    def pid_seen(env: dict[str, str]) -> tuple[int, int]:
        client = subprocess.Popen(
            [*CLIENT, str(script)],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, **server, **env},
        )
        out, _ = client.communicate(timeout=120)
        assert client.returncode == 0
        return int(out), client.pid

    seen, client = pid_seen({})
    assert seen != client  # a forked child of the server
    seen, client = pid_seen({"JAX_ENABLE_X64": "1"})
    assert seen == client  # the client replaced itself with the plain interpreter


def _wait_gone(pid: int, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False


def _sleeper(server, tmp_path, code: str = "") -> tuple[subprocess.Popen, int]:
    script = tmp_path / "sleeper.py"
    script.write_text(f"import os, time\n{code}\nprint(os.getpid(), flush=True)\ntime.sleep(120)\n")
    client = subprocess.Popen(
        [*CLIENT, str(script)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **server},
    )
    ready, _, _ = select.select([client.stdout], [], [], 60.0)
    if not ready:
        client.kill()
        client.wait(timeout=30)
        raise AssertionError("the sleeper printed no pid within 60 s")
    return client, int(client.stdout.readline())


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_client_reaches_the_child(server, tmp_path, sig):
    client, child = _sleeper(server, tmp_path)
    client.send_signal(sig)
    assert client.wait(timeout=30) == -sig  # the child died of it, and so did the client
    assert _wait_gone(child)
    client.stdout.close()


def test_a_killed_client_takes_its_child_along(server, tmp_path):
    client, child = _sleeper(server, tmp_path)
    client.kill()
    assert client.wait(timeout=30) == -signal.SIGKILL
    assert _wait_gone(child), f"child {child} still runs after its client was killed"
    client.stdout.close()


@pytest.mark.parametrize("unbuffered", [True, False])
def test_pythonunbuffered_is_honoured(server, tmp_path, unbuffered):
    script = tmp_path / "partial.py"
    script.write_text("import sys, time\nsys.stdout.write('partial line')\ntime.sleep(120)\n")
    env = {**os.environ, **server}
    env.pop("PYTHONUNBUFFERED", None)
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    client = subprocess.Popen([*CLIENT, str(script)], stdout=subprocess.PIPE, env=env)
    try:
        ready, _, _ = select.select([client.stdout], [], [], 30.0 if unbuffered else 1.0)
        assert bool(ready) == unbuffered
    finally:
        client.kill()
        client.wait(timeout=30)
        client.stdout.close()


def test_the_launcher_starts_its_processes_with_the_named_command(server, tmp_path):
    script = tmp_path / "job.py"
    script.write_text(
        "import os, sys\n"
        "print('process', os.environ['JAXPP_MLIR_PROCESS_ID'], 'pid', os.getpid(), flush=True)\n"
        "sys.exit(3 if os.environ['JAXPP_MLIR_PROCESS_ID'] == '1' else 0)\n"
    )
    env = {**os.environ, **server, "JAXPP_MLIR_LAUNCH_PYTHON": " ".join(CLIENT)}
    result = subprocess.run(
        [sys.executable, "-m", "jaxpp_mlir.launch", "--nproc", "2", "--grace", "5", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert result.returncode == 3, result.stderr
    children = {int(p) for p in re.findall(r"\(pid (\d+)\)", result.stderr)}
    printed = {int(p) for p in re.findall(r"pid (\d+)", result.stdout)}
    assert len(children) == len(printed) == 2
    assert not children & printed  # the processes are the server's children, not the clients
    assert "process 1 (pid" in result.stderr and "failed first: exited with code 3" in result.stderr


def test_python_command_defaults_to_this_interpreter(monkeypatch):
    monkeypatch.delenv("JAXPP_MLIR_LAUNCH_PYTHON", raising=False)
    assert child_setup.python_command() == [sys.executable]
    monkeypatch.setenv("JAXPP_MLIR_LAUNCH_PYTHON", "/bin/env 'a b' python3")
    assert child_setup.python_command() == ["/bin/env", "a b", "python3"]
