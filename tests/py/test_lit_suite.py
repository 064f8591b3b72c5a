"""Runs the lit/FileCheck suite in tests/lit, so that one pytest command runs every test."""

from __future__ import annotations

import pathlib
import subprocess
import sys

LIT_DIR = pathlib.Path(__file__).resolve().parents[1] / "lit"


def test_lit_suite_passes():
    command = [sys.executable, "-c", "import lit.main; lit.main.main()", "-sv", str(LIT_DIR)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    output = result.stdout + result.stderr
    assert "Passed" in output, output
    assert result.returncode == 0, output
