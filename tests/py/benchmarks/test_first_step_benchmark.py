"""benchmarks/first_step.py's code path: one fresh process per side, the phase table.

The pipelined process of W1 runs with every compilation cache off, so it also checks
that a fresh process compiles each distinct stage program exactly once (no program
compiled twice, none skipped) and that the phases it reports fit in the time to the
first step.
"""

import pytest
import toolkit

pytestmark = pytest.mark.slow  # fresh processes, a real compile


@pytest.fixture(scope="module")
def first_step():
    return toolkit.load_benchmark("first_step")


@pytest.fixture(scope="module")
def w1_records(first_step):
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
        patch.setenv("JAXPP_MLIR_COMPILATION_CACHE", "0")
        patch.setenv("JAXPP_MLIR_EXECUTABLE_MEMORY_CACHE", "0")
        return first_step.spawn("W1", "pp", None), first_step.spawn("W1", "jit", None)


def test_a_fresh_process_compiles_each_distinct_program_once(w1_records):
    ours, _ = w1_records
    names = [name for name, _, _ in ours["programs"]]
    alone = ours["distinct_programs"] - ours["union_members"]
    assert len(names) == len(set(names)) == alone + ours["unions"]
    assert {how for _, how, _ in ours["programs"]} == {"compiled"}
    assert ours["executables"] > ours["distinct_programs"]  # ranks share programs
    # Every other executable is a compiled program rebound to another rank's devices.
    assert len(ours["rebinds"]) == ours["executables"] - len(names)
    assert all(seconds > 0 for seconds in ours["rebinds"])


def test_phases_fit_in_the_time_to_the_first_step(w1_records):
    ours, theirs = w1_records
    top = ("import", "trace", "lower", "partition", "compile", "first_step")
    assert sum(ours[key] for key in top) <= ours["total"] + 1e-6
    phases = ours["phases"]
    # W1's ranks have a device each: its dispatch is generated while its programs compile.
    dispatch = "compile: dispatch (while compiling)"
    for name in ("partition: build the plan", "compile: stage programs", dispatch):
        assert 0 < phases[name]
    assert phases["partition: build the plan"] < ours["partition"]
    assert phases[dispatch] < phases["compile: stage programs"] < ours["compile"]
    assert max(seconds for _, _, seconds in ours["programs"]) < phases["compile: stage programs"]
    assert "jaxpp-outline-stages" in {name for name, _ in ours["passes"]}
    assert sum(theirs[key] for key in ("trace", "lower", "compile", "first_step")) <= (
        theirs["total"] + 1e-6
    )


def test_a_second_step_is_timed_apart_from_the_first(w1_records):
    ours, theirs = w1_records
    for record, phases in (
        (ours, ("import", "trace", "lower", "partition", "compile", "first_step")),
        (theirs, ("trace", "lower", "compile", "first_step")),
    ):
        assert 0 < record["second_step"]
        # The time to first step is its phases, the second step not among them.
        assert record["total"] == pytest.approx(sum(record[key] for key in phases))


def test_cpu_phases_add_up_to_the_cpu_total(w1_records):
    ours, theirs = w1_records
    phases = ("import", "trace", "lower", "partition", "compile", "first_step")
    assert sum(ours["cpu_" + key] for key in phases) == pytest.approx(ours["cpu_total"])
    assert sum(theirs["cpu_" + key] for key in phases[1:] if key != "partition") == (
        pytest.approx(theirs["cpu_total"])
    )
    assert all(ours["cpu_" + key] > 0 for key in phases)


def test_table_gives_the_ratio_of_the_rounds(first_step, w1_records, capsys):
    ours, theirs = w1_records
    summary = first_step.summarize({"W1": {"pp": [ours, ours], "jit": [theirs, theirs]}})
    row = summary["W1"]
    assert row["ratio"] == pytest.approx(ours["total"] / theirs["total"])
    made = ours["distinct_programs"] - ours["union_members"] + ours["unions"]
    assert row["programs_compiled"] == made
    floor = theirs["cpu_total"] - theirs["cpu_compile"] + ours["cpu_compile"]
    assert row["cpu_floor_ratio"] == pytest.approx(floor / theirs["cpu_total"])
    stage_programs = ours["phases"]["compile: stage programs"]
    xla_floor = (theirs["total"] - theirs["compile"] + stage_programs) / theirs["total"]
    assert row["xla_floor_ratio"] == pytest.approx(xla_floor)
    first_step.print_table(summary, "test")
    out = capsys.readouterr().out
    assert "pipelined / jax.jit (median of rounds)" in out
    assert f"{row['ratio']:.2f}" in out
    assert f"{row['cpu_floor_ratio']:.2f}" in out
    second = [line for line in out.splitlines() if "second step s" in line]
    assert [line.split()[-1] for line in second] == [
        f"{ours['second_step']:.3f}",
        f"{theirs['second_step']:.3f}",
    ]
    (rebind_line,) = [line for line in out.splitlines() if "rebinds to other ranks" in line]
    assert rebind_line.split()[-1] == f"{len(ours['rebinds'])}/{sum(ours['rebinds']):.3f}"
    (xla_line,) = [line for line in out.splitlines() if line.strip().startswith("XLA floor")]
    assert xla_line.split()[-1] == f"{row['xla_floor_ratio']:.2f}"
