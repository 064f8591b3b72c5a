"""Packages by audience: what is installed, how big the flat folders may grow, and that
every package on disk is listed in pyproject.toml."""

import ast
import pathlib
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[3]
INSTALLED = {"jaxpp_mlir": ROOT / "jaxpp_mlir", "jaxpp_mlir.runtime": ROOT / "runtime"}
MAX_RUNTIME_TOP_MODULES = 15
MAX_TOP_TEST_FILES = 15
FORK_CALLS = {"fork", "forkpty"}


def _installed_modules() -> list[pathlib.Path]:
    return sorted(p for folder in INSTALLED.values() for p in folder.rglob("*.py"))


def test_runtime_keeps_at_most_15_modules_at_its_top_level():
    top = sorted(p.name for p in (ROOT / "runtime").glob("*.py"))
    assert len(top) <= MAX_RUNTIME_TOP_MODULES, top


def test_tests_py_keeps_at_most_15_test_files_at_its_top_level():
    top = sorted(p.name for p in (ROOT / "tests" / "py").glob("test_*.py"))
    assert len(top) <= MAX_TOP_TEST_FILES, top


def forks(source: str) -> list[int]:
    """The lines of ``source`` that call ``os.fork``/``os.forkpty`` (a fork server)."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in FORK_CALLS
    ]


def test_the_check_finds_a_fork():
    assert forks("import os\npid = os.fork()\n") == [2]
    assert forks((ROOT / "tests" / "fork_servers" / "fork_server.py").read_text())


def test_no_fork_server_is_installed():
    found = {
        str(path.relative_to(ROOT)): lines
        for path in _installed_modules()
        if (lines := forks(path.read_text()))
    }
    assert found == {}, "test infrastructure belongs in tests/fork_servers/"


def _packages_on_disk() -> set[str]:
    found = set()
    for name, folder in INSTALLED.items():
        for init in folder.rglob("__init__.py"):
            parts = init.parent.relative_to(folder).parts
            found.add(".".join((name, *parts)))
    return found


def test_pyproject_lists_every_package():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert sorted(config["packages"]) == sorted(_packages_on_disk())
    assert config["package-dir"] == {name: folder.name for name, folder in INSTALLED.items()}
