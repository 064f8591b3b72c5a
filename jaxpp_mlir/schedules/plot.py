"""Gantt charts of schedules: simulated (planned), recorded (measured), or both.

Ranks are rows, time runs left to right; forward, full backward, input-gradient
and weight-gradient tasks have their own colours, and so do, in a measured step,
receives (``transfer``) and the code before and after the microbatch loop
(``outer``); idle time is the hatched lane behind the tasks. The legend names
every colour; a measured panel says what its time is (device time: from when a
rank could start an operation to when its outputs were ready; the host's dispatch
is not drawn). The title gives the makespan and the bubble fraction (idle share of
ranks x makespan). Needs matplotlib (``pip install jaxpp_mlir[plot]``).

``plot_schedule(schedule, n, path=...)`` draws the unit-cost-free default
simulation (``Schedule.plot`` calls it); ``plot_trace(trace_path, path=...)`` draws
one step of a trace recorded with ``program_trace``; ``plot_planned_vs_measured``
draws the two one above the other, on the same rank rows.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from jaxpp_mlir.runtime import records
from jaxpp_mlir.schedules.simulate import Costs, SimulationResult
from jaxpp_mlir.schedules.task import BWD, BWD_I, BWD_W, FWD

#: Kinds of the bars of a measured step that are not pipeline tasks.
TRANSFER = "transfer"
OUTER = "outer"
COLOURS = {
    FWD: "#4C72B0",
    BWD: "#55A868",
    BWD_I: "#DD8452",
    BWD_W: "#8172B3",
    TRANSFER: "#E5AE38",
    OUTER: "#8C8C8C",
    None: "#B0B0B0",
}
_NAMES = {
    FWD: "forward",
    BWD: "backward",
    BWD_I: "input grad",
    BWD_W: "weight grad",
    TRANSFER: "receive (transfer)",
    OUTER: "code outside the loop",
}
#: What the time axis of a measured panel is.
MEASURED_NOTE = (
    "device time per operation: from when the rank could start it (dispatched, previous "
    "span done, input sent) to when its outputs were ready; host dispatch not drawn"
)
_SHORT = {FWD: "F", BWD: "B", BWD_I: "I", BWD_W: "W"}


@records.frozen
class Bar:
    """One task on a rank's row: ``[start, end)``, its kind (``None``: other work), label."""

    rank: int
    start: float
    end: float
    kind: str | None
    label: str


@records.frozen
class Gantt:
    """Bars of one run of a schedule, with its makespan and bubble fraction; ``note`` says
    what the time axis measures."""

    title: str
    num_ranks: int
    bars: tuple[Bar, ...]
    unit: str = ""
    note: str = ""

    @property
    def makespan(self) -> float:
        if not self.bars:
            return 0.0
        return max(b.end for b in self.bars) - min(b.start for b in self.bars)

    @property
    def bubble_fraction(self) -> float:
        span = self.makespan
        if span <= 0:
            return 0.0
        busy = sum(_union_length([(b.start, b.end) for b in self.bars if b.rank == r])
                   for r in range(self.num_ranks))  # fmt: skip
        return 1.0 - busy / (self.num_ranks * span)


def _union_length(intervals: list[tuple[float, float]]) -> float:
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


def gantt_from_simulation(result: SimulationResult, title: str) -> Gantt:
    """The bars of a simulated run (each part of a fused task as its own bar)."""
    bars = []
    for rank, timeline in enumerate(result.timeline):
        for _, _, item in timeline:
            for task in item.parts:
                bars.append(
                    Bar(rank, result.start_times[task], result.end_times[task], task.kind,
                        f"{_SHORT[task.kind]}{task.stage}.{task.microbatch}")
                )  # fmt: skip
    return Gantt(title, result.num_ranks, tuple(bars))


def load_trace_events(trace: str | os.PathLike | dict) -> list[dict[str, Any]]:
    """The events of a Chrome trace file (or an already loaded trace dict)."""
    if isinstance(trace, dict):
        data = trace
    else:
        with open(trace) as handle:
            data = json.load(handle)
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise ValueError("not a Chrome trace: no 'traceEvents' list")
    return events


def gantt_from_trace(
    trace: str | os.PathLike | dict,
    *,
    step: int = -1,
    title: str = "measured",
    pid: int | None = None,
) -> Gantt:
    """The device-timed spans of one step (default: the last) of a recorded trace, in ms.

    Pipeline tasks keep their kind; fused tasks are split evenly among their parts;
    receives are ``TRANSFER`` bars, the code outside the loop ``OUTER`` bars, each
    labelled with its span's name.
    """
    events = load_trace_events(trace)
    spans = [
        e for e in events
        if e.get("ph") == "X" and e.get("cat") in ("task", "transfer")
        and "step" in e.get("args", {}) and (pid is None or e.get("pid") == pid)
    ]  # fmt: skip
    steps = sorted({e["args"]["step"] for e in spans})
    if not steps:
        raise ValueError("the trace records no step (was a compiled program called?)")
    try:
        chosen = steps[step]
    except IndexError:
        raise ValueError(f"the trace records {len(steps)} steps; there is no step {step}") from None
    spans = [e for e in spans if e["args"]["step"] == chosen]
    ranks = {(e.get("pid", 0), e["tid"]) for e in spans}
    row_of = {key: row for row, key in enumerate(sorted(ranks))}
    origin = min(e["ts"] for e in spans)
    bars = []
    for e in spans:
        row = row_of[(e.get("pid", 0), e["tid"])]
        start, stop = (e["ts"] - origin) / 1000.0, (e["ts"] + e["dur"] - origin) / 1000.0
        args = e.get("args", {})
        parts = args.get("tasks") or ([args] if "kind" in args else [])
        if not parts:
            kind = TRANSFER if e.get("cat") == "transfer" else OUTER
            bars.append(Bar(row, start, stop, kind, e.get("name", "")))
            continue
        width = (stop - start) / len(parts)
        for k, part in enumerate(parts):
            kind = part["kind"]
            bars.append(
                Bar(row, start + k * width, start + (k + 1) * width, kind,
                    f"{_SHORT.get(kind, '?')}{part['stage']}.{part['microbatch']}")
            )  # fmt: skip
    return Gantt(title, len(row_of), tuple(bars), unit="ms", note=MEASURED_NOTE)


