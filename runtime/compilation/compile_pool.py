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
from concurrent.futures import CancelledError, Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Generic, TypeVar

from ..errors import RuntimeFailure

_T = TypeVar("_T")
THREAD_PREFIX = "jaxpp-compile"


class CompilePool(Generic[_T]):
    """Runs ``make(job)`` for every job of ``order`` on ``workers`` daemon threads, in
    that order (with ``first_alone``, the first one finishes before any other starts).

    ``result(job)`` gives the job's value or raises its exception, waiting until
    ``timeout_s`` after the pool started at most (then a ``RuntimeFailure`` that names
    the jobs still running, by ``names(job)``). Once ``result`` raised, for that job or
    another, the jobs not started yet are dropped: a failed compile() leaves no work
    behind but the compiles already running.
    """

    def __init__(
        self,
        make: Callable[[int], _T],
        order: Sequence[int],
        *,
        workers: int,
        first_alone: bool,
        timeout_s: float,
        names: Callable[[int], str],
    ):
        self._make, self._names, self.timeout_s = make, names, timeout_s
        self._futures: dict[int, Future[_T]] = {job: Future() for job in order}
        self._todo: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        self._deadline = time.monotonic() + timeout_s
        self._cause: BaseException | None = None
        threads = max(1, min(workers, len(order)))
        for k in range(threads):
            threading.Thread(target=self._work, name=f"{THREAD_PREFIX}_{k}", daemon=True).start()
        try:
            for position, job in enumerate(order):
                self._todo.put(job)
                if position == 0 and first_alone and len(order) > 1:
                    self._wait(job)
        finally:
            for _ in range(threads):
                self._todo.put(None)

    def result(self, job: int) -> _T:
        """The value of ``job`` (raising its exception, or the failure that dropped it)."""
        self._wait(job)
        future = self._futures[job]
        if future.cancelled():
            raise self._cause  # type: ignore[misc]
        return future.result()

    def cancel(self, cause: BaseException) -> None:
        """Drops the jobs not started yet; ``result`` of any of them raises ``cause``."""
        self._drop_waiting(cause)

    def _wait(self, job: int) -> None:
        """Waits for ``job`` to end, at most until the deadline."""
        future = self._futures[job]
        try:
            failed = future.exception(timeout=max(0.0, self._deadline - time.monotonic()))
        except FutureTimeout:
            running = [self._names(j) for j, f in self._futures.items() if f.running()]
            timeout = RuntimeFailure(
                f"compiling stage programs took longer than JAXPP_MLIR_COMPILE_TIMEOUT="
                f"{self.timeout_s:g} s; still compiling: "
                f"{', '.join(running) or self._names(job)}; a very large model may need a "
                "larger limit (the environment variable), otherwise XLA's compiler is stuck"
            )
            self._drop_waiting(timeout)
            raise timeout from None
        except CancelledError:
            return  # dropped after another job's failure: ``result`` raises that
        except BaseException as e:  # an interrupt while waiting
            self._drop_waiting(e)
            raise
        if failed is not None:
            self._drop_waiting(failed)

    def _drop_waiting(self, cause: BaseException) -> None:
        """Cancels the jobs not started yet, ``cause`` being why (the first cause kept)."""
        if self._cause is None:
            self._cause = cause
        for future in self._futures.values():
            future.cancel()  # only those not started yet

    def _work(self) -> None:
        while (job := self._todo.get()) is not None:
            future = self._futures[job]
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(self._make(job))
            except BaseException as e:  # noqa: BLE001 - handed to whoever waits for the job
                future.set_exception(e)
