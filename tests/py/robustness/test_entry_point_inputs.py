"""The corpus, part 3 (``entry_point_cases.py``): run like the first part, each case in a
child process with a timeout, each pinned to its error type and message or to the right
result."""

from __future__ import annotations

import pytest
from entry_point_cases import CASES
from test_corpus import _run_batches, assert_gives


@pytest.fixture(scope="module")
def results(python_server) -> dict[str, dict]:
    return _run_batches(python_server, list(CASES), module="entry_point_cases")


@pytest.mark.parametrize("name", list(CASES))
def test_case_gives_what_the_corpus_says(results, name):
    assert_gives(CASES[name], results[name])
