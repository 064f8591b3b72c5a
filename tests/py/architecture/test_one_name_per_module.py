"""One name per module: every import of a jaxpp_mlir module in the repository names a
module that exists under that path, and the names modules had before they moved are gone."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
SCANNED = ("jaxpp_mlir", "runtime", "tests", "benchmarks", "examples")

# Names that modules had before they moved; each must fail to import.
REMOVED_MODULES = (
    "jaxpp_mlir.passes.ir_utils",
    "jaxpp_mlir.compat.jaxpp",
    "jaxpp_mlir.distributed.launch",
    "jaxpp_mlir.runtime.compile",
    "jaxpp_mlir.runtime.executor",
    "jaxpp_mlir.runtime.placement",
    "jaxpp_mlir.runtime.distributed",
    "jaxpp_mlir.runtime.collectives",
    "jaxpp_mlir.runtime.watchdog",
    "jaxpp_mlir.runtime.trace",
    "jaxpp_mlir.runtime.memory",
    "jaxpp_mlir.host_heap",
)


def _python_files() -> list[pathlib.Path]:
    files = []
    for top in SCANNED:
        files.extend(p for p in (ROOT / top).rglob("*.py") if "Output" not in p.parts)
    return files


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def _top_level_names(module: str) -> set[str]:
    """The names a module's source binds at its top level (no import needed)."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None
    tree = ast.parse(pathlib.Path(spec.origin).read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value)  # lazy exports listed by name (PEP 562 tables)
    return names


def _jaxpp_imports(path: pathlib.Path) -> list[tuple[int, str, str | None]]:
    """(line, module, imported name or None) for every jaxpp_mlir import in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.extend(
                (node.lineno, a.name, None) for a in node.names if a.name.startswith("jaxpp_mlir")
            )
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("jaxpp_mlir"):
            found.extend((node.lineno, node.module, a.name) for a in node.names)
    return found


def test_every_import_names_a_module_where_it_lives():
    wrong = []
    names_of: dict[str, set[str]] = {}
    for path in _python_files():
        for line, module, name in _jaxpp_imports(path):
            where = f"{path.relative_to(ROOT)}:{line}"
            if not _is_module(module):
                wrong.append(f"{where}: no module {module}")
            elif name is not None and name != "*" and not _is_module(f"{module}.{name}"):
                if name not in names_of.setdefault(module, _top_level_names(module)):
                    wrong.append(f"{where}: {module} has no {name}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("name", REMOVED_MODULES)
def test_old_module_names_are_gone(name):
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(name)


def test_the_runtime_serves_no_module_by_an_old_name():
    import jaxpp_mlir.runtime as runtime

    assert not hasattr(runtime, "MOVED_MODULES")
    for old in ("compile", "executor", "watchdog", "trace", "collectives"):
        assert old not in dir(runtime)