def draw(ax: Any, gantt: Gantt, *, labels: bool = True) -> None:
    """Draws ``gantt`` on a matplotlib axes."""
    span = gantt.makespan
    origin = min((b.start for b in gantt.bars), default=0.0)
    for rank in range(gantt.num_ranks):
        ax.barh(rank, span, left=origin, height=0.8, color="#F4F4F4", hatch="//",
                edgecolor="#D8D8D8", linewidth=0)  # fmt: skip
    for bar in gantt.bars:
        colour = COLOURS.get(bar.kind, COLOURS[None])
        ax.barh(bar.rank, bar.end - bar.start, left=bar.start, height=0.8,
                color=colour, edgecolor="white", linewidth=0.5)  # fmt: skip
        if labels and bar.kind is not None and span > 0 and (bar.end - bar.start) / span > 0.02:
            ax.text((bar.start + bar.end) / 2, bar.rank, bar.label, ha="center", va="center",
                    fontsize=6, color="white")  # fmt: skip
    ax.set_yticks(range(gantt.num_ranks))
    ax.set_yticklabels([f"rank {r}" for r in range(gantt.num_ranks)])
    ax.set_ylim(gantt.num_ranks - 0.5, -0.5)
    ax.set_xlabel(f"time ({gantt.unit})" if gantt.unit else "time (simulated units)")
    unit = f" {gantt.unit}" if gantt.unit else ""
    title = f"{gantt.title}: makespan {span:.3g}{unit}, bubble {gantt.bubble_fraction:.1%}"
    ax.set_title(title + (f"\n{gantt.note}" if gantt.note else ""), fontsize=9)


def _legend(fig: Any, gantts: Sequence[Gantt]) -> None:
    from matplotlib.patches import Patch

    present = {bar.kind for gantt in gantts for bar in gantt.bars}
    shown = [k for k in (FWD, BWD, BWD_I, BWD_W, TRANSFER, OUTER) if k in present]
    handles = [Patch(color=COLOURS[k], label=_NAMES[k]) for k in shown]
    handles.append(Patch(facecolor="#F4F4F4", hatch="//", edgecolor="#D8D8D8", label="idle"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)


def render(
    gantts: Sequence[Gantt],
    path: str | os.PathLike | None,
    *,
    width: float = 12.0,
    row_height: float = 0.45,
    dpi: int = 100,
) -> Any:
    """A figure with one panel per Gantt chart, saved to ``path`` (PNG, SVG, PDF...) if given.

    The figure is ``width`` inches wide and, per panel, 1.2 + ``row_height`` per rank
    tall (plus 0.5 for the legend); the PNG has that size times ``dpi`` pixels.
    """
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ImportError("plotting needs matplotlib: pip install 'jaxpp_mlir[plot]'") from e
    heights = [1.2 + row_height * g.num_ranks for g in gantts]
    fig, axes = plt.subplots(
        len(gantts), 1, figsize=(width, sum(heights) + 0.5), squeeze=False,
        gridspec_kw={"height_ratios": heights},
    )  # fmt: skip
    for ax, gantt in zip(axes[:, 0], gantts, strict=True):
        draw(ax, gantt)
    _legend(fig, gantts)
    fig.tight_layout(rect=(0, 0.5 / (sum(heights) + 0.5), 1, 1))
    if path is not None:
        fig.savefig(path, dpi=dpi)
        plt.close(fig)
    return fig


def plot_schedule(
    schedule: Any,
    num_microbatches: int,
    *,
    path: str | os.PathLike | None = None,
    costs: Costs | None = None,
    **figure: Any,
) -> Any:
    """Draws ``schedule`` simulated for ``num_microbatches`` (default costs: B = 2 F)."""
    result = schedule.simulate(num_microbatches, costs=costs)
    return render([gantt_from_simulation(result, f"{schedule!r}, planned")], path, **figure)


def plot_trace(
    trace: str | os.PathLike | dict,
    *,
    path: str | os.PathLike | None = None,
    step: int = -1,
    **figure: Any,
) -> Any:
    """Draws one step (default: the last) of a trace recorded with ``program_trace``."""
    return render([gantt_from_trace(trace, step=step)], path, **figure)


def plot_planned_vs_measured(
    schedule: Any,
    num_microbatches: int,
    trace: str | os.PathLike | dict,
    *,
    path: str | os.PathLike | None = None,
    step: int = -1,
    costs: Costs | None = None,
    **figure: Any,
) -> Any:
    """The simulated schedule above one measured step, rank rows aligned."""
    planned = gantt_from_simulation(
        schedule.simulate(num_microbatches, costs=costs), f"{schedule!r}, planned"
    )
    measured = gantt_from_trace(trace, step=step, title="measured")
    return render([planned, measured], path, **figure)
