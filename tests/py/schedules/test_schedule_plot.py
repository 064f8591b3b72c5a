"""Gantt charts of planned and measured schedules (schedules/plot.py)."""

from __future__ import annotations

import struct

import pytest

import jaxpp_mlir as pp
from jaxpp_mlir.schedules import KINDS
from jaxpp_mlir.schedules.plot import (
    gantt_from_simulation,
    gantt_from_trace,
    plot_planned_vs_measured,
    plot_trace,
)

pytest.importorskip("matplotlib")


def png_size(path) -> tuple[int, int]:
    with open(path, "rb") as handle:
        header = handle.read(24)
    assert header[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG file"
    return struct.unpack(">II", header[16:24])


@pytest.mark.parametrize(
    "schedule, num_microbatches", [(pp.Std1F1B(4), 8), (pp.ZeroBubble(4), 8), (pp.GPipe(2), 3)]
)
def test_schedule_plot_writes_a_png_of_the_expected_size(schedule, num_microbatches, tmp_path):
    path = tmp_path / "schedule.png"
    schedule.plot(num_microbatches, path=path, width=10, row_height=0.5, dpi=80)
    ranks = schedule.mpmd_dim
    assert png_size(path) == (10 * 80, round((1.2 + 0.5 * ranks + 0.5) * 80))


def test_gantt_of_a_simulation_has_every_task_and_its_bubble():
    schedule = pp.Std1F1B(4)
    result = schedule.simulate(8)
    gantt = gantt_from_simulation(result, "planned")
    assert len(gantt.bars) == sum(len(item.parts) for row in schedule.tasks(8) for item in row)
    assert gantt.makespan == result.makespan
    assert gantt.bubble_fraction == pytest.approx(result.bubble_fraction)
    assert {bar.kind for bar in gantt.bars} == {"fwd", "bwd"}


def _span(rank, start_us, dur_us, step, **args):
    return {"ph": "X", "cat": "task", "pid": 0, "tid": rank, "ts": start_us, "dur": dur_us,
            "name": "t", "args": {"step": step, **args}}  # fmt: skip


# Two ranks, step 1: rank 0 busy 0-2 ms and 3-4 ms, rank 1 busy 1-3 ms (a fused
# forward+backward split in two halves). Makespan 4 ms; busy 3 + 2 of 2 x 4: bubble 3/8.
TRACE = {
    "traceEvents": [
        _span(0, 0.0, 500.0, 0, kind="fwd", stage=0, microbatch=0),  # step 0: ignored
        _span(0, 10_000.0, 2000.0, 1, kind="fwd", stage=0, microbatch=0),
        _span(1, 11_000.0, 2000.0, 1, tasks=[
            {"kind": "fwd", "stage": 1, "microbatch": 0},
            {"kind": "bwd", "stage": 1, "microbatch": 0},
        ]),
        _span(0, 13_000.0, 1000.0, 1, kind="bwd", stage=0, microbatch=0),
        {"ph": "X", "cat": "transfer", "pid": 0, "tid": 1, "ts": 10_500.0, "dur": 100.0,
         "name": "recv 64 B", "args": {"step": 1}},
    ]
}  # fmt: skip


def test_gantt_of_a_trace_takes_one_step_in_milliseconds():
    gantt = gantt_from_trace(TRACE)  # the last step
    assert gantt.num_ranks == 2
    assert gantt.makespan == pytest.approx(4.0)
    assert gantt.bubble_fraction == pytest.approx(1 - (3.0 + 2.1) / 8.0)
    fused = sorted((b.start, b.end, b.kind) for b in gantt.bars if b.rank == 1 and b.kind in KINDS)
    assert fused == [(pytest.approx(1.0), pytest.approx(2.0), "fwd"),
                     (pytest.approx(2.0), pytest.approx(3.0), "bwd")]  # fmt: skip
    assert [b.kind for b in gantt.bars if b.label == "recv 64 B"] == ["transfer"]
    first = gantt_from_trace(TRACE, step=0)
    assert first.makespan == pytest.approx(0.5)


def test_a_trace_without_steps_is_rejected():
    with pytest.raises(ValueError, match="records no step"):
        gantt_from_trace({"traceEvents": []})
    with pytest.raises(ValueError, match="there is no step 5"):
        gantt_from_trace(TRACE, step=5)


def test_planned_and_measured_side_by_side(tmp_path):
    path = tmp_path / "both.png"
    plot_planned_vs_measured(pp.Std1F1B(2), 1, TRACE, path=path, width=8, row_height=0.5, dpi=50)
    # Two panels of 2 ranks: (1.2 + 2 x 0.5) each, plus the legend's 0.5 inch.
    assert png_size(path) == (8 * 50, round((2 * (1.2 + 1.0) + 0.5) * 50))
    single = tmp_path / "measured.png"
    plot_trace(TRACE, path=single, width=8, row_height=0.5, dpi=50)
    assert png_size(single) == (400, round((1.2 + 1.0 + 0.5) * 50))
