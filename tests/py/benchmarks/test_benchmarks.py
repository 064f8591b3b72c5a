"""The benchmarks' own code paths at tiny sizes, so that they cannot rot.

``benchmarks/reference.py`` runs in this process through ``run_workload``, the
function its command line calls; the schedule, partition-scaling and train-step
scripts run as the commands docs/performance.md gives, with tiny sizes, each in a process
of its own (forked from one that imported jax once: ``toolkit.run_scripts``).
Every benchmark also checks its pipelined numbers against plain ``jax.jit``, in ulps of
each leaf's largest magnitude (``max_ulps_*``): those checks are asserted here, by the
rule of numerics.py (within ``SEPARATE_PROGRAMS`` after one step, ``SEVERAL_STEPS`` after
several; bit for bit only between the same programs).
"""

import dataclasses
import importlib.util
import json
import sys
from pathlib import Path

import pytest
import toolkit

pytestmark = pytest.mark.slow  # the benchmarks run their scripts as subprocesses

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def reference():
    return _load("reference")


@pytest.fixture(scope="module")
def tiny_w1_record(reference):
    # W1's structure (8 layers, 4 stages, 8 microbatches, Std1F1B), tiny arrays; the
    # partition-scaling measurement too, at 4x the microbatches.
    spec = dataclasses.replace(
        reference.WORKLOADS["W1"], width=16, microbatch_size=2, scaling_microbatches=32
    )
    return reference.run_workload(spec, steps=2, warmup=1, breakdown=True)


def test_reference_matches_plain_jit_within_rounding(tiny_w1_record):
    for key in ("max_ulps_params_first_step", "max_ulps_loss_first_step"):
        assert tiny_w1_record[key] <= toolkit.SEPARATE_PROGRAMS.ulps, key
    # After the warm-up and the timed steps: several SGD steps.
    for key in ("max_ulps_params", "max_ulps_loss"):
        assert tiny_w1_record[key] <= toolkit.SEVERAL_STEPS.ulps, key


def test_reference_reports_every_figure(reference, tiny_w1_record, capsys):
    for key, _, _ in reference.FIELDS:
        assert key in tiny_w1_record, key
    for key in ("lower_s", "partition_s", "compile_s", "first_call_s", "step_s", "jit_step_s"):
        assert tiny_w1_record[key] > 0, key
    assert tiny_w1_record["step_ratio"] == pytest.approx(
        tiny_w1_record["step_s"] / tiny_w1_record["jit_step_s"]
    )
    assert "error" not in tiny_w1_record["breakdown"]
    reference.print_table([tiny_w1_record], "tiny W1")
    reference.print_breakdown(tiny_w1_record)
    printed = capsys.readouterr().out
    assert "step / plain jit" in printed and "4x microbatches / as given" in printed
    json.dumps({k: v for k, v in tiny_w1_record.items() if k != "breakdown"})


# The scripts' commands, run once (each in its own process forked from one runner
# that imported jax, toolkit.run_scripts); each test checks its script's JSON lines.
_COMMANDS = {
    # Two ranks: the same six schedule kinds (two of them with two stages per rank).
    "schedules": [
        *("--layers", "4", "--width", "8", "--microbatches", "4", "--microbatch-size", "2"),
        *("--ranks", "2", "--steps", "1", "--warmup", "0"),
    ],
    "partition_scaling": ["--microbatches", "4,8", "--repeats", "1", "--width", "8"],
    # The main job's own 8 microbatches: its stage programs are the ones other tests
    # (checkpoint_cost.py, examples/train_mlp.py) compile, so the shared cache holds them once.
    "train_step": [
        *("--steps", "1", "--warmup", "0", "--microbatches", "8", "--schedules", "gpipe,1f1b"),
    ],
    "recompile": ["--schedules", "1f1b"],
}


@pytest.fixture(scope="module")
def script_records(tmp_path_factory) -> dict[str, dict]:
    jobs = []
    for name, args in _COMMANDS.items():
        jobs.append(([BENCHMARKS / f"{name}.py", *args], tmp_path_factory.mktemp(name)))
    done = toolkit.run_scripts(jobs, timeout_s=300)
    return {name: result for name, result in zip(_COMMANDS, done, strict=True)}


def _records(script_records, name: str) -> list[dict]:
    done = script_records[name]
    assert done["returncode"] == 0 and not done["timed_out"], done["stderr"][-3000:]
    return [json.loads(line) for line in done["stdout"].splitlines() if line.startswith("{")]


@pytest.mark.slow
def test_schedules_benchmark_runs_every_schedule_within_rounding(script_records):
    records = _records(script_records, "schedules")
    pipelined = [r for r in records if "max_abs_diff_params" in r]
    names = {r["name"] for r in pipelined}
    assert {
        "GPipe(2)", "Std1F1B(2)", "Eager1F1B(2)", "Interleaved1F1B(4,2)", "ZeroBubble(2)",
        "DualPipeV(4,2)",
    } <= names  # fmt: skip
    for record in pipelined:
        # The first step's numbers, against jax.jit's: one step.
        assert record["max_ulps_params"] <= toolkit.SEPARATE_PROGRAMS.ulps, record["name"]
        assert record["max_ulps_losses"] <= toolkit.SEPARATE_PROGRAMS.ulps, record["name"]
        assert record["sim_ratio_to_gpipe"] > 0


@pytest.mark.slow
def test_partition_scaling_benchmark_runs(script_records):
    records = _records(script_records, "partition_scaling")
    assert [r["microbatches"] for r in records] == [4, 8]
    assert records[1]["plan_instructions"] > records[0]["plan_instructions"]


@pytest.mark.slow
def test_train_step_benchmark_runs_the_main_job_within_rounding(script_records):
    records = _records(script_records, "train_step")
    assert [r["schedule"] for r in records] == ["gpipe", "1f1b"]
    for record in records:
        # --steps 1 --warmup 0: one Adam step against jax.jit's.
        assert record["max_ulps_state"] <= toolkit.SEPARATE_PROGRAMS.ulps
        assert record["max_ulps_loss"] <= toolkit.SEPARATE_PROGRAMS.ulps
        assert len(record["peak_bytes_per_rank"]) == 4


@pytest.mark.slow
def test_recompile_benchmark_runs_every_program_like_its_first_compile(script_records):
    (record,) = _records(script_records, "recompile")  # exit status 0: _records checks it
    assert record["schedule"] == "1f1b"
    # The same programs, from memory or compiled again: bit for bit; against jax.jit: one step.
    assert record["same_as_first_compile"] is True
    assert record["max_ulps"] <= toolkit.SEPARATE_PROGRAMS.ulps
    for key in ("first_s", "again_s", "again_without_cache_s", "other_devices_s"):
        assert record[key] > 0, key
