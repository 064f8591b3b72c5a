"""Cases for the corpus harness's own test: one crashes the interpreter, one hangs."""

from __future__ import annotations

import os
import time

from corpus_cases import Case


def _hang() -> None:
    time.sleep(3600)


def _raise() -> None:
    raise ValueError("a clean error")


CASES = {
    "returns": Case("returns", "correct", "", "", lambda: "fine"),
    "aborts": Case("aborts", "correct", "", "", os.abort),
    "raises": Case("raises", "error", "ValueError", "a clean error", _raise),
    "hangs": Case("hangs", "correct", "", "", _hang),
    "returns_too": Case("returns_too", "correct", "", "", lambda: "fine"),
}
