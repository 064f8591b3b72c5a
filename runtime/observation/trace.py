"""Recording a timeline of real pipeline steps as a Chrome/Perfetto trace.

``with program_trace("step.json"):`` around calls of a compiled program writes,
when the block ends, a JSON trace (``chrome://tracing``, ui.perfetto.dev) with:

- one track per rank (``pid`` = the process, ``tid`` = the rank) holding one span
  per task (stage, kind, microbatch in ``args``) and one per receive, timed on the
  device: a helper thread per rank waits for each operation's outputs and marks
  the moment they are ready; a span starts at the latest of its dispatch, the end
  of the rank's previous span and (a receive) the moment the sent value was ready
  on the sender (an estimate: a task may still wait for an input);
- a host track per process with the dispatch of every operation;
- flow arrows from each send to its receive, with the bytes moved;
- compile spans (when compiling inside the block), on a compile track;
- a ``live bytes`` counter per rank (the runtime's own buffers after each
  operation, from ``live_bytes_after``; temporaries inside executables are not
  counted).

Tracing off costs one global read per call: ``CompiledPlan`` checks ``ACTIVE``
once and, when it is ``None``, runs its generated dispatch code unchanged. On,
each operation costs a few microseconds of host time and the helper threads
keep each output alive until it is ready. It works inside ``jax.profiler.trace``
(the two do not share state). With several processes each process writes
``<stem>.process<N>.json``; ``python -m jaxpp_mlir.trace merge OUT IN...``
merges them into one file (a transfer between processes shows as a span on both
sides, not as an arrow).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import queue
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax

from ..plan import Recv, Send
from .trace_files import merge_traces, write_trace  # noqa: F401  (merge_traces: public here)
from .trace_ops import OpInfo as _OpInfo
from .trace_ops import (  # noqa: F401  (live_bytes_after, task_fields: public here too)
    describe_ops,
    live_bytes_after,
    spec_bytes,
    task_fields,
)

logger = logging.getLogger("jaxpp_mlir.runtime.observation.trace")

#: The recorder of the innermost ``program_trace`` block, or ``None`` (tracing off).
ACTIVE: TraceRecorder | None = None

#: Track ids beyond the ranks' own.
HOST_TID = 10_000
COMPILE_TID = 10_001

# CompiledPlan -> its operations described (describe_ops), kept while the plan lives.
_DESCRIBED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

_WAIT_SECONDS = 600.0


def _now_us() -> float:
    return time.time_ns() / 1000.0


@dataclasses.dataclass
class _Span:
    rank: int
    name: str
    category: str
    args: dict[str, Any]
    dispatch_start: float
    dispatch_end: float
    ready: float = 0.0
    recvs: tuple[Recv, ...] = ()
    sends: tuple[Send, ...] = ()


class _RankWatcher:
    """A thread that waits, in order, for each operation's outputs on one rank."""

    def __init__(self, rank: int):
        self.jobs: queue.Queue = queue.Queue()
        self.thread = threading.Thread(
            target=self._loop, name=f"jaxpp-trace-rank{rank}", daemon=True
        )
        self.thread.start()

    def _loop(self) -> None:
        while True:
            job = self.jobs.get()
            if job is None:
                return
            span, arrays = job
            for array in arrays:
                try:
                    array.block_until_ready()
                except Exception:  # donated or deleted since: ready by then
                    pass
            span.ready = _now_us()

    def close(self) -> None:
        self.jobs.put(None)
        self.thread.join(_WAIT_SECONDS)
        if self.thread.is_alive():
            logger.warning("a trace helper thread did not finish within %.0f s", _WAIT_SECONDS)


