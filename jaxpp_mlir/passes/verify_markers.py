"""jaxpp-verify-markers: check that the stage markers agree with each other."""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable

from jax.interpreters.mlir import ir

from jaxpp_mlir import diagnostics
from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.errors import ScheduleError
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.passes import name_stacks
from jaxpp_mlir.passes.base import UNCHANGED, ModulePass, Unchanged, register_pass
from jaxpp_mlir.passes.marker_flow import MarkerFlow
from jaxpp_mlir.runtime import records
from jaxpp_mlir.schedules.record import is_bare_name, schedule_from_record

_LAYER_OPS = ("stablehlo.dot_general", "stablehlo.dot", "stablehlo.convolution")


@register_pass
@records.frozen
class VerifyMarkers(ModulePass):
    """Check that forward and backward stage markers agree, before stages are assigned.

    Works on the stage block: the body of the microbatch loop (the
    ``stablehlo.while`` holding treduce's loop marker) if there is one, else
    ``@main``. Counting on every dependence path the forward markers (F, the
    stages they end) and the backward markers (B, their transposes), it
    reports with a located error, in this order (each rule before any rule about
    the layout):

    - a backward-direction marker in forward code: a forward marker depends on
      it, or its location (JAX's name stack, where the module has one) says it was
      bound outside every ``transpose(...)``, where autodiff places backward
      markers; and a forward-direction marker whose location says autodiff placed
      it as a transpose (a saved module whose marker direction was edited);
    - a forward marker without its backward counterpart: B < F and gradient code
      reads a value of a forward stage that has no backward stage of its own (a
      marker inside a ``jax.custom_vjp`` forward rule whose backward rule has no
      ``mark_stage_end_backward``, a backward marker removed from a saved module).
      Gradient code is what follows a backward marker, and, with no backward
      marker at all (B = 0), what JAX's name stack places inside a ``transpose``;
    - JaxPP's old placement (markers at the start of stages 1..n-1, none after
      the last layer): the code after the last forward marker holds a forward
      layer (a ``dot_general`` or convolution with a weight that depends on
      neither a marker nor the microbatch) and the schedule's stage count
      (``num-stages``, else the one the loop marker records) is F + 1. With F
      stages, or fewer (neighbouring segments merged into stages), the layer runs
      in the last stage, as JaxPP runs an LM head after the last marker: silent.
      With no stage count known, the step gets F stages: a warning only where the
      mesh (``mpmd-dim``) has F + 1 ranks, one of which would get no stage.

    It warns (a ``warning`` diagnostic, turned into a Python warning by
    ``partition``) about what is legal but surprising: a marker the user wrote
    that JAX dropped because its result is unused (known from the source lines
    ``treduce`` records on its loop marker), and, with ``merge-parallel`` (the
    segmenter's option of that name), markers with no dependence between them,
    which then end the same stage.

    The stage count the markers make is the number of forward markers (each ends its
    own stage), or with ``merge-parallel`` the longest chain of them.

    Precondition: no ``func.call`` in ``@main`` (jaxpp-inline-calls); the
    microbatch loop, if any, not yet normalized (the loop marker still holds
    the recorded marker lines).
    Postcondition: the module is unchanged.
    """

    name = "jaxpp-verify-markers"
    num_stages: int = dataclasses.field(
        default=0,
        metadata={
            "help": "the schedule's stage count (0: the loop's recorded one, if any)",
            "min": 0,
        },
    )
    mpmd_dim: int = dataclasses.field(
        default=0,
        metadata={"help": "ranks along the mpmd axis (0: unknown)", "min": 0},
    )
    merge_parallel: bool = dataclasses.field(
        default=False,
        metadata={
            "help": "markers that do not depend on each other end one stage (warned about), "
            "as jaxpp-assign-segments' option"
        },
    )

    def run(self, module: ir.Operation) -> Unchanged:
        main = ir_utils.get_main(module)
        loop_marker, nested_markers = _scan_markers(ir_utils.walk(main))
        block = loop_marker.block if loop_marker is not None else ir_utils.body(main)
        in_block = [op.block == block for op in nested_markers]
        if not any(in_block) or not all(in_block):
            return UNCHANGED  # jaxpp-assign-segments reports both, in the user's terms
        top_ops = ir_utils.block_ops(block)[:-1]
        paths = MarkerFlow(top_ops, loop_marker)
        markers = [i for i, direction in enumerate(paths.direction) if direction is not None]
        _check_directions(markers, paths)
        forward = [i for i in markers if paths.direction[i] == jaxpp.FORWARD]
        num_forward = max((paths.forward[i] + 1 for i in forward), default=0)
        num_backward = max(
            (paths.backward[i] + 1 for i in markers if paths.direction[i] != jaxpp.FORWARD),
            default=0,
        )
        if num_backward < num_forward:
            _check_backward_counterparts(forward, num_forward, num_backward, paths)
        if num_backward in (0, num_forward):
            known = self.num_stages or _recorded_num_stages(loop_marker)
            marked = num_forward if self.merge_parallel else len(forward)
            _check_last_stage_marked(forward, num_forward, marked, known, self.mpmd_dim, paths)
        if self.merge_parallel:
            _warn_merged_markers(forward, paths)
        if loop_marker is not None:
            _warn_dead_markers([top_ops[i] for i in markers], jaxpp.loop_stage_markers(loop_marker))
        return UNCHANGED


