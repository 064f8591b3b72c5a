"""The task-fusion code paths of benchmarks/launch_cost.py and measured_vs_simulated.py."""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import sys
from pathlib import Path

import pytest
import toolkit

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tiny_w1():
    sys.path.insert(0, str(BENCHMARKS))
    import reference

    return reference, dataclasses.replace(reference.WORKLOADS["W1"], width=16, microbatch_size=2)


@pytest.mark.slow  # two W1 programs compiled and timed: ~20 s on the shared machine
def test_fusion_rows_count_fewer_launches_and_match_jit(tiny_w1):
    reference, spec = tiny_w1
    launch_cost = _load("launch_cost")
    plain, fused = launch_cost.fusion_rows(reference, spec, steps=2, warmup=1)
    assert (plain["fused"], fused["fused"]) == (False, True)
    for row in (plain, fused):
        # After a warm-up and 2 timed SGD steps, against jax.jit (separate programs).
        assert row["max_ulps_params"] <= toolkit.SEVERAL_STEPS.ulps
        assert row["max_ulps_loss"] <= toolkit.SEVERAL_STEPS.ulps
        assert row["compile_s"] > 0 and row["step_ms"] > 0
    # Std1F1B(4), 8 microbatches: the last rank's 8 (fwd, bwd) pairs and rank 0's 4
    # steady-state (bwd, fwd) pairs are fused (tests/py/schedules/test_autofuse.py).
    assert plain["launches_per_step"] - fused["launches_per_step"] == 8 + 4
    assert fused["simulated_makespan"] < plain["simulated_makespan"]
    assert fused["fused_executables"] >= 1 and fused["fused_parts_max"] == 2
    assert fused["fused_compile_s"] > 0 and fused["fused_parts_compile_s"] > 0


@pytest.mark.slow  # a traced W1 step: ~15 s on the shared machine
def test_measured_vs_simulated_runs_a_fused_schedule(tiny_w1, tmp_path):
    reference, spec = tiny_w1
    bench = _load("measured_vs_simulated")
    args = argparse.Namespace(steps=1, warmup=1, out_dir=None, fuse_tasks=True)
    row = bench.run_schedule(spec, "Std1F1B", args)
    assert row["fused"] and row["schedule"] == "Std1F1B+fused"
    assert row["simulated_makespan_with_launch_ms"] > row["simulated_makespan_ms"] > 0
    # 4 stages x 8 microbatches x (fwd, bwd) = 64 loop tasks in 64 - 12 launches, plus the
    # steps outside the loop
    assert row["launches_per_step"] < 64
