"""benchmarks/union_programs.py's code path: W1 in one fresh process, one round of one step
per mode; the record says every member switched and has each mode's step and each union's
load."""

import json
import subprocess
import sys

import pytest
import toolkit

pytestmark = pytest.mark.slow  # a fresh process, real compiles


def test_w1_record_has_the_switch_the_steps_and_the_loads():
    bench = toolkit.load_benchmark("union_programs")
    command = [sys.executable, bench.__file__, "--child", "W1", "--steps", "1", "--rounds", "1"]
    done = subprocess.run(
        command, capture_output=True, text=True, env=bench.first_step._child_env(), timeout=600
    )
    assert done.returncode == 0, done.stderr[-4000:]
    record = json.loads(done.stdout.strip().splitlines()[-1])
    assert record["switch_steps"] >= 1 and record["switch_s"] < 600  # it switched
    assert set(record["step_ms"]) == set(bench.MODES) == set(record["dispatch_ms"])
    assert all(v > 0 for v in record["step_ms"].values())
    assert record["loads"], "W1's programs make unions"
    for row in record["loads"]:
        assert row["union"].startswith("union(") and len(row["members"]) >= 2
        assert row["ms"] > 0 and all(ms > 0 for ms in row["members"].values())
