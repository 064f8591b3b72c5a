"""The corpus of bad and hostile inputs (``corpus_cases.py``), run in child processes.

Cases run in batches (one jax import per batch) in a child process, each case
with a timeout, so that a case that crashes or hangs the interpreter fails its own
test instead of taking pytest down: the batch is then restarted after the
case that ended it. Each case must give what its table entry says: a clear
error (its type and pinned message parts), a command-line usage error with its
exit code, or the same numbers as ``jax.jit``.
"""

from __future__ import annotations

import collections
import json
import os
import pathlib
import queue
import subprocess
import threading

import pytest
from corpus_cases import CASES

RUNNER = str(pathlib.Path(__file__).parent / "corpus_runner.py")
STARTUP_TIMEOUT_S = 240  # the runner's imports, before its first case
CASE_TIMEOUT_S = 240  # one corpus case
HARNESS_TIMEOUT_S = 2  # one case of the harness's own test (each takes microseconds)


def _read_lines(stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)  # end of output


def _run_batch(
    python, names: list[str], timeout_s: float, module: str
) -> tuple[list[str], str, bool]:
    """Runs ``names`` in one runner process (started through ``python``, a
    conftest.PythonServer): its output lines, how it ended, whether it failed. A case that
    gives no result ``timeout_s`` after the previous one (or after the runner's imports)
    is a hang: the runner is killed."""
    runner = subprocess.Popen(
        [*python.command, RUNNER, *names],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={
            **os.environ,
            **python.env,
            "XLA_FLAGS": "--xla_force_host_platform_device_count=8",
            "JAXPP_CORPUS_MODULE": module,
        },
    )
    lines: queue.Queue = queue.Queue()
    reader = threading.Thread(target=_read_lines, args=(runner.stdout, lines), daemon=True)
    reader.start()
    output: list[str] = []
    limit = STARTUP_TIMEOUT_S
    try:
        while True:
            try:
                line = lines.get(timeout=limit)
            except queue.Empty:
                return output, f"hang (no result after {limit:.0f} s)", True
            if line is None:
                code = runner.wait(timeout=30)
                return output, f"exit code {code}", code != 0
            output.append(line)
            limit = timeout_s  # the runner is ready, or a case ended: the next one starts
    finally:
        runner.kill()
        runner.wait(timeout=30)
        reader.join(timeout=5)
        runner.stdout.close()


def _run_batches(
    python, names: list[str], *, timeout_s: float = CASE_TIMEOUT_S, module: str = "corpus_cases"
) -> dict[str, dict]:
    results: dict[str, dict] = {}
    remaining = list(names)
    while remaining:
        output, ending, failed = _run_batch(python, remaining, timeout_s, module)
        for line in output:
            if line.startswith("{"):
                record = json.loads(line)
                results[record.pop("name")] = record
        remaining = [n for n in remaining if n not in results]
        if remaining and failed:  # the first case without a result ended the batch
            results[remaining.pop(0)] = {"outcome": "crashed", "how": ending}
        elif remaining:
            raise AssertionError(f"the runner skipped {remaining}")
    return results


@pytest.fixture(scope="module")
def results(python_server) -> dict[str, dict]:
    return _run_batches(python_server, list(CASES))


@pytest.mark.parametrize("name", list(CASES))
def test_case_gives_what_the_corpus_says(results, name):
    assert_gives(CASES[name], results[name])


def assert_gives(case, got: dict) -> None:
    """``got`` (a runner's result) is what ``case`` must give."""
    name = case.name
    assert got["outcome"] != "crashed", f"{name} killed the interpreter: {got['how']}"
    if case.expect == "error":
        assert got["outcome"] == "raised", f"{name} raised nothing: {got}"
        assert got["type"] == case.kind, got
        for part in case.pinned:
            assert part in got["message"], got["message"]
    elif case.expect == "exit":
        assert got["outcome"] == "returned", got
        assert got["value"].startswith(f"exit {case.kind}:"), got["value"]
        for part in case.pinned:
            assert part in got["value"], got["value"]
    else:
        assert case.expect == "correct"
        assert got["outcome"] == "returned", got
        assert got["value"] == "same as jax.jit", got
    assert not got["warnings"], got["warnings"]


def test_corpus_size_and_classes():
    classes = collections.Counter(case.expect for case in CASES.values())
    assert len(CASES) >= 60, classes
    assert classes["correct"] >= 5 and classes["error"] + classes["exit"] >= 55, classes


@pytest.mark.slow
def test_the_harness_survives_a_crash_and_a_hang(python_server):
    results = _run_batches(
        python_server,
        ["returns", "aborts", "raises", "hangs", "returns_too"],
        timeout_s=HARNESS_TIMEOUT_S,
        module="harness_cases",
    )
    assert results["returns"]["outcome"] == "returned"
    assert results["aborts"] == {"outcome": "crashed", "how": "exit code -6"}
    assert results["raises"]["type"] == "ValueError"
    assert results["hangs"] == {
        "outcome": "crashed",
        "how": f"hang (no result after {HARNESS_TIMEOUT_S} s)",
    }
    assert results["returns_too"]["outcome"] == "returned"
