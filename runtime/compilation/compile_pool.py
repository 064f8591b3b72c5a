"""The threads that compile stage programs, waited for with a deadline.

XLA releases the GIL while it compiles, so programs compile concurrently on threads. The
threads are daemons: a compile that never returns (an XLA bug, a wedged GPU during
autotuning) makes ``compile()`` raise once ``JAXPP_MLIR_COMPILE_TIMEOUT`` has passed,
naming the programs still compiling, and does not keep the interpreter from exiting.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TypeVar

from ..errors import RuntimeFailure

_T = TypeVar("_T")
THREAD_PREFIX = "jaxpp-compile"


def run_jobs(
    make: Callable[[int], _T],
    order: Sequence[int],
    *,
    workers: int,
    first_alone: bool,
    timeout_s: float,
    names: Callable[[int], str],
) -> Callable[[int], _T]:
    """Starts ``make(job)`` for every job of ``order`` on ``workers`` threads, in that
    order (with ``first_alone``, the first one finishes before any other starts), and
    returns ``result(job)``: the job's value, or its exception raised, waiting until
    ``timeout_s`` after this call at most (then a ``RuntimeFailure`` that names the jobs
    not finished, by ``names(job)``)."""
    futures: dict[int, Future[_T]] = {job: Future() for job in order}
    todo: queue.SimpleQueue[int | None] = queue.SimpleQueue()

    def work() -> None:
        while (job := todo.get()) is not None:
            future = futures[job]
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(make(job))
            except BaseException as e:  # noqa: BLE001 - handed to whoever waits for the job
                future.set_exception(e)

    deadline = time.monotonic() + timeout_s
    threads = [
        threading.Thread(target=work, name=f"{THREAD_PREFIX}_{k}", daemon=True)
        for k in range(max(1, min(workers, len(order))))
    ]
    for thread in threads:
        thread.start()

    def result(job: int) -> _T:
        try:
            return futures[job].result(timeout=max(0.0, deadline - time.monotonic()))
        except FutureTimeout:
            for future in futures.values():
                future.cancel()  # those not started yet
            running = [names(j) for j, f in futures.items() if f.running()]
            raise RuntimeFailure(
                f"compiling stage programs took longer than JAXPP_MLIR_COMPILE_TIMEOUT="
                f"{timeout_s:g} s; still compiling: {', '.join(running) or names(job)}; a "
                "very large model may need a larger limit (the environment variable), "
                "otherwise XLA's compiler is stuck"
            ) from None

    for position, job in enumerate(order):
        todo.put(job)
        if position == 0 and first_alone and len(order) > 1:
            try:
                futures[job].exception(timeout=max(0.0, deadline - time.monotonic()))
            except FutureTimeout:
                for _ in threads:
                    todo.put(None)
                result(job)  # raises the timeout's failure
    for _ in threads:
        todo.put(None)
    return result
