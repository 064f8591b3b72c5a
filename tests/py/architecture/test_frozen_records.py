"""The library's frozen dataclasses are ``records.frozen``: a plain
``dataclasses.dataclass(frozen=True)`` compiles three more methods per class when its
module loads (``runtime/records.py``), which the first partition of a process pays."""

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[3]
LIBRARY = (ROOT / "jaxpp_mlir", ROOT / "runtime")
# Options a record does not take: a class with one of them stays a plain dataclass.
OPTIONS_OF_A_RECORD = {"frozen", "slots"}


def plain_frozen_dataclasses(source: str) -> list[int]:
    """The lines of ``source`` where a class is declared ``@dataclass(frozen=True)``
    (``dataclasses.dataclass`` or a bare ``dataclass``; ``slots=True`` too) where
    ``@records.frozen`` would do."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef):
            continue
        for decorator in node.decorator_list:
            if not isinstance(decorator, ast.Call):
                continue
            func = decorator.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            options = {k.arg: k.value for k in decorator.keywords}
            frozen = options.get("frozen")
            if (
                name == "dataclass"
                and isinstance(frozen, ast.Constant)
                and frozen.value is True
                and set(options) <= OPTIONS_OF_A_RECORD
            ):
                lines.append(decorator.lineno)
    return lines


def test_the_check_finds_a_plain_frozen_dataclass():
    source = (
        "import dataclasses\nfrom dataclasses import dataclass\n"
        "@dataclasses.dataclass(frozen=True)\nclass A:\n    x: int\n"
        "@dataclass(frozen=True, slots=True)\nclass B:\n    x: int\n"
        "@dataclasses.dataclass(frozen=True, repr=False)\nclass C:\n    x: int\n"
        "@dataclasses.dataclass\nclass D:\n    x: int\n"
    )
    assert plain_frozen_dataclasses(source) == [3, 6]


def test_the_library_declares_its_frozen_dataclasses_as_records():
    found = {
        str(path.relative_to(ROOT)): lines
        for folder in LIBRARY
        for path in sorted(folder.rglob("*.py"))
        if (lines := plain_frozen_dataclasses(path.read_text()))
    }
    assert not found, f"use @records.frozen (runtime/records.py) instead at: {found}"
