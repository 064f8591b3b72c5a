"""The measured timeline names every span: a legend entry per colour drawn, labels on the
spans, and a note saying the time is device time."""

from __future__ import annotations

import pytest

from jaxpp_mlir.schedules.plot import MEASURED_NOTE, gantt_from_trace, plot_trace

pytest.importorskip("matplotlib")


def _span(cat, rank, start_us, dur_us, name, **args):
    return {"ph": "X", "cat": cat, "pid": 0, "tid": rank, "ts": start_us, "dur": dur_us,
            "name": name, "args": {"step": 0, **args}}  # fmt: skip


# One step on 2 ranks: code before the loop on rank 0, a forward on each rank, the
# receive of rank 1 between them.
TRACE = {
    "traceEvents": [
        _span("task", 0, 0.0, 1000.0, "pre0_r0"),
        _span("task", 0, 1000.0, 2000.0, "stage0_fwd", kind="fwd", stage=0, microbatch=0),
        _span("transfer", 1, 3000.0, 500.0, "recv 64 B"),
        _span("task", 1, 3500.0, 2000.0, "stage1_fwd", kind="fwd", stage=1, microbatch=0),
    ]
}  # fmt: skip


def test_every_span_has_a_named_kind():
    gantt = gantt_from_trace(TRACE)
    kinds = {bar.label: bar.kind for bar in gantt.bars}
    assert kinds == {"pre0_r0": "outer", "F0.0": "fwd", "recv 64 B": "transfer", "F1.0": "fwd"}
    assert gantt.note == MEASURED_NOTE


def test_legend_labels_and_note_of_the_figure():
    figure = plot_trace(TRACE)
    (legend,) = figure.legends
    assert [t.get_text() for t in legend.get_texts()] == [
        "forward",
        "receive (transfer)",
        "code outside the loop",
        "idle",
    ]
    (ax,) = figure.axes
    assert ax.get_title().endswith("\n" + MEASURED_NOTE)
    assert "device time" in MEASURED_NOTE and "host" in MEASURED_NOTE
    labels = {t.get_text() for t in ax.texts}
    assert labels == {"pre0_r0", "F0.0", "recv 64 B", "F1.0"}
