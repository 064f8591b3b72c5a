"""Waiting for the workers: every wait bounded, every failure naming its worker."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from jaxpp_mlir.errors import JaxppError, RuntimeFailure

_POLL_S = 0.5  # how often a wait looks again (a failed worker is seen at once anyway)
_CAUSE_GRACE_S = 5.0  # after a failure, how long the other workers may still answer


class WorkerFailure(RuntimeFailure):
    """A worker died, stalled or failed; ``worker`` is its index (the first of the late
    ones when ``stalled``)."""

    def __init__(self, message: str, worker: int, *, stalled: bool = False, died: bool = False):
        super().__init__(message)
        self.worker, self.stalled, self.died = worker, stalled, died


def wait_all(refs: Sequence[Any], names: Sequence[str], what: str, timeout_s: float) -> list[Any]:
    """The results of ``refs`` (worker i's call is ``refs[i]``), in order.

    Raises once one fails: ``WorkerFailure`` naming the worker for a death or a
    stall (no answer within ``timeout_s``), or the worker's own error (a
    ``JaxppError``), its message prefixed with the worker's name. A worker's
    error often follows another's death (its transfer to the dead one fails
    first), so after the first failure the others get ``_CAUSE_GRACE_S`` more to
    answer, and a death found meanwhile is raised as the cause, the other errors
    as notes.
    """
    import ray

    pending = {ref: i for i, ref in enumerate(refs)}
    results: list[Any] = [None] * len(refs)
    failures: list[Exception] = []
    deadline = time.monotonic() + timeout_s
    while pending:
        left = deadline - time.monotonic()
        if left <= 0:
            if failures:
                break
            late = sorted(pending.values())
            listed = ", ".join(names[i] for i in late)
            raise WorkerFailure(
                f"{what}: no answer from {listed} within {timeout_s:g} s (stalled, or blocked "
                f"waiting for another worker)",
                late[0],
                stalled=True,
            )
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=min(left, _POLL_S))
        for ref in ready:
            i = pending.pop(ref)
            try:
                results[i] = _result(ref, names[i], i, what)
            except Exception as e:  # noqa: BLE001 - judged below, the cause first
                if not failures:
                    deadline = min(deadline, time.monotonic() + _CAUSE_GRACE_S)
                failures.append(e)
    if failures:
        raise _cause_first(failures)
    return results


def _cause_first(failures: list[Exception]) -> Exception:
    """A worker's death if one was seen (the others' errors as notes), else the first."""
    deaths = [e for e in failures if isinstance(e, WorkerFailure) and e.died]
    cause = deaths[0] if deaths else failures[0]
    for other in failures:
        if other is not cause:
            cause.add_note(f"meanwhile: {other}")
    return cause


def probe(workers: Sequence[Any], names: Sequence[str], skip: int, timeout_s: float) -> str:
    """What the other workers answer to a ping (a worker runs it next to a blocked step):
    the stalled and the dead ones, named; "" if all answer."""
    import ray

    others = [i for i in range(len(workers)) if i != skip]
    refs = {workers[i].ping.remote(): i for i in others}
    ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=timeout_s)
    notes = []
    for ref, i in refs.items():
        if ref not in ready:
            notes.append(f"{names[i]} does not answer (stalled)")
            continue
        try:
            ray.get(ref, timeout=0)
        except ray.exceptions.RayError:
            notes.append(f"{names[i]} is gone too")
    return "; ".join(notes)


def _result(ref: Any, name: str, index: int, what: str) -> Any:
    import ray

    try:
        return ray.get(ref, timeout=0)
    except ray.exceptions.RayActorError as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise WorkerFailure(f"{what}: {name} died ({reason})", index, died=True) from None
    except ray.exceptions.RayTaskError as e:
        cause = getattr(e, "cause", None)
        if isinstance(cause, JaxppError):
            raised = _same_kind(cause, f"{name}: {cause}")
            raise raised from None
        text = str(cause) if cause is not None else str(e)
        raise WorkerFailure(f"{what}: {name} failed: {text}", index) from None


def _same_kind(error: Exception, message: str) -> Exception:
    try:
        return type(error)(message)
    except TypeError:  # an error class with other arguments
        return RuntimeFailure(message)
