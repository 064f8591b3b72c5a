"""Runs the lit/FileCheck suite in tests/lit, so that one pytest command runs every test,
and checks that the suite covers every registered pass."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

from jaxpp_mlir.passes import registry  # noqa: F401  (registers the passes)
from jaxpp_mlir.passes.base import registered_passes

LIT_DIR = pathlib.Path(__file__).resolve().parents[2] / "lit"

# A FileCheck directive of any prefix (CHECK:, CHECK-NEXT:, LENGTH:...), or a diagnostic.
_CHECK_LINE = re.compile(r"^// *CHECK(-[A-Z]+)?:", re.MULTILINE)
_EXPECTED_ERROR = re.compile(r"expected-error(-re)? *(@\S+)? *\{\{.+\}\}")
_NOT_RUN = re.compile(r"^// RUN: *not jaxpp-opt .*\| *filecheck", re.MULTILINE)
_CHECKED_ERROR = re.compile(r"^// *[A-Z][A-Z0-9-]*: .*error: \S", re.MULTILINE)


@pytest.mark.slow
def test_lit_suite_passes():
    command = [sys.executable, "-c", "import lit.main; lit.main.main()", "-sv", str(LIT_DIR)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    output = result.stdout + result.stderr
    assert "Passed" in output, output
    assert result.returncode == 0, output


def _is_positive(text: str) -> bool:
    return bool(_CHECK_LINE.search(text))


def _is_negative(text: str) -> bool:
    """An expected-error, or a `not jaxpp-opt ... | filecheck` run that checks an error's text."""
    return bool(_EXPECTED_ERROR.search(text)) or bool(
        _NOT_RUN.search(text) and _CHECKED_ERROR.search(text)
    )


@pytest.mark.parametrize("name", sorted(registered_passes()))
def test_every_pass_has_positive_and_negative_lit_tests(name):
    folder = LIT_DIR / name
    assert folder.is_dir(), f"no lit tests for {name}: add tests/lit/{name}/"
    texts = {path.name: path.read_text() for path in sorted(folder.glob("*.mlir"))}
    positive = [file for file, text in texts.items() if _is_positive(text)]
    negative = [file for file, text in texts.items() if _is_negative(text)]
    assert positive, f"tests/lit/{name}/ has no file with a CHECK line (a positive test)"
    assert negative, (
        f"tests/lit/{name}/ has no negative test: a file with `expected-error {{{{...}}}}` "
        "(--verify-diagnostics) or a `not jaxpp-opt ... | filecheck` run checking an error"
    )


NOT_RUN = "// RUN: not jaxpp-opt %s 2>&1 | filecheck %s\n"


@pytest.mark.parametrize(
    "text, positive, negative",
    [
        ("// RUN: jaxpp-opt %s | filecheck %s\n// CHECK-LABEL: func.func @f\n", True, False),
        ("// expected-error @+1 {{the module has no 'func.func @main'}}\n", False, True),
        (f"{NOT_RUN}// CHECK: x.mlir:3:1: error: bad\n", True, True),
        (f"{NOT_RUN}// CHECK: func.func\n", True, False),
        ("// RUN: jaxpp-opt %s --verify-diagnostics | filecheck %s\n// nothing\n", False, False),
    ],
    ids=["check", "expected-error", "not-run", "not-run-without-error", "neither"],
)
def test_positive_and_negative_detection(text, positive, negative):
    assert _is_positive(text) == positive
    assert _is_negative(text) == negative
