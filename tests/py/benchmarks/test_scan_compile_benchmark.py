"""benchmarks/scan_compile.py's code paths at a tiny size: each side's child run in this
process (the benchmark runs each in a fresh one), its numbers against plain jax.jit, the
table."""

import contextlib
import io
import json

import pytest
import toolkit

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def scan_compile():
    return toolkit.load_benchmark("scan_compile")


@pytest.fixture(scope="module")
def records(scan_compile):
    found = {}
    for side in scan_compile.SIDES:
        argv = ["--child", side, "--layers", "4", "--width", "8", "--microbatches", "4"]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert scan_compile.main([*argv, "--steps", "1"]) == 0
        found[side] = json.loads(out.getvalue().strip().splitlines()[-1])
    return found


def test_each_side_reports_every_phase(scan_compile, records):
    for side, times in records.items():
        assert set(scan_compile.PHASES) <= set(times), side
        assert all(times[phase] >= 0 for phase in scan_compile.PHASES), side
    assert records["jit"]["partition"] == 0.0


def test_pipelined_sides_match_plain_jit(records):
    for side in ("scanned", "unrolled"):
        assert records[side]["max_ulps"] <= toolkit.SEPARATE_PROGRAMS.ulps, side


def test_table_compares_the_sides(scan_compile, records):
    medians = {(side, depth): records[side] for side in scan_compile.SIDES for depth in (4, 8)}
    text = scan_compile.table(medians, [4, 8])
    assert "| 8 | scanned |" in text and "scanned / unrolled (total)" in text
    assert "1.00x" in text


def test_depths_must_split_into_the_stages(scan_compile):
    with pytest.raises(SystemExit):
        scan_compile.parse_args(["--layers", "6", "--stages", "4"])


def test_each_rank_holds_only_its_rows_of_the_layers(scan_compile, records):
    """The layers' parameters and adamw moments: on 4 ranks each row lives on one rank
    only (the pieces add up to the whole, no rank holds it all); jax.jit's one device
    holds everything."""
    for side in ("scanned", "unrolled"):
        held, whole = records[side]["layer_bytes_per_rank"], records[side]["layer_bytes"]
        assert len(held) == 4 and sum(held) == whole and max(held) < whole, (side, held)
        assert len(records[side]["peak_bytes_per_rank"]) == 4, side
    assert records["jit"]["layer_bytes_per_rank"] == [records["jit"]["layer_bytes"]]
    medians = {(side, 4): records[side] for side in scan_compile.SIDES}
    text = scan_compile.memory_table(medians, [4])
    assert "| 4 | jit |" in text and "| 1.00 | - |" in text


def test_choose_stages_depth_reports_partition_and_its_passes():
    """benchmarks/choose_stages_depth.py's child at a tiny depth: partition's time and its
    passes', the stage-choosing pass among them."""
    benchmark = toolkit.load_benchmark("choose_stages_depth")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert benchmark.main(["--child", "4", "--repeats", "1"]) == 0
    record = json.loads(out.getvalue().strip().splitlines()[-1])
    assert record["layers"] == 4
    assert record["partition_ms"] > 0
    assert "jaxpp-choose-stages" in record["passes_ms"]
    assert sum(record["passes_ms"].values()) <= record["partition_ms"]
