"""Every Python snippet in README.md and docs/*.md runs as written, as a user runs it.

Each snippet runs in its own process with ``XLA_FLAGS`` and ``JAX_PLATFORMS`` unset, as
in a newcomer's shell: a snippet that needs several CPU devices must ask for them itself.
The snippets run through ``script_runner.py`` (``toolkit.run_scripts``): one Python
imports jax once (starting no backend) and forks a fresh process per snippet, which runs
like ``python snippet.py``.
"""

from __future__ import annotations

import pathlib
import re

import pytest
import toolkit

ROOT = pathlib.Path(__file__).resolve().parents[3]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
TIMEOUT_S = 600  # per snippet


def python_snippets(text: str) -> list[tuple[int, str]]:
    """``(line, code)`` of each fenced Python block of ``text``, line counted from 1."""
    return [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in _PYTHON_BLOCK.finditer(text)]


def test_snippets_are_found():
    found = python_snippets("text\n```python\nx = 1\n```\n```bash\nls\n```\n```python\ny\n```\n")
    assert found == [(3, "x = 1\n"), (9, "y\n")]
    assert len(python_snippets((ROOT / "README.md").read_text())) >= 3


def documented_snippets() -> list[tuple[str, str]]:
    """``("FILE:LINE", code)`` of every Python snippet of README.md and docs/*.md."""
    return [
        (f"{path.relative_to(ROOT)}:{line}", code)
        for path in DOCUMENTS
        for line, code in python_snippets(path.read_text())
    ]


_SNIPPETS = documented_snippets()


# Run with the snippets (one runner start for all): a failing script, a passing one, and one
# that reports the environment and device count a snippet starts with.
_PROBES = {
    "failing": "import os\nprint(os.getcwd())\nraise ValueError('from the script')\n",
    "passing": "import sys\nassert 'jax' not in globals()\nsys.exit(0)\n",
    "environment": (
        "import os, jax\n"
        "print(os.environ.get('XLA_FLAGS'), os.environ.get('JAX_PLATFORMS'), jax.device_count())\n"
    ),
}


def user_shell_env() -> dict[str, str]:
    """The tests' child environment without what a user's shell would not set."""
    env = toolkit.subprocess_env()
    for name in ("XLA_FLAGS", "JAX_PLATFORMS"):
        env.pop(name, None)
    return env


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, dict]:
    """Each snippet's result by ``FILE:LINE``, and each probe's by name."""
    scripts: dict[str, pathlib.Path] = {}
    for place, code in _SNIPPETS:
        name = place.replace("/", "_").replace(".md:", "_line")
        scripts[place] = tmp_path_factory.mktemp(name) / f"{name}.py"
        scripts[place].write_text(code)
    for name, code in _PROBES.items():
        scripts[name] = tmp_path_factory.mktemp(name) / f"{name}.py"
        scripts[name].write_text(code)
    jobs = [([script], script.parent) for script in scripts.values()]
    done = toolkit.run_scripts(jobs, timeout_s=TIMEOUT_S, env=user_shell_env())
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


def test_snippets_start_without_xla_flags_on_one_cpu_device(results):
    environment = results["environment"]
    assert environment["returncode"] == 0, environment["stderr"][-2000:]
    assert environment["stdout"].split() == ["None", "None", "1"]


@pytest.mark.parametrize(("place", "code"), _SNIPPETS, ids=[place for place, _ in _SNIPPETS])
def test_documented_snippet_runs_as_written(place, code, results):
    result = results[place]
    assert result["returncode"] == 0 and not result["timed_out"], (
        f"the snippet at {place} failed"
        f"{' (timed out)' if result['timed_out'] else ''}:\n"
        f"{result['stdout'][-2000:]}\n{result['stderr'][-4000:]}"
    )