def _check_directions(markers: list[int], paths: MarkerFlow) -> None:
    forward = [i for i in markers if paths.direction[i] == jaxpp.FORWARD]
    transposed = {i for i in forward if name_stacks.in_transpose_scope(paths.ops[i].location)}
    # The first forward marker of forward code downstream of each backward marker.
    dependents: dict[int, int] = {}
    for index in forward:
        upstream = paths.upstream_backward_marker[index]
        if upstream is not None and index not in transposed:
            dependents.setdefault(upstream, index)
    for index in markers:
        if paths.direction[index] == jaxpp.FORWARD:
            continue
        op = paths.ops[index]
        dependent = dependents.get(index)
        if dependent is not None:
            why = f"the forward marker at {_where(paths.ops[dependent])} depends on it"
        elif _bound_outside_autodiff(op.location):
            why = (
                "it was bound outside every 'transpose(...)' of JAX's name stack (its "
                "location), where autodiff places backward markers"
            )
        else:
            continue
        raise diagnostics.error(
            op,
            f"backward-direction stage marker in forward code: {why}. Backward markers "
            "are the transposes autodiff places (or mark_stage_end_backward in a "
            "custom_vjp backward rule): mark forward code with pipeline_enter_stage "
            "(higher-order gradients through stage markers are not supported)",
        )
    for index in forward:
        if index in transposed:
            raise diagnostics.error(
                paths.ops[index],
                "this stage marker is marked forward ('fwd') but autodiff placed it as the "
                "transpose of a marker (its location is inside 'transpose(...)'): the "
                "module's marker directions are inconsistent; give it back its "
                "'bwd' direction or lower the step again",
            )


def _recorded_num_stages(loop_marker: ir.Operation | None) -> int:
    """``num_stages`` of the schedule ``treduce`` recorded (0 when none is spelled out)."""
    record = jaxpp.loop_schedule(loop_marker) if loop_marker is not None else None
    if record is None or is_bare_name(record):
        return 0
    try:
        return schedule_from_record(record).num_stages
    except ScheduleError:
        return 0  # jaxpp-choose-stages reports it, located


