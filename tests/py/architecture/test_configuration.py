"""Configuration is data: the passes and the plan builder read no environment.

What ``partition()`` once read from the environment reaches the passes as pass
options (``passes/pipelines.py``) from a ``PartitionOptions``; only
``PartitionOptions.from_env`` reads the variables.
"""

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[3] / "jaxpp_mlir"
NO_ENVIRONMENT = ("passes", "plan")
OPTIONS_MODULE = "jaxpp_mlir.runtime.options"
# The compiler's options module: its PartitionOptions is data; its environment options
# (DUMP_DIR, FUSE_TASKS...) read the environment.
COMPILER_OPTIONS_MODULE = "jaxpp_mlir.partition_options"
DATA = f"{COMPILER_OPTIONS_MODULE}.PartitionOptions"


def environment_reads(source: str) -> list[str]:
    """``line: what`` for each read of the environment, or of the options that read it."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb"):
            found.append(f"{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Name) and node.id in ("environ", "getenv"):
            found.append(f"{node.lineno}: {node.id}")
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = {f"{node.module}.{alias.name}" for alias in node.names}
            if node.module == "os" and names & {"os.environ", "os.getenv", "os.environb"}:
                found.append(f"{node.lineno}: from os import ...")
            if node.module == OPTIONS_MODULE or OPTIONS_MODULE in names:
                found.append(f"{node.lineno}: imports {OPTIONS_MODULE}")
            if COMPILER_OPTIONS_MODULE in names or (
                node.module == COMPILER_OPTIONS_MODULE and names != {DATA}
            ):
                found.append(f"{node.lineno}: imports {COMPILER_OPTIONS_MODULE}'s environment")
        elif isinstance(node, ast.Import):
            for module in (OPTIONS_MODULE, COMPILER_OPTIONS_MODULE):
                if any(alias.name == module for alias in node.names):
                    found.append(f"{node.lineno}: imports {module}")
    return found


def _modules() -> list[pathlib.Path]:
    return [p for folder in NO_ENVIRONMENT for p in sorted((PACKAGE / folder).rglob("*.py"))]


def test_the_walk_sees_the_packages():
    names = {p.relative_to(PACKAGE).as_posix() for p in _modules()}
    assert {"passes/outline_outer_code.py", "plan/builder.py", "plan/stage_modules.py"} <= names


@pytest.mark.parametrize(
    "source",
    [
        "import os\nx = os.environ.get('JAXPP_MLIR_X')",
        "import os\nx = os.getenv('JAXPP_MLIR_X')",
        "from os import environ\nx = environ['JAXPP_MLIR_X']",
        "from jaxpp_mlir.runtime import options\nx = options.FUSE_TASKS.value()",
        "from jaxpp_mlir.runtime.options import FUSE_TASKS",
        "from jaxpp_mlir import partition_options\nx = partition_options.FUSE_TASKS.value()",
        "from jaxpp_mlir.partition_options import FUSE_TASKS, PartitionOptions",
    ],
)
def test_the_check_finds_an_environment_read(source):
    assert environment_reads(source)


def test_the_options_as_data_are_no_environment_read():
    assert environment_reads("from jaxpp_mlir.partition_options import PartitionOptions") == []


def test_passes_and_plan_read_no_environment():
    readers = {
        path.relative_to(PACKAGE).as_posix(): found
        for path in _modules()
        if (found := environment_reads(path.read_text()))
    }
    assert readers == {}, "read the setting from a pass option or PartitionOptions instead"
