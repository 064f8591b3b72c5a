"""The tiers of the code, and what each may import (read from every import statement).

- The runtime (``runtime/``, installed as ``jaxpp_mlir.runtime``) executes a plan and
  imports no other tier.
- Its clients, ``distributed``, ``checkpoint``, ``ray`` and ``compat`` (with the modules
  that only serve them: ``launch``, the launcher's command; ``jaxpp``, JaxPP's names;
  ``trace``, the trace command), import the runtime, each other and the public API:
  the modules ``jaxpp_mlir/__init__.py`` re-exports from, and ``placement`` (what
  ``program.placement()`` returns). Never the compiler's insides.
- The compiler (``passes``, ``dialect``, ``planner``, ``schedules``, ``plan``,
  ``frontend``, ``partition``, ``program``, ``tools`` and their helpers) imports the
  runtime, never a client. Inside it, the stages of the compiler never import the
  driver (``partition`` and the modules it alone uses) nor what is built from their
  result; the dialect imports only the JAX adapter; schedules are plain data, without
  MLIR (of the dialect, only its vocabulary of plain strings).
"""

from __future__ import annotations

import ast
import pathlib

import pytest

import jaxpp_mlir

ROOT = pathlib.Path(__file__).resolve().parents[3]
RUNTIME = "runtime"
CLIENTS = {"distributed", "checkpoint", "ray", "compat", "launch", "jaxpp", "trace"}
COMPILER_STAGES = {"passes", "dialect", "planner", "schedules", "plan", "frontend", "ir"}
DRIVER = {"partition", "pipeline_run", "step_input", "program", "setup_advice", "tools"}
PUBLIC = {"jaxpp_mlir", "jaxpp_mlir.placement", *jaxpp_mlir._SOURCES.values()}
# What each compiler package may import of jaxpp_mlir besides itself and the runtime.
ONLY = {
    "dialect": {"jaxpp_mlir._jax_compat"},
    "schedules": {"jaxpp_mlir.dialect.vocabulary", "jaxpp_mlir.errors"},
}


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[0] == RUNTIME:
        parts = ["jaxpp_mlir", *parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    parts = name.split(".")[1:]
    if parts[:1] == [RUNTIME]:
        base = ROOT / RUNTIME
        parts = parts[1:]
    else:
        base = ROOT / "jaxpp_mlir"
    path = base.joinpath(*parts)
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imported(source: str) -> list[tuple[int, str]]:
    """``(line, module)`` of every ``jaxpp_mlir`` module ``source`` imports, anywhere."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("jaxpp_mlir")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if not node.module.startswith("jaxpp_mlir"):
                continue
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                found.append((node.lineno, name if _is_module(name) else node.module))
    return found


def unit(module: str) -> str:
    """The tier unit of a module: ``runtime``, or its top-level name under jaxpp_mlir."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "jaxpp_mlir"


def violations(module: str, source: str) -> list[str]:
    """What ``source`` (the text of ``module``) imports against the rules of the tiers."""
    own, wrong = unit(module), []
    for line, target in imported(source):
        other = unit(target)
        if other == own:
            continue
        where = f"{module}:{line} imports {target}"
        if own == RUNTIME:
            wrong.append(f"{where}: the runtime imports no other tier")
        elif own in CLIENTS:
            if other != RUNTIME and other not in CLIENTS and target not in PUBLIC:
                wrong.append(f"{where}: a client imports the runtime and the public API only")
        elif other in CLIENTS:
            wrong.append(f"{where}: the compiler imports no client of the runtime")
        elif other == RUNTIME:
            continue
        elif own in COMPILER_STAGES and other in DRIVER:
            wrong.append(f"{where}: a compiler stage never imports the driver")
        elif own in ONLY and target not in ONLY[own]:
            wrong.append(f"{where}: {own} imports only {sorted(ONLY[own])}")
    return wrong


def _sources() -> list[pathlib.Path]:
    return sorted([*(ROOT / "jaxpp_mlir").rglob("*.py"), *(ROOT / RUNTIME).rglob("*.py")])


def test_the_tiers_name_every_unit():
    units = {unit(module_name(path)) for path in _sources()}
    assert {RUNTIME, *CLIENTS, *COMPILER_STAGES, *DRIVER} <= units
    assert CLIENTS.isdisjoint(COMPILER_STAGES | DRIVER)


def test_every_import_keeps_to_its_tier():
    wrong = [w for path in _sources() for w in violations(module_name(path), path.read_text())]
    assert wrong == []


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("jaxpp_mlir.runtime.plan", "from jaxpp_mlir.schedules import GPipe"),
        ("jaxpp_mlir.checkpoint.store", "from jaxpp_mlir.passes import base"),
        ("jaxpp_mlir.ray.cluster", "import jaxpp_mlir.plan.builder"),
        ("jaxpp_mlir.program", "from jaxpp_mlir.checkpoint import save_restore"),
        ("jaxpp_mlir.planner.calibration", "    from jaxpp_mlir.partition import partition"),
        ("jaxpp_mlir.passes.choose_stages", "from jaxpp_mlir import program"),
        ("jaxpp_mlir.schedules.task", "from jaxpp_mlir.dialect import ops"),
        ("jaxpp_mlir.dialect.ops", "from jaxpp_mlir.ir import utils"),
    ],
)
def test_the_rules_catch_a_wrong_import(module, source):
    assert violations(module, source.strip())


def test_the_rules_allow_what_each_tier_needs():
    assert not violations(
        "jaxpp_mlir.compat.mpmd_jit", "from jaxpp_mlir.partition import partition"
    )
    assert not violations("jaxpp_mlir.checkpoint.save_restore", "import jaxpp_mlir.runtime.plan")
    assert not violations("jaxpp_mlir.passes.choose_stages", "from jaxpp_mlir.planner import x")
    assert not violations("jaxpp_mlir.schedules.task", "from jaxpp_mlir.dialect import vocabulary")