def _check_last_stage_marked(
    forward: list[int],
    num_forward: int,
    num_marked: int,
    known_stages: int,
    mpmd_dim: int,
    paths: MarkerFlow,
) -> None:
    """JaxPP's old placement leaves the last stage's layers after the last marker: an
    error where the schedule has M + 1 stages (M: the stages the markers make), a warning
    where no stage count is known and the mesh has M + 1 ranks; M stages or fewer is
    JaxPP's placement (the layers after the last marker run in the last stage).
    ``num_forward``: the longest chain of forward markers."""
    if not forward:
        return
    refused = known_stages == num_marked + 1
    if not refused and (known_stages or mpmd_dim != num_marked + 1):
        return
    last_markers = [paths.ops[i] for i in forward if paths.forward[i] + 1 == num_forward]
    for index, name in enumerate(paths.names):
        if name not in _LAYER_OPS or paths.backward[index] > 0:
            continue
        op = paths.ops[index]
        infos = [paths.value_info(v) for v in op.operands]
        after_last = any(info[2] and info[0] == num_forward for info in infos)
        weight = any(not info[2] and not info[3] for info in infos)
        if not (after_last and weight) or name_stacks.in_transpose_scope(op.location):
            continue  # not a layer after the last marker, or gradient code
        if refused:
            raise diagnostics.error(
                last_markers[0],
                f"the last stage's marker is missing: the schedule has {known_stages} stages "
                f"but the step {num_marked} markers, and a layer ('{op.name}' at "
                f"{_where(op)}) follows the last one. pipeline_enter_stage marks the END of "
                "a stage, so N stages need N markers, the last one after the last layer "
                "(JaxPP's placement since August 2025). With the old placement (markers at "
                "the start of stages 1..n-1) add pipeline_enter_stage after the last layer "
                "and remove none",
            )
        diagnostics.warning(
            last_markers[0],
            f"a layer ('{op.name}' at {_where(op)}) follows the last stage marker: it runs "
            f"in the last stage ({num_marked - 1}), as in JaxPP, and {mpmd_dim - num_marked} "
            f"of the mesh's {mpmd_dim} ranks gets no stage. If the markers are at the start "
            "of stages 1..n-1 (JaxPP's old placement), add one after the last layer",
        )
        return


def _check_backward_counterparts(
    forward: list[int],
    num_forward: int,
    num_backward: int,
    paths: MarkerFlow,
) -> None:
    """Gradient code reading a stage with no backward stage of its own lacks a boundary.

    Gradient code is what follows a backward marker; with none in the step, what JAX's
    name stack places inside a transpose (a custom_vjp backward rule, the loss's)."""
    for index, count in enumerate(paths.backward):
        if paths.direction[index] is not None or (count == 0 and num_backward > 0):
            continue
        own_stage = num_forward - count
        for producer in paths.producers[index]:
            stage = paths.forward_stage_of(producer)
            if stage is None or stage >= own_stage:
                continue
            op = paths.ops[index]
            if count == 0 and not name_stacks.in_transpose_scope(op.location):
                break  # forward code reading an earlier stage (a skip connection)
            # The gradient code of stage `stage` crossed fewer backward markers than the
            # stages from there to the last: one of those stages' markers lacks its own.
            candidates = sorted(
                (m for m in forward if paths.forward[m] >= stage), key=paths.forward.__getitem__
            )
            listing = ", ".join(
                f"stage {paths.forward[m]} at {_where_in_function(paths.ops[m])}"
                for m in candidates
            )
            raise diagnostics.error(
                paths.ops[candidates[0]],
                "a stage marker has no backward counterpart: the step's gradient crosses "
                f"{num_backward} backward marker(s) for {num_forward} forward marker(s), so "
                f"the gradient code at {_where(op)}, which reads a value of stage {stage}, "
                f"would run in the backward of stage {own_stage}. The marker without one "
                f"is among those ending {listing}. If a marker is inside a jax.custom_vjp "
                "forward rule, pass the cotangents its backward rule receives through "
                "jaxpp_mlir.mark_stage_end_backward (or mark outside the custom_vjp); a "
                "saved module must keep every backward marker autodiff placed",
            )


def _warn_merged_markers(forward: list[int], paths: MarkerFlow) -> None:
    by_stage: dict[int, list[ir.Operation]] = collections.defaultdict(list)
    for index in forward:
        by_stage[paths.forward[index]].append(paths.ops[index])
    for stage, ops in sorted(by_stage.items()):
        if len(ops) < 2:
            continue
        others = ", ".join(_where(op) for op in ops[1:])
        diagnostics.warning(
            ops[0],
            f"this stage marker and the one(s) at {others} do not depend on each other, "
            f"so they end the same stage ({stage}) and count as one: chain them (mark the "
            "value computed from both) if you meant separate stages (NVIDIA JaxPP makes one "
            "stage per marker here)",
        )


