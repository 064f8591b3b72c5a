"""benchmarks/measured_vs_simulated.py at tiny sizes, and its reading of traces."""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    path = BENCHMARKS / "measured_vs_simulated.py"
    spec = importlib.util.spec_from_file_location("benchmark_measured_vs_simulated", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _task(ts, dur, step=0, **args):
    args = {"step": step, **args}
    return {"ph": "X", "cat": "task", "ts": ts, "dur": dur, "tid": 0, "args": args}


def test_costs_are_median_device_times_per_stage_and_kind(bench):
    events = [
        _task(0, 1000, kind="fwd", stage=0, microbatch=0),
        _task(1000, 3000, kind="fwd", stage=0, microbatch=1),
        _task(4000, 2000, kind="fwd", stage=0, microbatch=2),
        _task(6000, 4000, tasks=[  # a fused span: 2 ms each
            {"kind": "fwd", "stage": 1, "microbatch": 0},
            {"kind": "bwd", "stage": 1, "microbatch": 0},
        ]),
        _task(10_000, 500, label="post_0__0"),  # outside the loop: not a cost
        {"ph": "X", "cat": "transfer", "ts": 0, "dur": 100, "tid": 1, "args": {}},
        {"ph": "X", "cat": "transfer", "ts": 0, "dur": 300, "tid": 1, "args": {}},
    ]  # fmt: skip
    costs, transfer = bench.measured_costs(events)
    assert costs == {(0, "fwd"): 2.0, (1, "fwd"): 2.0, (1, "bwd"): 2.0}
    assert transfer == pytest.approx(0.2)
    assert bench.loop_span_ms(events) == pytest.approx(10.0)


def test_tiny_w1_runs_every_figure(bench, tmp_path):
    import reference

    spec = dataclasses.replace(reference.WORKLOADS["W1"], width=16, microbatch_size=2)
    args = argparse.Namespace(steps=2, warmup=1, out_dir=str(tmp_path))
    row = bench.run_schedule(spec, "Std1F1B", args)
    for key in ("untraced_step_ms", "traced_step_ms", "dispatch_only_step_ms",
                "measured_loop_span_ms", "simulated_makespan_ms", "host_dispatch_ms"):  # fmt: skip
        assert row[key] > 0, key
    assert 0 <= row["simulated_bubble"] < 1
    assert (tmp_path / "W1_Std1F1B.json").exists() and (tmp_path / "W1_Std1F1B.png").exists()
