"""lit configuration of the jaxpp_mlir FileCheck suite (run: ``lit -v tests/lit``).

Every ``*.mlir`` file under tests/lit is a test, except those in ``inputs/``
folders (files that tests read). RUN lines may use:

- ``jaxpp-opt``: the tool, run as ``<this python> -m jaxpp_mlir.tools.opt`` so
  that no console script needs to be on PATH and the checkout under test is
  the one imported;
- ``%python``: this Python interpreter;
- ``%inputs``: the folder of captured jax lowerings for the installed jax;
- ``%jaxchecks``: FileCheck prefixes CHECK plus JAX010 or JAX011 (the installed jax's);
- ``filecheck`` (also spelled ``FileCheck``) and ``not``: from the
  environment's bin directory, put first on PATH.

Scratch files (``%t``) go to tests/lit/Output, which git ignores.
"""

# ruff: noqa: F821 - `config` and `lit_config` are injected by lit

import os
import shlex
import sys
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
config.substitutions.append((r"(?<![\w/.-])jaxpp-opt(?![\w.-])", _tool))
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
