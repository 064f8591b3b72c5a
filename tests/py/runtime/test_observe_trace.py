"""program_trace: the recorded timeline of real steps (runtime/observation/trace.py)."""

from __future__ import annotations

import json
import logging
import os
import re
from collections import Counter

import jax
import numpy as np
import pytest
import toolkit
from jaxpp_mlir.runtime.compilation import compile as runtime_compile
from jaxpp_mlir.runtime.compilation.progress import CompileProgress
from jaxpp_mlir.runtime.instructions import receive, registry, run
from jaxpp_mlir.runtime.observation import trace as trace_module
from jaxpp_mlir.runtime.observation.trace import program_trace
from jaxpp_mlir.runtime.observation.trace_files import chrome_trace, merge_traces
from toolkit import make_mesh, mlp_batch, mlp_params, mlp_train_step

import jaxpp_mlir as pp
from jaxpp_mlir import trace as trace_cli
from jaxpp_mlir.observe.summary import stage_bytes

# Compares numbers with plain jax.jit or between runs: CI runs it under capped ISAs too.
pytestmark = pytest.mark.numerics

NUM_STEPS = 2

WIDTH = 8


def partition(schedule: pp.Schedule, num_ranks: int, num_microbatches: int):
    """The partitioned step, its parameters and its batch (microbatches of 2 rows)."""
    params = mlp_params(schedule.num_stages, WIDTH)
    batch = mlp_batch(num_microbatches, 2, WIDTH)
    lowered = jax.jit(mlp_train_step).lower(params, batch)
    return pp.partition(lowered, mesh=make_mesh(num_ranks), schedule=schedule), params, batch


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """A 4-rank 1F1B step compiled and called twice inside one trace."""
    program, params, batch = partition(pp.Std1F1B(4), num_ranks=4, num_microbatches=4)
    path = tmp_path_factory.mktemp("trace") / "step.json"
    records = _Records()
    progress_logger = logging.getLogger("jaxpp_mlir.runtime.compilation.progress")
    progress_logger.addHandler(records)
    # Another module's logging.config may have disabled existing loggers: enable it here.
    level = progress_logger.level
    # DEBUG: each finished program too. setLevel, not .level=: it clears the level cache.
    progress_logger.setLevel(logging.DEBUG)
    disabled, progress_logger.disabled = progress_logger.disabled, False
    with program_trace(path) as recorder, pytest.MonkeyPatch.context() as patch:
        patch.setenv("JAXPP_MLIR_PROGRESS_AFTER", "0")  # progress from the start, however fast
        compiled_before = runtime_compile.compile_count
        try:
            step = program.compile()
        finally:
            progress_logger.removeHandler(records)
            progress_logger.setLevel(level)
            progress_logger.disabled = disabled
        step.compilations = runtime_compile.compile_count - compiled_before
        step.progress_lines = records.lines
        source_before = step.executable.dispatch_source()
        outputs = step(params, batch)
        outputs = step(outputs[0], batch)
        jax.block_until_ready(outputs)
    with open(path) as handle:
        events = json.load(handle)["traceEvents"]
    step.recorder = recorder
    return program, step, params, batch, outputs, events, source_before


def test_trace_is_json_with_known_phases(traced):
    *_, events, _ = traced
    assert events
    assert {e["ph"] for e in events} <= {"X", "M", "C", "s", "f"}
    for e in events:
        if e["ph"] == "X":
            assert e["dur"] >= 0 and isinstance(e["ts"], float | int)


def _runs(plan):
    return [inst for inst in plan.instructions if inst.kind == run.KIND]


def test_one_span_per_task_of_the_plan(traced):
    program, *_, events, _ = traced
    runs = _runs(program.plan)
    spans = [e for e in events if e["ph"] == "X" and e.get("cat") == "task"]
    assert len(spans) == NUM_STEPS * len(runs)
    for step in range(NUM_STEPS):
        recorded = Counter(
            (e["tid"], e["args"]["label"]) for e in spans if e["args"]["step"] == step
        )
        assert recorded == Counter((inst.rank, inst.label) for inst in runs)


def test_task_spans_name_stage_kind_and_microbatch(traced):
    program, *_, events, _ = traced
    spans = [e for e in events if e["ph"] == "X" and e.get("cat") == "task"]
    loop_tasks = [e for e in spans if "kind" in e["args"]]
    assert {e["args"]["kind"] for e in loop_tasks} == {"fwd", "bwd"}
    assert {e["args"]["microbatch"] for e in loop_tasks} == set(range(4))
    schedule = program.schedule
    for e in loop_tasks:
        assert e["tid"] == schedule.stage_rank(e["args"]["stage"])
    # Exactly the plan's tasks of a stage for a microbatch (not the code outside the loop).
    recorded = Counter(
        (e["tid"], e["args"]["stage"], e["args"]["kind"], e["args"]["microbatch"])
        for e in loop_tasks
    )
    planned = Counter(
        (inst.rank, task.stage, task.kind, task.microbatch)
        for inst in _runs(program.plan)
        for task in inst.tasks
        if task.microbatch is not None
    )
    assert recorded == Counter({key: NUM_STEPS * n for key, n in planned.items()})
    outer = [e for e in spans if "kind" not in e["args"]]
    assert {e["args"]["label"] for e in outer} == {"pre_0__0", "post_0__0"}


