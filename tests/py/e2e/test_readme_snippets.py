"""Every Python snippet in README.md runs as written (each in its own process, 8 CPU devices).

The snippets run through ``script_runner.py`` (``toolkit.run_scripts``): one Python
imports jax once and forks a fresh process per snippet, which runs like ``python snippet.py``.
"""

from __future__ import annotations

import pathlib
import re

import pytest
import toolkit

README = pathlib.Path(__file__).resolve().parents[3] / "README.md"
_PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
TIMEOUT_S = 600  # per snippet


def python_snippets(text: str) -> list[tuple[int, str]]:
    """``(line, code)`` of each fenced Python block of ``text``, line counted from 1."""
    return [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in _PYTHON_BLOCK.finditer(text)]


def test_snippets_are_found():
    found = python_snippets("text\n```python\nx = 1\n```\n```bash\nls\n```\n```python\ny\n```\n")
    assert found == [(3, "x = 1\n"), (9, "y\n")]
    assert len(python_snippets(README.read_text())) >= 3


_SNIPPETS = python_snippets(README.read_text())


# Run with the snippets (one runner start for all): a failing script and a passing one.
_PROBES = {
    "failing": "import os\nprint(os.getcwd())\nraise ValueError('from the script')\n",
    "passing": "import sys\nassert 'jax' not in globals()\nsys.exit(0)\n",
}


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[int | str, dict]:
    """Each README snippet's result by line, and each probe's by name."""
    scripts: dict[int | str, pathlib.Path] = {}
    for line, code in _SNIPPETS:
        scripts[line] = tmp_path_factory.mktemp(f"readme_line{line}") / f"readme_line{line}.py"
        scripts[line].write_text(code)
    for name, code in _PROBES.items():
        scripts[name] = tmp_path_factory.mktemp(name) / f"{name}.py"
        scripts[name].write_text(code)
    env = toolkit.subprocess_env()
    env.pop("JAX_PLATFORMS", None)
    jobs = [([script], script.parent) for script in scripts.values()]
    done = toolkit.run_scripts(jobs, timeout_s=TIMEOUT_S, env=env)
    return {
        key: result | {"dir": script.parent}
        for (key, script), result in zip(scripts.items(), done, strict=True)
    }


def test_runner_reports_a_failing_script_with_its_output(results):
    failing = results["failing"]
    assert failing["returncode"] == 1 and not failing["timed_out"]
    assert "ValueError: from the script" in failing["stderr"]
    assert failing["stdout"].strip() == str(failing["dir"])  # run in its own directory
    assert results["passing"]["returncode"] == 0


@pytest.mark.parametrize(("line", "code"), _SNIPPETS, ids=[f"line{line}" for line, _ in _SNIPPETS])
def test_readme_snippet_runs_as_written(line, code, results):
    result = results[line]
    assert result["returncode"] == 0 and not result["timed_out"], (
        f"README.md snippet at line {line} failed"
        f"{' (timed out)' if result['timed_out'] else ''}:\n"
        f"{result['stdout'][-2000:]}\n{result['stderr'][-4000:]}"
    )
