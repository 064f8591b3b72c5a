"""Schedules back from the text ``treduce`` records on its loop marker.

``treduce(..., schedule=S)`` writes ``repr(S)`` (``"Std1F1B(num_stages=4)"``) or a
bare name (``"GPipe"``) into the lowered module, so that a module read from a file
still says how its loop should be pipelined. ``schedule_from_text`` rebuilds the
schedule from that text: literal arguments only, built-in schedules only (a
``CustomSchedule``'s task lists do not fit in the text).
"""

from __future__ import annotations

import ast

from jaxpp_mlir.errors import ScheduleError
from jaxpp_mlir.schedules.base import Schedule
from jaxpp_mlir.schedules.dual_pipe_v import DualPipeV
from jaxpp_mlir.schedules.gpipe import GPipe
from jaxpp_mlir.schedules.interleaved import Interleaved1F1B, InterleavedGPipe, KimiK2
from jaxpp_mlir.schedules.one_f_one_b import Eager1F1B, Std1F1B
from jaxpp_mlir.schedules.zero_bubble import ZeroBubble

_BUILT_IN: dict[str, type[Schedule]] = {
    cls.__name__: cls
    for cls in (
        GPipe,
        Std1F1B,
        Eager1F1B,
        Interleaved1F1B,
        KimiK2,
        InterleavedGPipe,
        ZeroBubble,
        DualPipeV,
    )
}
# Schedules whose constructor takes the number of ranks as well as the number of stages.
_TAKES_MPMD_DIM = (Interleaved1F1B, KimiK2, InterleavedGPipe, DualPipeV)


def schedule_from_text(text: str, *, num_stages: int, mpmd_dim: int) -> Schedule:
    """The schedule ``text`` names: a ``repr`` of a built-in schedule, or its bare name.

    A bare name is completed with ``num_stages`` (and ``mpmd_dim`` for schedules
    with several stages per rank).
    """
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        tree = None
    if isinstance(tree, ast.Name):
        cls = _lookup(tree.id, text)
        if cls in _TAKES_MPMD_DIM:
            return cls(num_stages, mpmd_dim)
        return cls(num_stages)
    if not isinstance(tree, ast.Call) or not isinstance(tree.func, ast.Name):
        raise ScheduleError(
            f"the treduce loop names the schedule {text!r}, which is not a schedule "
            "name or repr (such as 'Std1F1B(num_stages=4)')"
        )
    cls = _lookup(tree.func.id, text)
    try:
        args = [ast.literal_eval(arg) for arg in tree.args]
        kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in tree.keywords if kw.arg}
    except ValueError:
        raise ScheduleError(
            f"the treduce loop's schedule {text!r} has arguments that are not literals"
        ) from None
    try:
        return cls(*args, **kwargs)
    except TypeError as e:
        raise ScheduleError(f"the treduce loop's schedule {text!r}: {e}") from None


def _lookup(name: str, text: str) -> type[Schedule]:
    if name == "CustomSchedule":
        raise ScheduleError(
            "the treduce loop was given a CustomSchedule, whose task lists the lowered module "
            "cannot carry: pass it to partition(..., schedule=...)"
        )
    if name not in _BUILT_IN:
        raise ScheduleError(
            f"the treduce loop names the unknown schedule {text!r} (known: {', '.join(_BUILT_IN)})"
        )
    return _BUILT_IN[name]
