"""What the launcher gives each child process: the command that starts its Python, a free
coordinator port and its environment (coordinator address, process id and count, CPU
device count)."""

from __future__ import annotations

import re
import shlex
import socket
import sys

from jaxpp_mlir.runtime import options

_DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_env(
    base: dict[str, str], process: int, nproc: int, port: int, devices_per_proc: int | None
) -> dict[str, str]:
    """The environment of process ``process``."""
    env = dict(base)
    address = f"127.0.0.1:{port}"
    env["JAX_COORDINATOR_ADDRESS"] = address
    env["JAX_COORDINATOR_BIND_ADDRESS"] = address
    for option, value in ((options.NUM_PROCESSES, nproc), (options.PROCESS_ID, process)):
        env[option.env] = str(value)
        env[option.legacy_env] = str(value)  # for scripts that still read the old name
    env["PYTHONUNBUFFERED"] = "1"
    if devices_per_proc is not None:
        flags = re.sub(rf"{_DEVICE_COUNT_FLAG}=\S+", "", env.get("XLA_FLAGS", "")).split()
        env["XLA_FLAGS"] = " ".join([*flags, f"{_DEVICE_COUNT_FLAG}={devices_per_proc}"])
        env.setdefault("JAX_PLATFORMS", "cpu")
    return env


def python_command() -> list[str]:
    """The command that starts a process's Python: ``JAXPP_MLIR_LAUNCH_PYTHON`` (split as a
    shell would), else this interpreter."""
    command = options.LAUNCH_PYTHON.value()
    return shlex.split(command) if command else [sys.executable]