def test_typed_spans_carry_the_plans_tasks_and_are_what_the_file_holds(traced):
    program, step, *_, events, _ = traced
    timeline = step.recorder.timeline()
    runs = _runs(program.plan)
    assert len(timeline.tasks) == NUM_STEPS * len(runs)
    for number in range(NUM_STEPS):
        typed = Counter(
            (span.rank, span.executable, span.tasks)
            for span in timeline.tasks
            if span.step == number
        )
        assert typed == Counter((inst.rank, inst.executable, inst.tasks) for inst in runs)
    assert all(span.begin <= span.end for span in timeline.tasks)
    assert chrome_trace(timeline)["traceEvents"] == events


def test_task_labels_are_the_string_form_of_the_typed_tasks(traced):
    program, *_ = traced
    for inst in _runs(program.plan):
        (task,) = inst.tasks
        stage = f"{task.kind}_{task.stage}__{task.microbatch or 0}"
        assert inst.label == str(task) == stage


def test_one_flow_per_transfer_of_the_plan(traced):
    program, *_, events, _ = traced
    recvs = [inst for inst in program.plan.instructions if inst.kind == receive.KIND]
    starts = [e for e in events if e["ph"] == "s"]
    ends = [e for e in events if e["ph"] == "f"]
    assert len(ends) == len(starts) == NUM_STEPS * len(recvs)
    by_id = {e["id"]: e for e in starts}
    expected = Counter((r.peer, r.rank, int(np.prod(r.spec.shape)) * 4) for r in recvs)
    got = Counter()
    for end in ends:
        start = by_id[end["id"]]
        assert start["ts"] <= end["ts"]
        got[(start["tid"], end["tid"], end["args"]["bytes"])] += 1
    assert got == Counter({key: NUM_STEPS * n for key, n in expected.items()})


def test_compile_spans_and_live_bytes_counters(traced):
    program, step, *_, events, _ = traced
    compiles = [e for e in events if e.get("cat") == "compile"]
    assert len(compiles) == step.compilations > 0
    counters = {e["name"] for e in events if e["ph"] == "C"}
    assert counters == {f"rank {r} live bytes" for r in range(program.num_ranks)}
    assert all(e["args"]["bytes"] >= 0 for e in events if e["ph"] == "C")


def test_device_spans_on_a_rank_do_not_overlap(traced):
    *_, events, _ = traced
    per_rank: dict[int, list[tuple[float, float]]] = {}
    for e in events:
        if e["ph"] == "X" and e.get("cat") in ("task", "transfer"):
            per_rank.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in per_rank.values():
        spans.sort()
        for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
            assert start >= end - 1e-6


def test_traced_results_equal_untraced_and_jit(traced):
    _, step, params, batch, outputs, _, _ = traced
    untraced = step(step(params, batch)[0], batch)
    reference = jax.jit(mlp_train_step)(jax.jit(mlp_train_step)(params, batch)[0], batch)
    toolkit.assert_same_program(outputs, untraced)  # tracing runs the same programs
    toolkit.assert_matches_reference(outputs, reference, toolkit.SEVERAL_STEPS)


def test_tracing_off_leaves_the_dispatch_code_unchanged(traced, monkeypatch):
    _, step, params, batch, _, _, source_before = traced
    plan = step.executable
    assert trace_module.ACTIVE is None
    assert plan.dispatch_source() == source_before
    ops_before = list(plan.dispatch.ops)

    def fail(*args, **kwargs):
        raise AssertionError("the tracer was called with tracing off")

    monkeypatch.setattr(trace_module.TraceRecorder, "wrap", fail)
    step(params, batch)
    assert list(plan.dispatch.ops) == ops_before and all(
        a is b for a, b in zip(plan.dispatch.ops, ops_before, strict=True)
    )
    assert plan.dispatch_source() == source_before


def test_works_inside_jax_profiler_trace(traced, tmp_path):
    _, step, params, batch, _, _, _ = traced
    path = tmp_path / "inner.json"
    with jax.profiler.trace(str(tmp_path / "profile")):
        with program_trace(path, device_time=False):
            jax.block_until_ready(step(params, batch))
    with open(path) as handle:
        events = json.load(handle)["traceEvents"]
    assert sum(1 for e in events if e.get("cat") == "task") == len(_runs(step.program.plan))
    assert any(files for _, _, files in os.walk(tmp_path / "profile"))


def test_merge_gives_each_process_its_events(traced, tmp_path):
    *_, events, _ = traced
    paths = []
    for process in range(2):
        moved = [{**e, "pid": process} for e in events]
        paths.append(tmp_path / f"step.process{process}.json")
        paths[-1].write_text(json.dumps({"traceEvents": moved}))
    out = tmp_path / "merged.json"
    assert trace_cli.main(["merge", str(out), *map(str, paths)]) == 0
    merged = json.loads(out.read_text())["traceEvents"]
    assert len(merged) == 2 * len(events)
    assert Counter(e["pid"] for e in merged) == {0: len(events), 1: len(events)}


