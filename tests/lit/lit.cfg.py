"""lit configuration of the jaxpp_mlir FileCheck suite (run: ``lit -v tests/lit``).

Every ``*.mlir`` file under tests/lit is a test, except those in ``inputs/``
folders (files that tests read). RUN lines may use:

- ``jaxpp-opt``: the tool, run as ``<this python> -m jaxpp_mlir.tools.opt`` so
  that no console script needs to be on PATH and the checkout under test is
  the one imported;
- ``%python``: this Python interpreter;
- ``filecheck`` (also spelled ``FileCheck``) and ``not``: from the
  environment's bin directory, put first on PATH.

Scratch files (``%t``) go to tests/lit/Output, which git ignores.
"""

# ruff: noqa: F821 - `config` and `lit_config` are injected by lit

import os
import shlex
import sys

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
