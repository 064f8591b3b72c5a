"""``benchmarks/launch_cost.py --pack-parameters``'s code paths at quick sizes, so that
they cannot rot: the packed-parameter rows match plain ``jax.jit`` bit for bit and
their microbatch tasks pass fewer buffers than the unpacked ones."""

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def rows():
    spec = importlib.util.spec_from_file_location(
        "benchmark_launch_cost_pack_parameters", BENCHMARKS / "launch_cost.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.run(
        quick=True, workloads=["W1"], reps=5, emit=lambda _: None, sweep=False, pack_parameters=True
    )


@pytest.mark.slow  # five partitions of W1 at quick sizes: ~30 s on the shared 2-core machine
def test_packed_parameter_rows_match_jit_and_pass_fewer_buffers(rows):
    by_config = {(r["packed"], r["params_packed"]): r for r in rows}
    assert sorted(by_config) == [(False, 0), (False, 1), (True, 0), (True, 1), (True, 2)]
    for row in rows:
        assert row["max_abs_diff_params"] == 0.0 and row["max_abs_diff_loss"] == 0.0, row
        assert len(row["peak_bytes_per_rank"]) == row["config"]["num_stages"]
        assert row["launches_per_step"] == by_config[(False, 0)]["launches_per_step"]
    # W1 has 2 layers (a weight and a bias each) per stage: a forward task's 4
    # parameters become 1 buffer (params_packed 1) or its 2 biases 1 (params_packed 2).
    unpacked, packed = by_config[(False, 0)], by_config[(False, 1)]
    assert packed["task_buffers_in_mean"] < unpacked["task_buffers_in_mean"]
    both, biases = by_config[(True, 1)], by_config[(True, 2)]
    assert both["task_buffers_in_mean"] < biases["task_buffers_in_mean"]
    assert biases["task_buffers_in_mean"] < by_config[(True, 0)]["task_buffers_in_mean"]