def _warn_dead_markers(markers: list[ir.Operation], written: tuple[str, ...] | None) -> None:
    """Markers written at trace time whose op JAX removed (their result was unused)."""
    lines = [_source_line(op) for op in markers]
    if not written or "loc(unknown)" in lines:
        return  # nothing recorded, or locations stripped: nothing to compare
    lines = [_as_written(line, written) for line in lines]
    alive: collections.Counter[str] = collections.Counter()
    per_direction: dict[str, collections.Counter[str]] = {
        jaxpp.FORWARD: collections.Counter(),
        jaxpp.BACKWARD: collections.Counter(),
    }
    for op, line in zip(markers, lines, strict=True):
        per_direction[jaxpp.marker_direction(op)][line] += 1
    for line in set(per_direction[jaxpp.FORWARD]) | set(per_direction[jaxpp.BACKWARD]):
        alive[line] = max(per_direction[jaxpp.FORWARD][line], per_direction[jaxpp.BACKWARD][line])
    if not set(alive) & set(written):
        return  # the locations are not the traced ones (a module printed without debug info)
    missing = collections.Counter(written) - alive
    for line in sorted(missing):
        diagnostics.warning(
            _file_location(line) or markers[0].location,
            f"{missing[line]} stage marker(s) written at {line} no longer bound a stage: "
            "JAX removed them because their result is unused; use the marker's result "
            "(x = pipeline_enter_stage(x)) for it to end a stage",
        )


def _as_written(line: str, written: tuple[str, ...]) -> str:
    """The recorded ``file:line`` that a location's ``file:line`` denotes: the frontend
    records paths relative to the working directory it traced in, locations are absolute."""
    for recorded in written:
        if line == recorded or line.endswith("/" + recorded):
            return recorded
    return line


def _file_location(line: str) -> ir.Location | None:
    filename, _, number = line.rpartition(":")
    if not filename or not number.isdigit():
        return None
    return ir.Location.file(filename, int(number), 0)


def _scan_markers(
    nested: Iterable[ir.Operation],
) -> tuple[ir.Operation | None, list[ir.Operation]]:
    """The first loop marker among ``nested``, and its stage markers."""
    loop_marker = None
    stage_markers = []
    for op in nested:
        if op.name not in jaxpp.MARKER_OP_NAMES:
            continue
        if jaxpp.is_stage_marker(op):
            stage_markers.append(op)
        elif loop_marker is None and jaxpp.is_loop_marker(op):
            loop_marker = op
    return loop_marker, stage_markers


def _where(op: ir.Operation) -> str:
    return diagnostics.format_location(op.location)


def _source_line(op: ir.Operation) -> str:
    """``file:line`` of the op's source location (column dropped)."""
    where = _where(op)
    return where.rsplit(":", 1)[0] if where.count(":") >= 2 else where


def _where_in_function(op: ir.Operation) -> str:
    """``file:line:col`` of the op, with the function of that frame where the location
    names it (``... in 'layer_fwd'``: a custom_vjp forward rule shows by its name)."""
    where = _where(op)
    function = _function_at(ir.Location.from_attr(op.location.attr), where)
    return f"{where} (in '{function}')" if function else where


def _function_at(location: ir.Location, where: str) -> str | None:
    """The name JAX gives the frame whose file location ``where`` formats."""
    if isinstance(location, ir.NameLoc):
        child = ir.Location.from_attr(location.child_loc.attr)
        if isinstance(child, ir.FileLineColLoc) and diagnostics.format_location(child) == where:
            return location.name_str
        return _function_at(child, where)
    if isinstance(location, ir.CallSiteLoc):
        callee = ir.Location.from_attr(location.callee.attr)
        caller = ir.Location.from_attr(location.caller.attr)
        return _function_at(callee, where) or _function_at(caller, where)
    if isinstance(location, ir.FusedLoc):
        for inner in location.locations:
            found = _function_at(ir.Location.from_attr(inner.attr), where)
            if found:
                return found
    return None


def _bound_outside_autodiff(location: ir.Location) -> bool:
    """True if ``location`` is JAX's for a traced marker (``<name stack>/<primitive>``)
    and names no transpose: the marker was bound in forward code. False where the
    location does not say (a module printed without debug info, a hand-written one)."""
    location = ir.Location.from_attr(location.attr)
    if isinstance(location, ir.NameLoc):
        name = location.name_str
        if name == jaxpp.MARKER_PRIMITIVE or name.endswith("/" + jaxpp.MARKER_PRIMITIVE):
            return name_stacks.TRANSPOSE_SCOPE not in name
        return _bound_outside_autodiff(location.child_loc)
    if isinstance(location, ir.CallSiteLoc):
        return _bound_outside_autodiff(location.callee)
    if isinstance(location, ir.FusedLoc):
        return any(_bound_outside_autodiff(inner) for inner in location.locations)
    return False
