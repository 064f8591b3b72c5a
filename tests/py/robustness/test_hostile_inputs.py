"""The corpus, parts 2 to 4 (``hostile_cases.py``, ``entry_point_cases.py``,
``compiler_cases.py``): run like the first part, each case in a child process with a
timeout, each pinned to its error type and message or to the right result."""

from __future__ import annotations

import compiler_cases
import entry_point_cases
import hostile_cases
import pytest
from test_corpus import _run_batches, assert_gives

MODULES = {
    "hostile_cases": hostile_cases.CASES,
    "entry_point_cases": entry_point_cases.CASES,
    "compiler_cases": compiler_cases.CASES,
}


@pytest.fixture(scope="module")
def results(python_server) -> dict[str, dict[str, dict]]:
    return {
        module: _run_batches(python_server, list(cases), module=module)
        for module, cases in MODULES.items()
    }


@pytest.mark.parametrize(
    "module, name", [(module, name) for module, cases in MODULES.items() for name in cases]
)
def test_case_gives_what_the_corpus_says(results, module, name):
    assert_gives(MODULES[module][name], results[module][name])