class TraceRecorder:
    """Collects spans of the calls made while it is ``ACTIVE``; ``events()`` renders them."""

    def __init__(self, process: int = 0, *, device_time: bool = True):
        self.process = process
        self.device_time = device_time
        self.spans: list[_Span] = []
        self.steps: list[tuple[float, float, int]] = []  # (start, dispatch end, first span)
        self.counters: list[tuple[float, int, int]] = []  # (time, rank, live bytes)
        self.compiles: list[tuple[str, float, float]] = []
        self._wrapped: dict[tuple[int, int], tuple[Any, list[Callable]]] = {}
        self._step_start = 0.0
        self._first_span = 0
        self._watchers: dict[int, _RankWatcher] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------- recording
    def record_compile(self, name: str, start_us: float, end_us: float) -> None:
        with self._lock:
            self.compiles.append((name, start_us, end_us))

    def wrap(self, plan: Any, ops: Sequence[Callable[[list], None]]) -> list[Callable]:
        """``ops`` of ``plan`` (a ``CompiledPlan``), each wrapped to record its span.

        The wrappers are made once per plan and list of operations, then reused.
        """
        self._step_start = _now_us()
        self._first_span = len(self.spans)
        key = (id(plan), len(ops))
        cached = self._wrapped.get(key)
        if cached is not None and cached[0] is plan:
            return cached[1]
        infos = self._describe(plan)
        wrapped = [self._traced(op, info) for op, info in zip(ops, infos[: len(ops)], strict=True)]
        if wrapped:
            last = wrapped[-1]

            def closing(env: list, _last=last) -> None:
                _last(env)
                self.steps.append((self._step_start, _now_us(), self._first_span))

            closing.what = last.what  # type: ignore[attr-defined]
            wrapped[-1] = closing
        self._wrapped[key] = (plan, wrapped)
        return wrapped

    def _traced(self, op: Callable, info: _OpInfo):
        spans, counters = self.spans, self.counters
        watcher = self._watcher(info.rank) if self.device_time else None
        live = (info.rank, info.live_after)

        def traced(env: list) -> None:
            begin = _now_us()
            op(env)
            end = _now_us()
            span = _Span(
                info.rank, info.name, info.kind, info.args, begin, end, end, info.recvs, info.sends
            )
            spans.append(span)
            arrays = [env[s] for s in info.output_slots if env[s] is not None]
            if watcher is not None and arrays:
                watcher.jobs.put((span, arrays))
            counters.append((end, *live))

        traced.what = op.what  # type: ignore[attr-defined]
        return traced

    def _watcher(self, rank: int) -> _RankWatcher:
        if rank not in self._watchers:
            self._watchers[rank] = _RankWatcher(rank)
        return self._watchers[rank]

    def _describe(self, plan: Any) -> list[_OpInfo]:
        """Per generated operation of ``plan``: its kind, rank, outputs and transfers
        (worked out once per plan, for every recorder)."""
        infos = _DESCRIBED.get(plan)
        if infos is None:
            infos = _DESCRIBED[plan] = describe_ops(plan.dispatch)
        return infos

    def finish(self) -> None:
        """Waits for the helper threads: every span then has its ready time."""
        for watcher in self._watchers.values():
            watcher.close()
        self._watchers.clear()

    # ------------------------------------------------------------- rendering
    def events(self) -> list[dict[str, Any]]:
        """The Chrome trace events of everything recorded (call ``finish`` first)."""
        pid = self.process
        events: list[dict[str, Any]] = [
            _meta("process_name", pid, None, f"process {pid}"),
            _meta("thread_name", pid, HOST_TID, "host dispatch"),
        ]
        ranks = sorted({span.rank for span in self.spans})
        for rank in ranks:
            events.append(_meta("thread_name", pid, rank, f"rank {rank}"))
            events.append(_meta("thread_sort_index", pid, rank, rank, key="sort_index"))
        device_span, sent_at = self._device_spans()
        step_of = _step_index(self.steps, len(self.spans))
        for index, span in enumerate(self.spans):
            events.append(
                {
                    "name": span.name,
                    "cat": "dispatch",
                    "ph": "X",
                    "ts": span.dispatch_start,
                    "dur": max(span.dispatch_end - span.dispatch_start, 0.001),
                    "pid": pid,
                    "tid": HOST_TID,
                    "args": {"rank": span.rank},
                }
            )
            if index not in device_span:
                continue
            begin, end = device_span[index]
            events.append(
                {
                    "name": span.name,
                    "cat": "task" if span.category == "run" else "transfer",
                    "ph": "X",
                    "ts": begin,
                    "dur": end - begin,
                    "pid": pid,
                    "tid": span.rank,
                    "args": {
                        **span.args,
                        "step": step_of[index],
                        "dispatch_us": span.dispatch_end - span.dispatch_start,
                    },
                }
            )
        events += self._flows(device_span, sent_at)
        for name, start, end in self.compiles:
            events.append(
                {
                    "name": f"compile {name}",
                    "cat": "compile",
                    "ph": "X",
                    "ts": start,
                    "dur": end - start,
                    "pid": pid,
                    "tid": COMPILE_TID,
                }
            )
        if self.compiles:
            events.append(_meta("thread_name", pid, COMPILE_TID, "compile"))
        for number, (start, dispatched, _) in enumerate(self.steps):
            events.append(
                {
                    "name": f"step {number} dispatch",
                    "cat": "step",
                    "ph": "X",
                    "ts": start,
                    "dur": dispatched - start,
                    "pid": pid,
                    "tid": HOST_TID,
                }
            )
        for ts, rank, live in self.counters:
            events.append(
                {
                    "name": f"rank {rank} live bytes",
                    "cat": "memory",
                    "ph": "C",
                    "ts": ts,
                    "pid": pid,
                    "args": {"bytes": live},
                }
            )
        return events

    def _device_spans(
        self,
    ) -> tuple[dict[int, tuple[float, float]], dict[tuple[int, int], list[tuple[float, int]]]]:
        """Device ``(begin, end)`` per span index of work on a rank, and per (channel, step)
        the sends on it as ``(time the sent value was ready, sender rank)``.

        A span begins when it was dispatched, when its rank's previous span ended, and
        (a receive) when the value it receives was ready on the sender, whichever is
        latest; it ends when its outputs were ready.
        """
        device_span: dict[int, tuple[float, float]] = {}
        sent_at: dict[tuple[int, int], list[tuple[float, int]]] = {}
        rank_free: dict[int, float] = {}
        last_on_rank: dict[int, int] = {}
        step_of = _step_index(self.steps, len(self.spans))
        for index, span in enumerate(self.spans):
            step = step_of[index]
            for send in span.sends:
                producer = last_on_rank.get(send.rank)
                ready = device_span[producer][1] if producer is not None else span.dispatch_end
                sent_at.setdefault((send.channel, step), []).append((ready, send.rank))
            if span.category in ("send", "free"):
                continue
            begin = max(span.dispatch_start, rank_free.get(span.rank, 0.0))
            for recv in span.recvs:
                sends = sent_at.get((recv.channel, step))
                if sends:
                    begin = max(begin, sends[0][0])
            end = max(span.ready, begin + 0.001)
            rank_free[span.rank] = end
            last_on_rank[span.rank] = index
            device_span[index] = (begin, end)
        return device_span, sent_at

    def _flows(
        self,
        device_span: dict[int, tuple[float, float]],
        sent_at: dict[tuple[int, int], list[tuple[float, int]]],
    ) -> list[dict[str, Any]]:
        """A flow arrow per transfer: from the sender's task that made the value (ending
        inside it) to the receive's span on the receiving rank."""
        pid = self.process
        events: list[dict[str, Any]] = []
        step_of = _step_index(self.steps, len(self.spans))
        flow_id = self.process * 10_000_000
        pending = {key: list(value) for key, value in sent_at.items()}
        for index, span in enumerate(self.spans):
            for recv in span.recvs:
                begin, end = device_span.get(index, (span.dispatch_start, span.dispatch_end))
                sends = pending.get((recv.channel, step_of[index]))
                flow_id += 1
                common = {"name": "transfer", "cat": "transfer", "id": flow_id, "pid": pid}
                bytes_moved = spec_bytes(recv.spec)
                if sends:
                    ready, sender = sends.pop(0)
                    events.append(
                        {**common, "ph": "s", "ts": ready - 0.001, "tid": sender,
                         "args": {"bytes": bytes_moved, "channel": recv.channel}}
                    )  # fmt: skip
                events.append(
                    {**common, "ph": "f", "bp": "e", "ts": begin + (end - begin) / 2,
                     "tid": recv.rank,
                     "args": {"bytes": bytes_moved, "channel": recv.channel,
                              "from_rank": recv.peer, "to_rank": recv.rank}}
                )  # fmt: skip
        return events

    def write(self, path: str | os.PathLike) -> str:
        """Writes the trace JSON to ``path``; returns the path."""
        return write_trace(path, {"traceEvents": self.events(), "displayTimeUnit": "ms"})