def test_merge_rejects_a_file_that_is_not_a_trace(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"events": []}')
    with pytest.raises(ValueError, match="is not a Chrome trace"):
        merge_traces([bad])
    missing = tmp_path / "missing.json"
    with pytest.raises(ValueError, match="cannot read trace"):
        merge_traces([missing])


def test_compile_progress_names_every_program_and_the_slowest(traced):
    _, step, *_ = traced
    lines, n = step.progress_lines, step.compilations
    assert lines[0].startswith(f"compiling {n} stage programs: 0 done, {n} left after ")
    assert len(lines) == n + 2
    ways = r"(compiled|loaded from the persistent compilation cache|reused from memory \(.*\))"
    assert re.match(f"{ways} 1/{n} stage programs: ", lines[1])
    closing = re.match(
        r"(\d+) stage programs ready in [\d.]+ s: (.*); slowest: (\S+) \(", lines[-1]
    )
    assert int(closing.group(1)) == n
    counts = {
        way: int(count)
        for count, way in re.findall(r"(\d+) ([a-z][^,]*?)(?:, |$)", closing.group(2))
    }
    assert sum(counts.values()) == n
    for way, count in counts.items():
        assert count == sum(line.startswith(f"{way} ") for line in lines[1:-1]), (way, lines)
    found = [re.search(r": (\S+) \(([\d.]+) s\)", line) for line in lines[1:-1]]
    times = {m.group(1): float(m.group(2)) for m in found}
    assert times[closing.group(3)] == max(times.values())


def test_compile_progress_is_silent_when_switched_off(monkeypatch):
    monkeypatch.setenv("JAXPP_MLIR_PROGRESS", "0")
    assert CompileProgress.start(100) is None


def test_summary_and_repr(traced):
    program, step, *_ = traced
    runs = registry.count(program.plan.instructions)[run.KIND]
    recvs = [i for i in program.plan.instructions if i.kind == receive.KIND]
    moved = sum(int(np.prod(r.spec.shape)) * 4 for r in recvs)
    assert repr(program) == (
        f"PartitionedProgram(4 stages on 4 ranks, Std1F1B(num_stages=4), "
        f"{len(program.stage_modules)} stage functions)"
    )
    text = program.summary()
    assert text.splitlines()[0] == repr(program)
    assert "schedule: Std1F1B(num_stages=4), 4 microbatches" in text
    for rank in range(4):
        assert f"rank {rank} [cpu:{program.mesh.rank_devices(rank)[0].id}]: stages [{rank}]" in text
    assert f"per step: {runs} tasks, {len(recvs)} transfers moving {moved / 1024:.1f} KiB" in text
    simulated = program.schedule.simulate(4)
    assert f"makespan {simulated.makespan:g}" in text
    assert f"bubble {simulated.bubble_fraction:.1%}" in text
    assert f"executables: {len(program.plan.executables)} (" in text
    sizes = stage_bytes(program.plan, 4)
    weight = WIDTH * WIDTH * 4
    assert all(entry["param_bytes"] >= weight for entry in sizes)
    # One microbatch's forward of a middle stage keeps at least its 2 x WIDTH output.
    assert sizes[1]["activation_bytes"] >= 2 * WIDTH * 4


def test_live_bytes_end_with_the_outputs_each_rank_holds(traced):
    program, *_, events, _ = traced
    plan = program.plan
    last: dict[str, int] = {}
    for e in sorted((e for e in events if e["ph"] == "C"), key=lambda e: e["ts"]):
        last[e["name"]] = e["args"]["bytes"]
    held = {(out.rank, out.value): int(np.prod(out.spec.shape)) * 4 for out in plan.outputs}
    peaks = program.peak_bytes_per_rank()
    for rank in range(program.num_ranks):
        expected = sum(size for (r, _), size in held.items() if r == rank)
        assert last[f"rank {rank} live bytes"] == expected
        assert (
            max(e["args"]["bytes"] for e in events if e.get("name") == f"rank {rank} live bytes")
            <= peaks[rank]
        )


def test_merge_command_reports_a_bad_input(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    assert trace_cli.main(["merge", str(tmp_path / "out.json"), str(bad)]) == 1
    assert "cannot read trace" in capsys.readouterr().err
    assert not (tmp_path / "out.json").exists()


def test_each_process_writes_its_own_file(traced, tmp_path, monkeypatch):
    _, step, params, batch, *_ = traced
    monkeypatch.setattr(trace_module.jax, "process_count", lambda: 2)
    monkeypatch.setattr(trace_module.jax, "process_index", lambda: 1)
    with program_trace(tmp_path / "step.json", device_time=False) as recorder:
        jax.block_until_ready(step(params, batch))
    assert recorder.path == str(tmp_path / "step.process1.json")
    assert not (tmp_path / "step.json").exists()
    events = json.loads((tmp_path / "step.process1.json").read_text())["traceEvents"]
    assert {e["pid"] for e in events} == {1}
