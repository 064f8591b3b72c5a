"""benchmarks/partition_outputs.py, the corpus a speed change of partition must leave
byte-identical: it writes the same files twice, and they hold what partition made."""

import filecmp
import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "partition_outputs.py"
CASES = ["W1", "text_mlp_forward"]


@pytest.fixture(scope="module")
def outputs():
    spec = importlib.util.spec_from_file_location("benchmark_partition_outputs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _same_tree(comparison: filecmp.dircmp) -> bool:
    if comparison.left_only or comparison.right_only or comparison.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(
        comparison.left, comparison.right, comparison.common_files, shallow=False
    )
    return not mismatch and not errors and all(map(_same_tree, comparison.subdirs.values()))


def test_two_runs_write_the_same_files(outputs, tmp_path):
    for run in ("a", "b"):
        assert outputs.write_partition_outputs(tmp_path / run, CASES) == len(CASES)
        outputs.write_opt_outputs(tmp_path / run, str(tmp_path / "scratch"), "jaxpp-inline-calls")
        outputs._normalize_dumps(tmp_path / run)
    assert _same_tree(filecmp.dircmp(tmp_path / "a", tmp_path / "b"))
    written = [p for p in (tmp_path / "a").rglob("*") if p.is_file()]
    assert not [p for p in written if str(outputs.CHECKOUT) in p.read_text()]
    for case in CASES:
        dump = tmp_path / "a" / f"partition__{case}"
        assert (dump / "00_input.mlir").is_file()
        assert any(dump.glob("*_after_jaxpp-verify-program.mlir"))
        assert "ExecutionPlan(" in (tmp_path / "a" / f"partition__{case}.plan.txt").read_text()
    opt_files = [p for p in written if p.name.startswith("opt__")]
    folder = outputs.LIT / "jaxpp-inline-calls"
    assert len(opt_files) == sum(len(outputs._run_lines(t)) for t in folder.glob("*.mlir"))
    assert {p.read_text().split("\n", 1)[0] for p in opt_files} == {"status 0"}
    assert any("func.func @main" in p.read_text() for p in opt_files)


def test_an_unknown_case_is_refused(outputs, tmp_path):
    with pytest.raises(SystemExit, match="unknown cases \\['W9'\\]"):
        outputs.write_partition_outputs(tmp_path, ["W9"])
