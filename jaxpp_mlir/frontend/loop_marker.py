"""The loop marker: an identity primitive on the microbatch counter, lowered to a
tagged ``stablehlo.optimization_barrier`` that jaxpp-normalize-loop recognises."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import jax
from jax.interpreters import ad, batching, mlir
from jax.interpreters.mlir import ir

from jaxpp_mlir._jax_compat import Primitive
from jaxpp_mlir.dialect.ops import create_loop_marker
from jaxpp_mlir.errors import ScheduleError
from jaxpp_mlir.frontend.reductions import TreduceError
from jaxpp_mlir.runtime import records

loop_marker_p = Primitive("jaxpp_loop_marker")


@records.frozen
class ScheduleParam:
    """The record of treduce's schedule (``schedules.record``) as a primitive parameter,
    which must be hashable: compared and hashed by its JSON text."""

    record: Mapping[str, Any]

    @classmethod
    def of(cls, schedule: Any, num_microbatches: int | None = None) -> ScheduleParam | None:
        """The record of ``schedule`` (a schedule object or a built-in schedule's name;
        None for none); a ``TreduceError`` for anything else. A schedule a record cannot
        hold is recorded as the task lists it gives for ``num_microbatches``."""
        from jaxpp_mlir.schedules.base import Schedule
        from jaxpp_mlir.schedules.record import AUTO, name_record, recordable

        if schedule is None:
            return None
        try:
            if isinstance(schedule, str):
                if schedule == AUTO:
                    raise TreduceError(
                        f"treduce(schedule={AUTO!r}): the planner chooses the schedule when "
                        f"the step is partitioned: give partition(..., schedule={AUTO!r}) and "
                        "no schedule to treduce"
                    )
                return cls(name_record(schedule))
            if isinstance(schedule, Schedule):
                return cls(recordable(schedule, num_microbatches))
        except ScheduleError as error:
            raise TreduceError(f"treduce(schedule=...): {error}") from None
        raise TreduceError(
            "treduce(schedule=...) takes a jaxpp_mlir schedule (Std1F1B(4), ...), a built-in "
            f"schedule's name or None, got {type(schedule).__name__}"
        )

    def _key(self) -> str:
        return json.dumps(self.record, sort_keys=True)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ScheduleParam) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


def _check_params(
    num_microbatches: int,
    schedule: ScheduleParam | None,
    reductions: tuple[str, ...],
    stage_markers: tuple[str, ...] = (),
) -> None:
    if not isinstance(num_microbatches, int) or num_microbatches < 1:
        raise TreduceError(f"num_microbatches must be an int >= 1, got {num_microbatches!r}")
    if schedule is not None and not isinstance(schedule, ScheduleParam):
        raise TreduceError("loop marker params: schedule must be a ScheduleParam or None")
    if not isinstance(reductions, tuple):
        raise TreduceError("loop marker params: reductions must be a tuple")
    if not isinstance(stage_markers, tuple):
        raise TreduceError("loop marker params: stage_markers must be a tuple")


def loop_marker(
    index: jax.Array,
    *,
    num_microbatches: int,
    schedule: ScheduleParam | None = None,
    reductions: Sequence[str] = (),
) -> jax.Array:
    """The identity on ``index`` (the microbatch counter), marking the microbatch loop."""
    return loop_marker_p.bind(
        index,
        num_microbatches=int(num_microbatches),
        schedule=schedule,
        reductions=tuple(reductions),
    )


def _impl(x: jax.Array, **params: Any) -> jax.Array:
    _check_params(**params)
    return x


def _abstract_eval(aval: Any, **params: Any) -> Any:
    _check_params(**params)
    return aval


def _lowering(
    ctx: mlir.LoweringRuleContext,
    x: ir.Value,
    *,
    num_microbatches: int,
    schedule: ScheduleParam | None,
    reductions: tuple[str, ...],
    stage_markers: tuple[str, ...] = (),
) -> Sequence[ir.Value]:
    marker = create_loop_marker(
        x,
        num_microbatches=num_microbatches,
        schedule=schedule.record if schedule is not None else None,
        reductions=reductions,
        stage_markers=stage_markers,
    )
    return marker.results


def _jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[Any, Any]:
    # Identity: the tangent passes through unmarked (it is a symbolic zero for
    # the integer counter), so the marker never enters a backward pass.
    (x,) = primals
    (t,) = tangents
    return loop_marker_p.bind(x, **params), t


def _transpose(ct: Any, x: Any, **params: Any) -> list[Any]:
    return [ct]


def _batch(args: Sequence[Any], dims: Sequence[Any], **params: Any) -> tuple[Any, Any]:
    (x,) = args
    (d,) = dims
    return loop_marker_p.bind(x, **params), d


loop_marker_p.def_impl(_impl)
loop_marker_p.def_abstract_eval(_abstract_eval)
mlir.register_lowering(loop_marker_p, _lowering)
ad.primitive_jvps[loop_marker_p] = _jvp
ad.primitive_transposes[loop_marker_p] = _transpose
batching.primitive_batchers[loop_marker_p] = _batch
