"""Private JAX/jaxlib names are used only in the two adapters (``_jax_compat.py``).

Walks the AST of every module under jaxpp_mlir/ and runtime/: outside the
adapters no module may import ``jax._src`` or anything from ``jaxlib``, pass
``_skip_checks``, or reach a private attribute of a JAX object that the
adapters wrap (``Lowered._lowering``, ``Sharding._to_xla_hlo_sharding``...).
"""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
PACKAGES = ("jaxpp_mlir", "runtime")
ADAPTERS = {ROOT / "jaxpp_mlir" / "_jax_compat.py", ROOT / "runtime" / "_jax_compat.py"}
# Private attributes of JAX objects that only the adapters may touch.
PRIVATE_ATTRIBUTES = {
    "_lowering",
    "_skip_checks",
    "_to_xla_hlo_sharding",
    "_internal_device_list",
    "_device_assignment",
    "_mlir_libs",
    "global_state",
}


def _is_private_module(name: str) -> bool:
    return name == "jaxlib" or name.startswith(("jaxlib.", "jax._src", "jax.lib"))


def private_uses(source: str) -> list[str]:
    """``line: what`` for each private JAX/jaxlib name that ``source`` uses."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [
                f"{node.lineno}: import {a.name}" for a in node.names if _is_private_module(a.name)
            ]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{a.name}" for a in node.names]
            if _is_private_module(node.module) or any(_is_private_module(n) for n in names):
                found.append(f"{node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Attribute) and node.attr in PRIVATE_ATTRIBUTES:
            found.append(f"{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.keyword) and node.arg in PRIVATE_ATTRIBUTES:
            found.append(f"{getattr(node, 'lineno', '?')}: {node.arg}=")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value in PRIVATE_ATTRIBUTES
        ):
            found.append(f"{node.lineno}: {node.value!r}")
    return found


def _modules() -> list[pathlib.Path]:
    files = [p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))]
    return [p for p in files if p not in ADAPTERS]


def test_the_walk_sees_the_package():
    names = {p.relative_to(ROOT).as_posix() for p in _modules()}
    assert {
        "runtime/execution/executor.py",
        "jaxpp_mlir/partition.py",
        "jaxpp_mlir/ir_context.py",
    } <= names
    assert not names & {p.relative_to(ROOT).as_posix() for p in ADAPTERS}


@pytest.mark.parametrize(
    "source",
    [
        "from jax._src import distributed",
        "import jax._src.interpreters.mlir as m",
        "from jax import _src",
        "from jaxlib import xla_client as xc",
        "import jaxlib",
        "from jaxlib.mlir._mlir_libs import _mlir",
        "x = lowered._lowering.compile_args",
        "x = getattr(lowered, '_lowering', None)",
        "h = handler(aval, sharding, committed=True, _skip_checks=True)",
        "h = s._to_xla_hlo_sharding(2)",
    ],
)
def test_the_check_catches_private_uses(source):
    assert private_uses(source), source


@pytest.mark.parametrize(
    "source",
    [
        "import jax\nfrom jax.extend.mlir import ir\nfrom jax.sharding import NamedSharding",
        "from jaxpp_mlir.runtime import _jax_compat as jc\nh = jc.result_handler(a, s)",
        "from . import _jax_compat",
    ],
)
def test_the_check_lets_public_uses_pass(source):
    assert private_uses(source) == []


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_private_jax_name_outside_the_adapters(path):
    uses = private_uses(path.read_text())
    assert uses == [], (
        f"{path.relative_to(ROOT)} uses private JAX/jaxlib names {uses}: go through "
        "jaxpp_mlir/_jax_compat.py (compiler side) or runtime/_jax_compat.py (runtime)"
    )


def test_runtime_adapter_does_not_import_the_compiler_side():
    tree = ast.parse((ROOT / "runtime" / "_jax_compat.py").read_text())
    imported = [
        n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module is not None
    ] + [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [m for m in imported if m.startswith("jaxpp_mlir")]
