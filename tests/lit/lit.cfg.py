"""lit configuration of the jaxpp_mlir FileCheck suite (run: ``lit -v tests/lit``).

Every ``*.mlir`` file under tests/lit is a test, except those in ``inputs/``
folders (files that tests read). RUN lines may use:

- ``jaxpp-opt``: the tool, run as ``<this python> -m jaxpp_mlir.tools.opt`` so
  that no console script needs to be on PATH and the checkout under test is
  the one imported; by default through a fork server that imports jax once
  for the whole suite (``tests/fork_servers/opt_server.py``; the RUN lines call
  the stdlib-only ``opt_client.py``, which falls back to the plain tool when
  the server is not there). ``JAXPP_OPT_FORK_SERVER=0`` runs the plain tool;
- ``%python``: this Python interpreter;
- ``%inputs``: the folder of captured jax lowerings for the installed jax;
- ``%jaxchecks``: FileCheck prefixes CHECK plus JAX010 or JAX011 (the installed jax's);
- ``filecheck`` (also spelled ``FileCheck``): FileCheck (the ``filecheck``
  package) through the same fork server (a fresh Python that imports it costs
  more than most checks), or ``<this python> -m filecheck`` without the server;
  ``not``: lit's internal shell builtin.

Scratch files (``%t``) go to tests/lit/Output, which git ignores.
"""

# ruff: noqa: F821 - `config` and `lit_config` are injected by lit

import atexit
import os
import shlex
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version

import lit.formats

config.name = "jaxpp_mlir"
config.test_format = lit.formats.ShTest()  # the internal shell; execute_external=True raises
config.suffixes = [".mlir"]
config.excludes = ["inputs", "Output", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(os.path.abspath(__file__))
config.test_exec_root = os.path.join(config.test_source_root, "Output")

_repo_root = os.path.dirname(os.path.dirname(config.test_source_root))
_python = shlex.quote(sys.executable)

# Substitutions are regular expressions applied in order, before lit's own (%s, %t...).
# `jaxpp-opt` is replaced only as a word of its own, never inside a path or a longer name.
_tool = f"{_python} -m jaxpp_mlir.tools.opt"
_TOOL_PATTERN = r"(?<![\w/.-])jaxpp-opt(?![\w.-])"
_filecheck = f"{_python} -m filecheck"
_FILECHECK_PATTERN = r"(?<![\w/.-])filecheck(?![\w.-])"
config.substitutions.append((r"(?<![\w/.-])FileCheck(?![\w.-])", "filecheck"))
config.substitutions.append(("%python", _python))

# Captured jax lowerings: inputs/ holds jax 0.10's; a newer minor release whose lowering
# differs has its own inputs/jax-<minor>/ (written by regenerate_inputs.py).
_inputs = os.path.join(config.test_source_root, "inputs")
_jax_minor = ".".join(version("jax").split(".")[:2])
if os.path.isdir(os.path.join(_inputs, f"jax-{_jax_minor}")):
    _inputs = os.path.join(_inputs, f"jax-{_jax_minor}")
config.substitutions.append(("%inputs", _inputs))
# FileCheck prefixes for lines that hold on some jax versions only: JAX010 (0.10.x) or
# JAX011 (0.11 and newer: tanh's derivative comes out of the forward pass as one
# residual, so forward tasks return one value fewer and backward tasks take other ones).
_lowering = "JAX010" if _jax_minor == "0.10" else "JAX011"
config.substitutions.append(("%jaxchecks", f"--check-prefixes=CHECK,{_lowering}"))

_bin_dir = os.path.dirname(sys.executable)
config.environment["PATH"] = os.pathsep.join([_bin_dir, config.environment.get("PATH", "")])
config.environment["PYTHONPATH"] = os.pathsep.join(
    p for p in [_repo_root, os.environ.get("PYTHONPATH", "")] if p
)
# The tool only parses and transforms IR: keep jax on the CPU and quiet.
config.environment["JAX_PLATFORMS"] = "cpu"
config.environment["TF_CPP_MIN_LOG_LEVEL"] = "3"
for _name in ("HOME", "TMPDIR", "XLA_FLAGS"):
    if _name in os.environ:
        config.environment[_name] = os.environ[_name]


def _start_fork_server() -> str | None:
    """Starts ``tests/fork_servers/opt_server.py`` for this lit run; the RUN lines' command.

    None (run the plain tool) when disabled or when the server does not come up.
    The server exits with lit: its socket is removed at exit, and it watches its parent.
    """
    if os.environ.get("JAXPP_OPT_FORK_SERVER", "1") == "0":
        return None
    socket_dir = tempfile.mkdtemp(prefix="jaxpp-opt-")
    socket_path = os.path.join(socket_dir, "server.sock")
    env = dict(os.environ, **config.environment)
    server = subprocess.Popen(
        [
            sys.executable,
            os.path.join(_repo_root, "tests", "fork_servers", "opt_server.py"),
            socket_path,
        ],
        env=env,
        stdin=subprocess.DEVNULL,
    )

    def stop() -> None:
        if os.path.exists(socket_path):
            os.unlink(socket_path)
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
        if not os.listdir(socket_dir):
            os.rmdir(socket_dir)

    atexit.register(stop)
    deadline = time.monotonic() + _SERVER_START_SECONDS
    while not os.path.exists(socket_path):
        if server.poll() is not None or time.monotonic() > deadline:
            lit_config.warning("jaxpp-opt fork server did not start; running the plain tool")
            return None
        time.sleep(0.05)
    config.environment["JAXPP_OPT_SERVER"] = socket_path
    client = os.path.join(_repo_root, "tests", "fork_servers", "opt_client.py")
    return f"{_python} -I -S {shlex.quote(client)}"  # stdlib only: no site, no .pth files


_SERVER_START_SECONDS = 120
_client = _start_fork_server()
config.substitutions.insert(0, (_TOOL_PATTERN, _client or _tool))
# FileCheck as a module of this interpreter (through the server where it runs): a console
# script may be a shim that costs more than FileCheck itself (pyenv's runs bash and pyenv
# first), and lit runs it ~100 times.
config.substitutions.append(
    (_FILECHECK_PATTERN, f"{_client} --tool=filecheck" if _client else _filecheck)
)
