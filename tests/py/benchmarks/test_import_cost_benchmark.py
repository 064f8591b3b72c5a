"""benchmarks/import_cost.py's code path: W1 in one fresh process; the dataclasses the
library creates on the way to the first step are counted and timed, by module."""

import json
import subprocess
import sys

import pytest
import toolkit

pytestmark = pytest.mark.slow  # a fresh process, real compiles


def test_w1_counts_the_library_dataclasses_by_module():
    bench = toolkit.load_benchmark("import_cost")
    command = [sys.executable, bench.__file__, "--child", "W1"]
    done = subprocess.run(
        command, capture_output=True, text=True, env=bench.first_step._child_env(), timeout=600
    )
    assert done.returncode == 0, done.stderr[-4000:]
    record = json.loads(done.stdout.strip().splitlines()[-1])
    assert record["dataclasses"] == sum(count for count, _ in record["by_module"].values()) > 0
    assert 0 < record["dataclass_s"] < record["total_s"]
    assert "jaxpp_mlir.runtime.plan" in record["by_module"]  # the plan's records, at least
    assert all(module.startswith("jaxpp_mlir") for module in record["by_module"])


def test_library_times_the_named_checkout(tmp_path):
    """``--library``: the child's library comes from the checkout named (here this one,
    named by its path); a folder that is not a checkout is named and refused."""
    bench = toolkit.load_benchmark("import_cost")
    root = bench.first_step.ROOT
    command = [sys.executable, bench.__file__, "--child", "W1", "--library", root]
    done = subprocess.run(
        command, capture_output=True, text=True, env=bench.first_step._child_env(), timeout=600
    )
    assert done.returncode == 0, done.stderr[-4000:]
    record = json.loads(done.stdout.strip().splitlines()[-1])
    assert record["dataclasses"] > 0 and 0 < record["dataclass_s"] < record["total_s"]
    command[-1] = str(tmp_path)  # not a checkout of the project
    done = subprocess.run(
        command, capture_output=True, text=True, env=bench.first_step._child_env(), timeout=600
    )
    assert done.returncode != 0
    assert f"{tmp_path} is not a checkout of the project: it has no jaxpp_mlir/" in done.stderr
