"""Runs corpus cases in this process; prints one JSON line per case as it ends.

python corpus_runner.py NAME...
"""

from __future__ import annotations

import json
import os
import sys
import traceback
import warnings

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# numerics.py (the comparison rule) lives in tests/py/support.
sys.path.insert(
    1, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support")
)
sys.setrecursionlimit(10000)

import importlib  # noqa: E402

# The harness's own test swaps in cases that crash and hang.
CASES = importlib.import_module(os.environ.get("JAXPP_CORPUS_MODULE", "corpus_cases")).CASES


def run(name: str) -> dict:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value = CASES[name].run()
        except BaseException as e:  # noqa: BLE001 - a case may raise anything, even SystemExit
            result = {"outcome": "raised", "type": type(e).__name__, "message": str(e)}
            if isinstance(e, AssertionError):
                result["traceback"] = traceback.format_exc()[-3000:]
        else:
            result = {"outcome": "returned", "value": str(value)}
    result["warnings"] = [f"{w.category.__name__}: {w.message}" for w in caught]
    return result


if __name__ == "__main__":
    sys.stdout.write("ready\n")  # imports done: the harness times each case from here
    sys.stdout.flush()
    for name in sys.argv[1:]:
        line = json.dumps({"name": name, **run(name)})
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
