"""benchmarks/checkpoint_cost.py measures what it says, in one process (one repetition)."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

pytest.importorskip("tensorstore")

SCRIPT = pathlib.Path(__file__).resolve().parents[3] / "benchmarks" / "checkpoint_cost.py"


@pytest.mark.slow  # compiles the main job's model: about 10 s
def test_one_process_measurement_counts_the_main_jobs_state(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("checkpoint_cost", SCRIPT)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setattr(bench, "REPEATS", 1)
    row = bench.measure(str(tmp_path))
    # 8 layers of a 64x64 weight and a 64 bias, float32, and Adam's mu and nu of
    # each, plus Adam's int32 step count
    layers = 8 * (64 * 64 + 64) * 4
    assert row["state_bytes"] == row["local_bytes"] == 3 * layers + 4
    assert row["arrays"] == 3 * 16 + 1
    assert row["disk_bytes"] >= row["state_bytes"]  # random floats do not compress
    assert row["save_s"] > 0 and row["restore_s"] > 0