def _step_index(steps: list[tuple[float, float, int]], num_spans: int) -> list[int]:
    """Per span, the number of the step (call) it belongs to."""
    result = [0] * num_spans
    starts = [first for _, _, first in steps]
    step = 0
    for index in range(num_spans):
        while step + 1 < len(starts) and index >= starts[step + 1]:
            step += 1
        result[index] = step
    return result


def _meta(name: str, pid: int, tid: int | None, value: Any, key: str = "name") -> dict:
    event: dict[str, Any] = {"name": name, "ph": "M", "pid": pid, "args": {key: value}}
    if tid is not None:
        event["tid"] = tid
    return event


@contextlib.contextmanager
def program_trace(path: str | os.PathLike, *, device_time: bool = True) -> Iterator[TraceRecorder]:
    """Records every call of a compiled program inside the block; writes ``path`` at exit.

    ``device_time=False`` skips the helper threads: spans are then dispatch times.
    With several processes each writes ``<stem>.process<N><suffix>`` next to ``path``.
    """
    global ACTIVE
    process = jax.process_index()
    recorder = TraceRecorder(process, device_time=device_time)
    outer, ACTIVE = ACTIVE, recorder
    target = str(path)
    if jax.process_count() > 1:
        stem, suffix = os.path.splitext(target)
        target = f"{stem}.process{process}{suffix or '.json'}"
    try:
        yield recorder
    except BaseException as e:  # the block's own error goes on, whatever the trace does
        ACTIVE = outer
        try:
            recorder.finish()
            recorder.write(target)
        except Exception as trace_error:  # noqa: BLE001 - never hides the block's error
            logger.error("the trace %s was not written: %s", target, trace_error)
            e.add_note(f"(jaxpp_mlir: the trace {target} was not written: {trace_error})")
        raise
    ACTIVE = outer
    recorder.finish()
    recorder.write(target)
    recorder.path = target  # type: ignore[attr-defined]
