"""Trace files read and written through one checked path, naming the file at fault."""

from __future__ import annotations

import json
import os
from typing import Any


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
