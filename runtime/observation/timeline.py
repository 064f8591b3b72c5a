"""What a trace records, as typed spans: tasks, transfers, host dispatch, flows, compiles.

``build_timeline`` turns a recorder's raw records (one per dispatched operation,
with its dispatch and ready times) into a ``Timeline`` of typed spans; the
Chrome/Perfetto exporter (``trace_files.chrome_trace``) writes it out, and
calibration and JaxPP's ``collect_task_times_ms`` read its ``TaskSpan``s.

Device time: a span on a rank begins at the latest of its dispatch, the end of the
rank's previous span and (a receive) the moment the sent value was ready on the
sender (an estimate: a task may still wait for an input); it ends when its outputs
were ready. Times are microseconds since the epoch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from .. import records
from ..plan import TaskRef


@records.frozen
class HostSpan:
    """One operation dispatched by the host (``name``: its title, ``rank``: where)."""

    name: str
    rank: int
    start: float
    end: float


@records.frozen
class DeviceSpan:
    """Work on ``rank`` in call ``step``: device time ``begin``..``end``, dispatched by
    the host from ``dispatch_start`` to ``dispatch_end``."""

    name: str  # F1.0 (F1.0+B2.1 fused; else the label or executable), recv 64 B
    rank: int
    step: int
    begin: float
    end: float
    dispatch_start: float
    dispatch_end: float

    @property
    def dispatch_us(self) -> float:
        return self.dispatch_end - self.dispatch_start


@records.frozen
class TaskSpan(DeviceSpan):
    """One launch: its executable, label and the tasks it runs."""

    executable: str
    label: str  # fwd_1__0, FusedTask(...), or the run's note
    tasks: tuple[TaskRef, ...]
    stage_names: Mapping[int, str]  # the program's named stages

    @property
    def pipeline_tasks(self) -> tuple[TaskRef, ...]:
        """The tasks of a stage for a microbatch it runs (not the code outside the loop)."""
        return tuple(t for t in self.tasks if t.microbatch is not None)


@records.frozen
class TransferSpan(DeviceSpan):
    """Received values landing on a rank (a copy, or a copy into another layout)."""

    values: int  # how many values its group of receives moves
    bytes: int


@records.frozen
class Flow:
    """One transfer: from the sender's value being ready (``sent``, on rank ``sender``;
    None when no send was seen) to the receive on rank ``receiver``."""

    id: int
    channel: int
    bytes: int
    from_rank: int
    receiver: int
    received: float
    sender: int | None = None
    sent: float | None = None


@records.frozen
class CompileSpan:
    name: str
    start: float
    end: float


@records.frozen
class StepSpan:
    """The host dispatch of call ``number`` of a traced program."""

    number: int
    start: float
    end: float


@records.frozen
class LiveBytes:
    """Bytes ``rank`` holds right after an operation dispatched at ``time``."""

    time: float
    rank: int
    bytes: int


Span = HostSpan | TaskSpan | TransferSpan


@records.frozen
class Timeline:
    """Everything one process recorded: ``spans`` in recording order (each operation's
    ``HostSpan``, followed by its device span if it has one), then the rest."""

    process: int
    ranks: tuple[int, ...]
    spans: tuple[Span, ...]
    flows: tuple[Flow, ...]
    compiles: tuple[CompileSpan, ...]
    steps: tuple[StepSpan, ...]
    live_bytes: tuple[LiveBytes, ...]

    @property
    def tasks(self) -> tuple[TaskSpan, ...]:
        return tuple(s for s in self.spans if type(s) is TaskSpan)


@records.frozen
class FlowEnd:
    """A receive an operation completes: its channel, ranks and bytes."""

    channel: int
    from_rank: int
    to_rank: int
    bytes: int


@records.frozen
class OpTrace:
    """What the tracer knows of one generated operation, worked out once per plan."""

    title: str  # its name in traces: F1.0, send, recv 64 B...
    rank: int
    device: str | None  # "task", "transfer" or None (see codegen.OpFacts)
    outputs: tuple[int, ...]
    live_after: int  # bytes its rank holds after it
    sends: tuple[tuple[int, int], ...] = ()  # (channel, rank) of each value it sends
    flows: tuple[FlowEnd, ...] = ()
    values: int = 0  # a group of receives: how many values, how many bytes
    bytes: int = 0
    executable: str = ""
    label: str = ""
    tasks: tuple[TaskRef, ...] = ()
    stage_names: Mapping[int, str] = dataclasses.field(default_factory=dict)


class Record:
    """One dispatched operation: ``trace``, its dispatch times and when it was ready."""

    __slots__ = ("dispatch_end", "dispatch_start", "ready", "trace")

    def __init__(self, trace: OpTrace, start: float, end: float):
        self.trace = trace
        self.dispatch_start = start
        self.dispatch_end = end
        self.ready = end


def build_timeline(
    process: int,
    records: Sequence[Record],
    steps: Sequence[tuple[float, float, int]],
    compiles: Sequence[tuple[str, float, float]],
) -> Timeline:
    """The typed spans of ``records`` (``steps``: each call's start, dispatch end and first
    record; ``compiles``: name, start, end)."""
    step_of = _step_index(steps, len(records))
    device_span, sent_at = _device_spans(records, step_of)
    spans: list[Span] = []
    for index, record in enumerate(records):
        op = record.trace
        spans.append(HostSpan(op.title, op.rank, record.dispatch_start, record.dispatch_end))
        if index not in device_span:
            continue
        begin, end = device_span[index]
        common = (
            op.title, op.rank, step_of[index], begin, end, record.dispatch_start,
            record.dispatch_end,
        )  # fmt: skip
        if op.device == "task":
            spans.append(TaskSpan(*common, op.executable, op.label, op.tasks, op.stage_names))
        else:
            spans.append(TransferSpan(*common, op.values, op.bytes))
    return Timeline(
        process=process,
        ranks=tuple(sorted({record.trace.rank for record in records})),
        spans=tuple(spans),
        flows=tuple(_flows(process, records, step_of, device_span, sent_at)),
        compiles=tuple(CompileSpan(*compile) for compile in compiles),
        steps=tuple(StepSpan(n, start, end) for n, (start, end, _) in enumerate(steps)),
        live_bytes=tuple(
            LiveBytes(r.dispatch_end, r.trace.rank, r.trace.live_after) for r in records
        ),
    )


def _device_spans(
    records: Sequence[Record], step_of: list[int]
) -> tuple[dict[int, tuple[float, float]], dict[tuple[int, int], list[tuple[float, int]]]]:
    """Device ``(begin, end)`` per record index of work on a rank, and per (channel, step)
    the sends on it as ``(time the sent value was ready, sender rank)``."""
    device_span: dict[int, tuple[float, float]] = {}
    sent_at: dict[tuple[int, int], list[tuple[float, int]]] = {}
    rank_free: dict[int, float] = {}
    last_on_rank: dict[int, int] = {}
    for index, record in enumerate(records):
        op, step = record.trace, step_of[index]
        for channel, rank in op.sends:
            producer = last_on_rank.get(rank)
            ready = device_span[producer][1] if producer is not None else record.dispatch_end
            sent_at.setdefault((channel, step), []).append((ready, rank))
        if op.device is None:
            continue
        begin = max(record.dispatch_start, rank_free.get(op.rank, 0.0))
        for flow in op.flows:
            sends = sent_at.get((flow.channel, step))
            if sends:
                begin = max(begin, sends[0][0])
        end = max(record.ready, begin + 0.001)
        rank_free[op.rank] = end
        last_on_rank[op.rank] = index
        device_span[index] = (begin, end)
    return device_span, sent_at


def _flows(
    process: int,
    records: Sequence[Record],
    step_of: list[int],
    device_span: dict[int, tuple[float, float]],
    sent_at: dict[tuple[int, int], list[tuple[float, int]]],
) -> list[Flow]:
    """A flow per transfer: from the sender's value being ready to the middle of the
    receive's span on the receiving rank."""
    flows: list[Flow] = []
    flow_id = process * 10_000_000
    pending = {key: list(value) for key, value in sent_at.items()}
    for index, record in enumerate(records):
        for end_of in record.trace.flows:
            begin, end = device_span.get(index, (record.dispatch_start, record.dispatch_end))
            sends = pending.get((end_of.channel, step_of[index]))
            flow_id += 1
            sender = sent = None
            if sends:
                sent, sender = sends.pop(0)
            flows.append(
                Flow(flow_id, end_of.channel, end_of.bytes, end_of.from_rank, end_of.to_rank,
                     begin + (end - begin) / 2, sender, sent)
            )  # fmt: skip
    return flows


def _step_index(steps: Sequence[tuple[float, float, int]], num_records: int) -> list[int]:
    """Per record, the number of the step (call) it belongs to."""
    result = [0] * num_records
    starts = [first for _, _, first in steps]
    step = 0
    for index in range(num_records):
        while step + 1 < len(starts) and index >= starts[step + 1]:
            step += 1
        result[index] = step
    return result
