"""JaxPP's cross-rank helpers and task timing, on jaxpp_mlir.

jaxpp_mlir finds where each value lives from the lowered module alone, so the
helpers JaxPP needs to move or combine values across ranks are ordinary array
operations here: the partitioner places them (a sum of values of several stages
runs on the rank that receives them; the transfers are inserted for it).
"""

from __future__ import annotations

import contextlib
import functools
from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from jaxpp_mlir.compat.arrays import kind_of
from jaxpp_mlir.errors import CallError
from jaxpp_mlir.runtime.observation import trace


def cross_mpmd_all_reduce(*arrays: jax.Array) -> jax.Array:
    """The sum of ``arrays`` (say one partial result from each of several stages): arrays
    of one shape and dtype, each a separate argument (JaxPP's checks; nothing broadcasts)."""
    if not arrays:
        raise CallError("cross_mpmd_all_reduce needs at least one array")
    for position, array in enumerate(arrays):
        if isinstance(array, list | tuple):
            raise CallError(
                f"cross_mpmd_all_reduce: argument {position} is {kind_of(array)}; it takes the "
                f"arrays as separate arguments: cross_mpmd_all_reduce(*arrays)"
            )
        if not (hasattr(array, "shape") and hasattr(array, "dtype")):
            raise CallError(
                f"cross_mpmd_all_reduce: argument {position} is {kind_of(array)}, not an array"
            )
    shapes = [tuple(a.shape) for a in arrays]
    if any(shape != shapes[0] for shape in shapes):
        raise CallError(
            f"cross_mpmd_all_reduce needs arrays of one shape, got {shapes}: it sums one "
            f"partial result per stage and broadcasts nothing"
        )
    dtypes = [jnp.result_type(a) for a in arrays]
    if any(dtype != dtypes[0] for dtype in dtypes):
        raise CallError(f"cross_mpmd_all_reduce needs arrays of one dtype, got {dtypes}")
    return functools.reduce(jnp.add, arrays)


def cross_mpmd_stack(arrays: Sequence[jax.Array], axis: int = 0) -> jax.Array:
    """``arrays`` (say one from each of several stages) stacked along a new ``axis``."""
    return jnp.stack(list(arrays), axis=axis)


def place_with(value: Any, with_value: Any) -> Any:
    """``value`` unchanged: JaxPP's hint to put it on ``with_value``'s rank.

    jaxpp_mlir places every value on the rank of the stage that computes it, and
    sends it where it is read, so the hint changes nothing (``with_value`` is unused).
    """
    del with_value
    return value


@contextlib.contextmanager
def collect_task_times_ms(enabled: bool = True) -> Iterator[dict[str, list[float]] | None]:
    """Within the block, records how long each task of a compiled step runs.

    Yields a dict filled when the block exits: task name (``fwd_0__1``,
    ``bwd_1__0``...; fused tasks ``FusedTask(...)``) to the milliseconds of each run,
    from its dispatch to the end of its device span (its results ready). ``enabled=False``
    yields None and records nothing.
    """
    if not enabled:
        yield None
        return
    times: dict[str, list[float]] = defaultdict(list)
    recorder = trace.TraceRecorder(jax.process_index())
    outer, trace.ACTIVE = trace.ACTIVE, recorder
    try:
        yield times
    finally:
        trace.ACTIVE = outer
        recorder.finish()
        for span in recorder.timeline().tasks:
            end = max(span.end, span.dispatch_end)
            times[span.label or span.executable].append((end - span.dispatch_start) / 1000.0)
