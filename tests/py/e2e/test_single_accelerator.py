"""benchmarks/single_accelerator.py: every stage on one device gives plain jit's numbers."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
import toolkit

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(
        "single_accelerator", BENCHMARKS / "single_accelerator.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_all_stages_on_one_device_match_plain_jit(bench):
    tiny = bench.ref.Workload(
        "tiny", num_layers=4, width=8, num_microbatches=4, microbatch_size=2, num_stages=4
    )
    record = bench.run(tiny, jnp.float32, jax.devices()[0], steps=2, warmup=1)
    assert record["platform"] == jax.devices()[0].platform
    assert record["config"]["num_stages"] == 4 and not record["shrunk"]
    assert record["step_s"] > 0 and record["jit_step_s"] > 0 and record["compile_s"] > 0
    # Same per-microbatch ops in the same order as the jit baseline, but separate stage
    # programs (and the SGD update a small program of its own, where XLA may contract the
    # multiply-add differently), over a warm-up and 2 timed steps.
    assert record["max_ulps_params"] <= toolkit.SEVERAL_STEPS.ulps
    assert record["max_ulps_loss"] <= toolkit.SEVERAL_STEPS.ulps


def test_large_workload_is_shrunk_only_without_an_accelerator(bench):
    assert (bench.LARGE.width, bench.LARGE.num_layers, bench.LARGE.num_microbatches) == (
        8192,
        8,
        8,
    )
    assert bench.LARGE.num_microbatches * bench.LARGE.microbatch_size == 1024
    assert bench.LARGE_ON_CPU.width < bench.LARGE.width
    assert bench.DTYPES["L"] == jnp.bfloat16
