"""Every Python snippet in README.md runs as written (each in its own process, 8 CPU devices)."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest
import toolkit

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"
_PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
TIMEOUT_S = 600


def python_snippets(text: str) -> list[tuple[int, str]]:
    """``(line, code)`` of each fenced Python block of ``text``, line counted from 1."""
    return [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in _PYTHON_BLOCK.finditer(text)]


def test_snippets_are_found():
    found = python_snippets("text\n```python\nx = 1\n```\n```bash\nls\n```\n```python\ny\n```\n")
    assert found == [(3, "x = 1\n"), (9, "y\n")]
    assert len(python_snippets(README.read_text())) >= 3


_SNIPPETS = python_snippets(README.read_text())


@pytest.mark.parametrize(("line", "code"), _SNIPPETS, ids=[f"line{line}" for line, _ in _SNIPPETS])
def test_readme_snippet_runs_as_written(line, code, tmp_path):
    env = toolkit.subprocess_env()
    env.pop("JAX_PLATFORMS", None)
    script = tmp_path / f"readme_line{line}.py"
    script.write_text(code)
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 0, (
        f"README.md snippet at line {line} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    )
