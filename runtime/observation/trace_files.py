"""Chrome/Perfetto trace files: the one place a ``Timeline`` becomes trace events
(dicts), and trace files read and written through one checked path naming the file
at fault.

A trace holds, per process (``pid``): one track per rank (``tid`` = the rank) with
a span per task (``args``: executable, label, stage, kind, microbatch, step) and per
receive, flow arrows from each send to its receive (with the bytes), a host track
with the dispatch of every operation and of each step, compile spans on a compile
track, and a ``rank N live bytes`` counter per rank.
"""

from __future__ import annotations

import json
import os
from typing import Any

from .timeline import Flow, HostSpan, TaskSpan, Timeline, TransferSpan

#: Track ids beyond the ranks' own.
HOST_TID = 10_000
COMPILE_TID = 10_001


def chrome_trace(timeline: Timeline) -> dict[str, Any]:
    """``timeline`` as a Chrome trace (``{"traceEvents": [...]}``)."""
    pid = timeline.process
    events: list[dict[str, Any]] = [
        _meta("process_name", pid, None, f"process {pid}"),
        _meta("thread_name", pid, HOST_TID, "host dispatch"),
    ]
    for rank in timeline.ranks:
        events.append(_meta("thread_name", pid, rank, f"rank {rank}"))
        events.append(_meta("thread_sort_index", pid, rank, rank, key="sort_index"))
    for span in timeline.spans:
        if type(span) is HostSpan:
            events.append(
                {"name": span.name, "cat": "dispatch", "ph": "X", "ts": span.start,
                 "dur": max(span.end - span.start, 0.001), "pid": pid, "tid": HOST_TID,
                 "args": {"rank": span.rank}}
            )  # fmt: skip
        elif type(span) is TaskSpan:
            events.append(_device(pid, span, "task", _task_args(span)))
        elif type(span) is TransferSpan:
            args = {"values": span.values, "bytes": span.bytes}
            events.append(_device(pid, span, "transfer", args))
    events += [event for flow in timeline.flows for event in _flow_events(pid, flow)]
    for compile in timeline.compiles:
        events.append(
            {"name": f"compile {compile.name}", "cat": "compile", "ph": "X",
             "ts": compile.start, "dur": compile.end - compile.start, "pid": pid,
             "tid": COMPILE_TID}
        )  # fmt: skip
    if timeline.compiles:
        events.append(_meta("thread_name", pid, COMPILE_TID, "compile"))
    for step in timeline.steps:
        events.append(
            {"name": f"step {step.number} dispatch", "cat": "step", "ph": "X",
             "ts": step.start, "dur": step.end - step.start, "pid": pid, "tid": HOST_TID}
        )  # fmt: skip
    for live in timeline.live_bytes:
        events.append(
            {"name": f"rank {live.rank} live bytes", "cat": "memory", "ph": "C",
             "ts": live.time, "pid": pid, "args": {"bytes": live.bytes}}
        )  # fmt: skip
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def _device(
    pid: int, span: TaskSpan | TransferSpan, category: str, args: dict[str, Any]
) -> dict[str, Any]:
    return {
        "name": span.name,
        "cat": category,
        "ph": "X",
        "ts": span.begin,
        "dur": span.end - span.begin,
        "pid": pid,
        "tid": span.rank,
        "args": {**args, "step": span.step, "dispatch_us": span.dispatch_us},
    }


def _task_args(span: TaskSpan) -> dict[str, Any]:
    args: dict[str, Any] = {"executable": span.executable, "label": span.label}
    parts = []
    for task in span.pipeline_tasks:
        part: dict[str, Any] = {
            "kind": task.kind, "stage": task.stage, "microbatch": task.microbatch
        }  # fmt: skip
        if task.stage in span.stage_names:
            part["stage_name"] = span.stage_names[task.stage]
        parts.append(part)
    if len(parts) == 1:
        args.update(parts[0])
    elif parts:
        args["tasks"] = parts
    return args


def _flow_events(pid: int, flow: Flow) -> list[dict[str, Any]]:
    common = {"name": "transfer", "cat": "transfer", "id": flow.id, "pid": pid}
    events = []
    if flow.sent is not None:
        events.append(
            {**common, "ph": "s", "ts": flow.sent - 0.001, "tid": flow.sender,
             "args": {"bytes": flow.bytes, "channel": flow.channel}}
        )  # fmt: skip
    events.append(
        {**common, "ph": "f", "bp": "e", "ts": flow.received, "tid": flow.receiver,
         "args": {"bytes": flow.bytes, "channel": flow.channel,
                  "from_rank": flow.from_rank, "to_rank": flow.receiver}}
    )  # fmt: skip
    return events


def _meta(name: str, pid: int, tid: int | None, value: Any, key: str = "name") -> dict:
    event: dict[str, Any] = {"name": name, "ph": "M", "pid": pid, "args": {key: value}}
    if tid is not None:
        event["tid"] = tid
    return event


def write_trace(path: str | os.PathLike, trace: dict[str, Any]) -> str:
    """Writes ``trace`` as JSON to ``path``; raises ``OSError`` naming the path."""
    try:
        with open(path, "w") as handle:
            json.dump(trace, handle)
    except OSError as e:
        raise OSError(e.errno, f"cannot write the trace {os.fspath(path)!r}: {e.strerror}") from e
    return str(path)


def read_trace(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The events of the Chrome trace at ``path``; raises ``ValueError`` naming the file."""
    name = repr(os.fspath(path))
    try:
        with open(path, "rb") as handle:
            data = json.loads(handle.read().decode("utf-8"))
    except OSError as e:
        raise ValueError(f"cannot read trace {name}: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise ValueError(f"cannot read trace {name}: byte {e.start} is not UTF-8") from e
    except json.JSONDecodeError as e:
        raise ValueError(f"cannot read trace {name}: not JSON ({e})") from e
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise ValueError(f"{name} is not a Chrome trace (no 'traceEvents' list)")
    events = data["traceEvents"]
    for event in events:
        if not isinstance(event, dict) or not isinstance(event.get("pid"), int):
            raise ValueError(f"{name} holds an event without an integer 'pid': {event!r:.200}")
    return events


def merge_traces(paths: list[str | os.PathLike]) -> dict[str, Any]:
    """One trace holding the events of every file in ``paths``, which must each hold other
    processes (``pid``) than the others: the per-process files of one run. Traces of
    separate runs (each process 0, say) would lay their spans over each other: refused."""
    events: list[dict[str, Any]] = []
    owner: dict[int, str] = {}
    for path in paths:
        found = read_trace(path)
        for pid in sorted({event["pid"] for event in found}):
            if pid in owner:
                raise ValueError(
                    f"trace {os.fspath(path)!r} holds the events of process {pid}, and so does "
                    f"trace {owner[pid]!r}: merge the per-process files of one run "
                    f"(<stem>.process<N>.json), not traces of separate runs"
                )
        owner.update({event["pid"]: os.fspath(path) for event in found})
        events += found
    return {"traceEvents": events, "displayTimeUnit": "ms"}
