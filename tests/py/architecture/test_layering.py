"""The runtime stands alone: importing all of it loads no compiler module."""

import json
import subprocess
import sys

import pytest

import jaxpp_mlir

# Everything under jaxpp_mlir that is compiler side: the runtime must load none.
COMPILER_PREFIXES = (
    "jaxpp_mlir.passes",
    "jaxpp_mlir.plan_builder",
    "jaxpp_mlir.frontend",
    "jaxpp_mlir.partition",
    "jaxpp_mlir.program",
    "jaxpp_mlir.dialect",
    "jaxpp_mlir.schedules",
    "jaxpp_mlir.tools",
    "jaxpp_mlir.ir",
    "jaxpp_mlir.plan.",
    "jaxpp_mlir.planner",
    "jaxpp_mlir.distributed",
    "jaxpp_mlir.checkpoint",
    "jaxpp_mlir.mesh",
    "jaxpp_mlir.launch",
)

_LOAD_ALL_OF_RUNTIME = """
import importlib, json, pkgutil, sys
import jaxpp_mlir.runtime as runtime
for info in pkgutil.walk_packages(runtime.__path__, "jaxpp_mlir.runtime."):
    importlib.import_module(info.name)
for name in runtime.__all__:
    getattr(runtime, name)
print(json.dumps(sorted(m for m in sys.modules if m.startswith("jaxpp_mlir"))))
"""


# Then the compiler, in the same process: the check must see its modules.
_THEN_THE_COMPILER = """
import jaxpp_mlir.partition
print(json.dumps(sorted(m for m in sys.modules if m.startswith("jaxpp_mlir"))))
"""


def _modules_loaded_by(code: str) -> list[list[str]]:
    """The module lists ``code`` prints, one JSON line each, in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("[")]


def _compiler_modules(loaded: list[str]) -> list[str]:
    return [m for m in loaded if m.startswith(COMPILER_PREFIXES)]


@pytest.fixture(scope="module")
def runtime_then_compiler() -> tuple[list[str], list[str]]:
    """The modules loaded by all of the runtime, then also by the compiler."""
    runtime, both = _modules_loaded_by(_LOAD_ALL_OF_RUNTIME + _THEN_THE_COMPILER)
    return runtime, both


def test_runtime_loads_no_compiler_module(runtime_then_compiler):
    loaded, _ = runtime_then_compiler
    assert "jaxpp_mlir.runtime.execution.executor" in loaded
    assert _compiler_modules(loaded) == []


def test_reading_a_plan_loads_neither_executor_nor_xla():
    (loaded,) = _modules_loaded_by(
        "import json, sys\n"
        "from jaxpp_mlir.runtime.plan import ExecutionPlan\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('jaxpp_mlir', 'jax')))))"
    )
    assert "jaxpp_mlir.runtime.plan" in loaded
    assert "jaxpp_mlir.runtime.execution.executor" not in loaded
    assert "jax" not in loaded and "jaxlib" not in loaded


def test_the_check_sees_a_compiler_module_when_one_loads(runtime_then_compiler):
    _, loaded = runtime_then_compiler
    assert "jaxpp_mlir.passes.pipeline" in _compiler_modules(loaded)


def test_package_names_load_lazily_and_are_listed():
    assert sorted(jaxpp_mlir.__all__) == jaxpp_mlir.__all__
    # dir() shows the public API only: no helper imports (sys, types, Any, annotations)
    # and no submodule bound by an import.
    assert dir(jaxpp_mlir) == jaxpp_mlir.__all__
    assert dir(jaxpp_mlir.runtime) == jaxpp_mlir.runtime.__all__
    from jaxpp_mlir.partition import partition
    from jaxpp_mlir.schedules import GPipe

    assert jaxpp_mlir.partition is partition
    assert jaxpp_mlir.GPipe is GPipe
    for name in jaxpp_mlir.__all__:
        assert getattr(jaxpp_mlir, name) is not None


def test_errors_share_one_base_and_runtime_errors_are_re_exported():
    from jaxpp_mlir.runtime import errors as runtime_errors

    from jaxpp_mlir import errors

    assert errors.PlanError is runtime_errors.PlanError
    assert issubclass(errors.PlanError, errors.ScheduleError)
    for name in ("CallError", "RuntimeFailure", "MeshError", "MarkerError", "PartitionError"):
        assert issubclass(getattr(errors, name), errors.JaxppError)
