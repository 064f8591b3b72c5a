"""One table of instruction kinds: every kind is a module the registry lists, and nothing
outside the registry and the plan builder's op table chooses what to do by an
instruction's class; no task label is parsed back."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import pathlib
import re

import pytest
from jaxpp_mlir.runtime.instructions import registry
from jaxpp_mlir.runtime.plan import Instruction

ROOT = pathlib.Path(__file__).resolve().parents[3]
SCANNED = ("jaxpp_mlir", "runtime", "benchmarks", "examples")
MAY_DISPATCH_ON_CLASS = {
    ROOT / "runtime" / "instructions" / "registry.py",
    ROOT / "jaxpp_mlir" / "plan" / "instructions.py",
}
INSTRUCTION_AND_STEP_CLASSES = {
    "RunStage",
    "Send",
    "Recv",
    "RunStep",
    "SendStep",
    "ReceiveStep",
    "CopyStep",
}


def class_dispatch(source: str) -> list[str]:
    """``line: what`` for each ``isinstance``/``type(x) is`` test of an instruction or
    step class in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        tested: list[ast.expr] = []
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
            second = node.args[1] if len(node.args) > 1 else None
            tested = list(second.elts) if isinstance(second, ast.Tuple) else [second]
        elif isinstance(node, ast.Compare) and any(
            isinstance(op, ast.Is | ast.IsNot) for op in node.ops
        ):
            left = node.left
            if isinstance(left, ast.Call) and getattr(left.func, "id", None) == "type":
                tested = list(node.comparators)
        for expr in tested:
            name = expr.attr if isinstance(expr, ast.Attribute) else getattr(expr, "id", None)
            if name in INSTRUCTION_AND_STEP_CLASSES:
                found.append(f"{node.lineno}: {name}")
    return found


def _python_files() -> list[pathlib.Path]:
    return [p for top in SCANNED for p in sorted((ROOT / top).rglob("*.py"))]


@pytest.mark.parametrize(
    "source",
    [
        "isinstance(inst, RunStage)",
        "isinstance(inst, (Send, Recv))",
        "isinstance(step, slots.CopyStep)",
        "type(inst) is rt.Recv",
    ],
)
def test_the_check_finds_class_dispatch(source):
    assert class_dispatch(source)


def test_the_check_lets_kind_tests_pass():
    assert class_dispatch("inst.kind == run.KIND or isinstance(x, int)") == []


def test_no_module_dispatches_on_an_instruction_class():
    found = {
        str(path.relative_to(ROOT)): hits
        for path in _python_files()
        if path not in MAY_DISPATCH_ON_CLASS and (hits := class_dispatch(path.read_text()))
    }
    assert found == {}


LABEL_REGEX = re.compile(r"""re\.\w+\(\s*r?["'][^"']*(fwd|bwd)[^"']*\\d""")


def test_the_check_finds_a_label_regex():
    assert LABEL_REGEX.search('_TASK = re.compile(r"(fwd|bwd_i|bwd_w|bwd)_(\\d+)__(\\d+)")')


def test_no_module_parses_a_task_label():
    found = [
        str(path.relative_to(ROOT))
        for path in _python_files()
        if LABEL_REGEX.search(path.read_text())
    ]
    assert found == []


def test_every_kind_module_is_in_the_registry_and_complete():
    for kind, module in registry.KINDS.items():
        classes = [
            cls
            for _, cls in inspect.getmembers(module, inspect.isclass)
            if cls.__module__ == module.__name__ and issubclass(cls, Instruction)
        ]
        assert [cls.kind for cls in classes] == [kind], module.__name__
        (instruction,) = classes
        assert dataclasses.is_dataclass(instruction) and instruction.__dataclass_params__.frozen
        assert callable(module.resolve) and callable(module.generate)
    modules = pathlib.Path(registry.__file__).parent.glob("*.py")
    defining = {
        p.stem for p in modules if re.search(r"^class \w+\(Instruction\):", p.read_text(), re.M)
    }
    assert defining == {module.__name__.rsplit(".", 1)[1] for module in registry.KINDS.values()}
