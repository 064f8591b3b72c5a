"""``benchmarks/launch_cost.py --quick --pack-parameters``'s code paths, in this process, so
that it cannot rot.

The launch-cost rows must be measured on launches that compute what plain
``jax.jit`` computes (bit for bit: the launcher compiles the very module jax.jit lowers),
and the workload rows on a pipelined step within ``toolkit.SEVERAL_STEPS`` of plain
``jax.jit`` after its steps (separate programs: numerics.py); the launch and buffer
counts are checked against the workload's structure.
"""

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import toolkit

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


@pytest.fixture(scope="module")
def launch_cost():
    spec = importlib.util.spec_from_file_location(
        "benchmark_launch_cost", BENCHMARKS / "launch_cost.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def quick_rows(launch_cost):
    lines: list[str] = []
    rows = launch_cost.run(
        quick=True, workloads=["W1"], reps=5, emit=lines.append, pack_parameters=True
    )
    return launch_cost, rows, lines


@pytest.mark.slow  # the quick run takes ~20 s on the shared 2-core machine
def test_every_row_is_one_json_line(quick_rows):
    _, rows, lines = quick_rows
    assert [json.loads(line) for line in lines] == rows


@pytest.mark.slow  # the quick run takes ~20 s on the shared 2-core machine
def test_sweep_launches_compute_what_jit_computes(quick_rows):
    launch_cost, rows, _ = quick_rows
    sweep = [r for r in rows if r["row"] == "sweep" and r["platform"] == "cpu"]
    assert [(r["inputs"], r["outputs"]) for r in sweep] == launch_cost.QUICK_SWEEP
    for row in sweep:
        assert row["results_equal_jit"], row
        for key in ("host_us", "ready_us", "jit_host_us", "jit_ready_us"):
            assert row[key] > 0, key


def test_compiled_launcher_has_the_requested_buffers(launch_cost):
    import jax

    launcher = launch_cost.make_launcher(5, 3, jax.devices("cpu")[0])
    args = [jax.numpy.full(launch_cost.LEAF_SHAPE, float(k)) for k in range(5)]
    results = launcher.launch(args)
    assert len(results) == 3
    # 0 + 1 + 2 + 3 + 4 = 10, times k + 1 for output k.
    assert [float(r[0]) for r in results] == [10.0, 20.0, 30.0]


@pytest.mark.slow  # the quick run takes ~20 s on the shared 2-core machine
def test_chain_rows_cover_the_task_counts(quick_rows):
    launch_cost, rows, _ = quick_rows
    chain = [r for r in rows if r["row"] == "chain" and r["platform"] == "cpu"]
    assert [r["tasks"] for r in chain] == launch_cost.QUICK_CHAIN
    assert all(r["host_us_per_task"] > 0 for r in chain)


@pytest.mark.slow  # the quick run takes ~20 s on the shared 2-core machine
def test_packed_parameter_rows_match_jit_and_pass_fewer_buffers(quick_rows):
    _, rows, _ = quick_rows
    workload = [r for r in rows if r["row"] == "workload"]
    by_config = {(r["packed"], r["params_packed"]): r for r in workload}
    assert sorted(by_config) == [(False, 0), (False, 1), (True, 0), (True, 1), (True, 2)]
    for row in workload:
        assert row["max_ulps_params"] <= toolkit.SEVERAL_STEPS.ulps, row
        assert row["max_ulps_loss"] <= toolkit.SEVERAL_STEPS.ulps, row
        assert len(row["peak_bytes_per_rank"]) == row["config"]["num_stages"]
        assert row["launches_per_step"] == by_config[(False, 0)]["launches_per_step"]
    # W1 has 2 layers (a weight and a bias each) per stage: a forward task's 4
    # parameters become 1 buffer (params_packed 1) or its 2 biases 1 (params_packed 2).
    unpacked, packed = by_config[(False, 0)], by_config[(False, 1)]
    assert packed["task_buffers_in_mean"] < unpacked["task_buffers_in_mean"]
    both, biases = by_config[(True, 1)], by_config[(True, 2)]
    assert both["task_buffers_in_mean"] < biases["task_buffers_in_mean"]
    assert biases["task_buffers_in_mean"] < by_config[(True, 0)]["task_buffers_in_mean"]


@pytest.mark.slow  # the quick run takes ~20 s on the shared 2-core machine
def test_workload_row_matches_jit_and_counts_launches(quick_rows):
    _, rows, _ = quick_rows
    packed, unpacked = [r for r in rows if r["row"] == "workload" and r["params_packed"] == 0]
    assert (packed["packed"], unpacked["packed"]) == (True, False)
    # Packing leaves the launches alone and passes fewer buffers.
    assert packed["launches_per_step"] == unpacked["launches_per_step"]
    assert packed["buffers_out_max"] < unpacked["buffers_out_max"]
    assert packed["buffers_in_max"] < unpacked["buffers_in_max"]
    for w1 in (packed, unpacked):
        _check_workload_row(w1)


def _check_workload_row(w1):
    # The state after the quick run's warm-up and timed steps: several SGD steps.
    assert w1["max_ulps_params"] <= toolkit.SEVERAL_STEPS.ulps
    assert w1["max_ulps_loss"] <= toolkit.SEVERAL_STEPS.ulps
    config = w1["config"]
    # At least one forward and one backward launch per (stage, microbatch).
    assert w1["launches_per_step"] >= 2 * config["num_stages"] * config["num_microbatches"]
    # A backward task reads at least its stage's weights and biases.
    layers_per_stage = config["num_layers"] // config["num_stages"]
    assert w1["buffers_in_max"] >= 2 * layers_per_stage
    assert w1["host_us_per_launch"] is not None and w1["host_us_per_launch"] > 0
    assert w1["step_ms"] > 0 and w1["jit_step_ms"] > 0


def test_compile_timings_compile_instead_of_reusing_an_executable(launch_cost, monkeypatch):
    """The fusion rows time compiles of executables the same process compiled before; the
    runtime's in-memory executable cache must not answer them (JAX's persistent cache, on in
    the tests, is not in the benchmarks: kept out here too)."""
    import types

    import jax
    import numpy as np
    from jaxpp_mlir.runtime.compilation import compile as runtime_compile
    from jaxpp_mlir.runtime.compilation import executable_memo

    monkeypatch.setenv("JAXPP_MLIR_COMPILATION_CACHE", "0")
    text = jax.jit(lambda x: x * 3.0 + 1.0).lower(np.zeros(5, np.float32)).as_text()
    plan = types.SimpleNamespace(executables={"tiny": types.SimpleNamespace(mlir_module=text)})
    device = jax.devices("cpu")[0]
    runtime_compile.compile_stage("tiny_first", text, [device])  # now in memory
    reuses, compiles = executable_memo.reuses, runtime_compile.compile_count
    launch_cost._compile_seconds(plan, "tiny", device)
    launch_cost._compile_seconds(plan, "tiny", device)
    assert executable_memo.reuses == reuses
    assert runtime_compile.compile_count == compiles + 2
