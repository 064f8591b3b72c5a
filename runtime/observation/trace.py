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

The recorder keeps one raw record per dispatched operation; ``timeline()`` turns
them into typed spans (``timeline``), which ``trace_files.chrome_trace`` writes as
trace events. Tracing off costs one global read per call: ``CompiledPlan`` checks
``ACTIVE`` once and, when it is ``None``, runs its generated dispatch code
unchanged. On, each operation costs a few microseconds of host time and the
helper threads keep each output alive until it is ready. It works inside ``jax.profiler.trace``
(the two do not share state). With several processes each process writes
``<stem>.process<N>.json``; ``python -m jaxpp_mlir.trace merge OUT IN...``
merges them into one file (a transfer between processes shows as a span on both
sides, not as an arrow).
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import jax

from ..liveness import live_bytes, received_bytes
from ..plan import ExecutionPlan

if TYPE_CHECKING:  # loaded when a trace is taken: the compile and the dispatch read ACTIVE only
    from .timeline import OpTrace, Record, Timeline

logger = logging.getLogger("jaxpp_mlir.runtime.observation.trace")

#: The recorder of the innermost ``program_trace`` block, or ``None`` (tracing off).
ACTIVE: TraceRecorder | None = None

# CompiledPlan -> its operations described (describe_ops), kept while the plan lives.
_DESCRIBED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

_WAIT_SECONDS = 600.0


def _now_us() -> float:
    return time.time_ns() / 1000.0


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
            record, arrays = job
            for array in arrays:
                try:
                    array.block_until_ready()
                except Exception:  # donated or deleted since: ready by then
                    pass
            record.ready = _now_us()

    def close(self) -> None:
        self.jobs.put(None)
        self.thread.join(_WAIT_SECONDS)
        if self.thread.is_alive():
            logger.warning("a trace helper thread did not finish within %.0f s", _WAIT_SECONDS)


class TraceRecorder:
    """Records the operations of the calls made while it is ``ACTIVE``; ``timeline()``
    gives them as typed spans."""

    def __init__(self, process: int = 0, *, device_time: bool = True):
        self.process = process
        self.device_time = device_time
        self.records: list[Record] = []
        self.steps: list[tuple[float, float, int]] = []  # (start, dispatch end, first record)
        self.compiles: list[tuple[str, float, float]] = []
        self._wrapped: dict[tuple[int, int], tuple[Any, list[Callable]]] = {}
        self._step_start = 0.0
        self._first_record = 0
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
        self._first_record = len(self.records)
        key = (id(plan), len(ops))
        cached = self._wrapped.get(key)
        if cached is not None and cached[0] is plan:
            return cached[1]
        traces = _described(plan)
        wrapped = [self._traced(op, trace) for op, trace in zip(ops, traces, strict=False)]
        if wrapped:
            last = wrapped[-1]

            def closing(env: list, _last=last) -> None:
                _last(env)
                self.steps.append((self._step_start, _now_us(), self._first_record))

            closing.what = last.what  # type: ignore[attr-defined]
            wrapped[-1] = closing
        self._wrapped[key] = (plan, wrapped)
        return wrapped

    def _traced(self, op: Callable, trace: OpTrace):
        from .timeline import Record

        records = self.records
        watcher = self._watcher(trace.rank) if self.device_time else None
        outputs = trace.outputs

        def traced(env: list) -> None:
            begin = _now_us()
            op(env)
            record = Record(trace, begin, _now_us())
            records.append(record)
            arrays = [env[s] for s in outputs if env[s] is not None]
            if watcher is not None and arrays:
                watcher.jobs.put((record, arrays))

        traced.what = op.what  # type: ignore[attr-defined]
        return traced

    def _watcher(self, rank: int) -> _RankWatcher:
        if rank not in self._watchers:
            self._watchers[rank] = _RankWatcher(rank)
        return self._watchers[rank]

    def finish(self) -> None:
        """Waits for the helper threads: every record then has its ready time."""
        for watcher in self._watchers.values():
            watcher.close()
        self._watchers.clear()

    # ------------------------------------------------------------- results
    def timeline(self) -> Timeline:
        """Everything recorded, as typed spans (call ``finish`` first)."""
        from .timeline import build_timeline

        return build_timeline(self.process, self.records, self.steps, self.compiles)

    def write(self, path: str | os.PathLike) -> str:
        """Writes the trace JSON to ``path``; returns the path."""
        from .trace_files import chrome_trace, write_trace

        return write_trace(path, chrome_trace(self.timeline()))


def _described(plan: Any) -> list[OpTrace]:
    """Per generated operation of ``plan`` (a ``CompiledPlan``), what the tracer needs
    (worked out once per plan, for every recorder)."""
    traces = _DESCRIBED.get(plan)
    if traces is None:
        traces = _DESCRIBED[plan] = describe_ops(plan.dispatch)
    return traces


def describe_ops(dispatch: Any) -> list[OpTrace]:
    """One ``OpTrace`` per generated operation of a ``DispatchView``, from the facts its
    instruction kind gave it (``execution.codegen.OpFacts``) and the plan's liveness."""
    from .timeline import FlowEnd, OpTrace

    plan: ExecutionPlan = dispatch.plan
    after = live_bytes(plan).after
    traces = []
    for op, end in zip(dispatch.ops, dispatch.op_end, strict=True):
        facts = op.facts
        received = [i for i in facts.instructions if i.receives_on is not None]
        total = sum(received_bytes(plan, i) for i in received)
        launch = facts.instructions[0] if facts.device == "task" else None
        if launch is not None:
            title = launch.trace_title()
        else:
            title = f"recv {total} B" if received else facts.name
        traces.append(
            OpTrace(
                title=title,
                rank=facts.rank,
                device=facts.device,
                outputs=facts.outputs,
                live_after=after[end - 1][facts.rank] if end > 0 else 0,
                sends=tuple(
                    (i.sends_on, i.rank) for i in facts.instructions if i.sends_on is not None
                ),
                flows=tuple(
                    FlowEnd(i.receives_on, i.peer, i.rank, received_bytes(plan, i))
                    for i in facts.flows
                ),
                values=len(received),
                bytes=total,
                executable=launch.executable if launch is not None else "",
                label=launch.label if launch is not None else "",
                tasks=launch.tasks if launch is not None else (),
                stage_names=plan.stage_names,
            )
        )
    return traces


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
