"""Warnings on partition set-ups that leave part of the machine idle.

``partition`` calls ``warn_about_program`` once the program is built. Each finding is a
``PartitionWarning`` at the caller's ``partition(...)`` line: fewer microbatches than
stages (stages wait for work every step), ranks of the mesh that run no stage, and
stages whose estimated cost differs by more than ``COST_RATIO`` (the slowest stage
sets the pace, the others wait). Silence them with a warnings filter on
``PartitionWarning``, ``PartitionOptions(setup_warnings=False)`` or
``JAXPP_MLIR_SETUP_WARNINGS=0``.

A stage's cost is the planner's FLOP estimate (``planner.segment_costs.op_flops``) over
its stage functions' StableHLO ops, forward and backward.
"""

from __future__ import annotations

import inspect
import os
import warnings
from collections.abc import Sequence
from typing import Any

from jax.interpreters.mlir import ir

from jaxpp_mlir import ir_context
from jaxpp_mlir.errors import PartitionWarning

#: Stages whose estimated costs differ by more than this factor are reported.
COST_RATIO = 2.0


def warn_about_program(program: Any) -> None:
    """``warn_about_setup`` of a ``PartitionedProgram``: its stages, microbatches, the
    rank of each stage (its schedule's, else s % ranks) and its stage functions."""
    schedule, ranks = program.schedule, program.mesh.mpmd_dim
    warn_about_setup(
        num_stages=program.num_stages,
        num_microbatches=program.num_microbatches,
        stage_ranks=[
            schedule.stage_rank(s) if schedule is not None else s % ranks
            for s in range(program.num_stages)
        ],
        num_ranks=ranks,
        stage_functions=[program.stage_functions(s) for s in range(program.num_stages)],
    )


def warn_about_setup(
    *,
    num_stages: int,
    num_microbatches: int | None,
    stage_ranks: Sequence[int],
    num_ranks: int,
    stage_functions: Sequence[Sequence[ir.Operation]],
) -> None:
    """Warns (``PartitionWarning``) about each way the set-up wastes the machine.

    ``stage_ranks[s]`` is the rank of stage ``s``; ``stage_functions[s]`` the
    ``func.func`` ops of its stage functions (in the partitioned module). The warning
    points at the innermost caller outside jaxpp_mlir (the user's ``partition`` or
    ``mpmd_jit`` call).
    """
    for message in _findings(num_stages, num_microbatches, stage_ranks, num_ranks, stage_functions):
        warnings.warn(message, PartitionWarning, stacklevel=_user_stacklevel())


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _user_stacklevel() -> int:
    """``warnings.warn``'s stacklevel, called from here, of the first frame outside jaxpp_mlir."""
    frame = inspect.currentframe()
    frame = frame.f_back if frame is not None else None  # level 1: the caller of warn()
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR):
        frame = frame.f_back
        level += 1
    return level


def _findings(
    num_stages: int,
    num_microbatches: int | None,
    stage_ranks: Sequence[int],
    num_ranks: int,
    stage_functions: Sequence[Sequence[ir.Operation]],
) -> list[str]:
    found = []
    if num_microbatches is not None and num_microbatches < num_stages:
        plural = "es" if num_microbatches > 1 else ""
        found.append(
            f"{num_microbatches} microbatch{plural} for {num_stages} stages: at most "
            f"{num_microbatches} of the {num_stages} stages work at any time, so every rank "
            f"idles most of the step; use at least {num_stages} microbatches (4x the stages "
            "keeps the bubble small, see README 'Choosing a schedule and a microbatch count')"
        )
    idle = sorted(set(range(num_ranks)) - set(stage_ranks))
    if idle:
        found.append(
            f"ranks {idle} of the mesh's {num_ranks} run no stage (the program has "
            f"{num_stages} stages on ranks {sorted(set(stage_ranks))}): their devices stay "
            "idle; mark more stages, use a schedule with more ranks, or a mesh with fewer "
            "submeshes"
        )
    costs = [sum(map(operation_flops, functions)) for functions in stage_functions]
    if len(costs) > 1 and min(costs) > 0 and max(costs) > COST_RATIO * min(costs):
        cheapest, dearest = costs.index(min(costs)), costs.index(max(costs))
        found.append(
            f"stage {dearest} costs about {max(costs) / min(costs):.1f}x stage {cheapest} "
            f"(estimated FLOPs per microbatch, forward and backward: "
            f"{', '.join(f'stage {s}: {c:.3g}' for s, c in enumerate(costs))}): the slowest "
            "stage sets the pace and the others wait; move the stage markers or split "
            "points (or give stage_split=, which counts a layer scan's layers) to even "
            "them out"
        )
    return found


def estimate_flops(module_text: str) -> float:
    """A FLOP estimate of one StableHLO module (see the module docstring)."""
    return operation_flops(ir_context.parse_module(module_text).operation)


def operation_flops(operation: ir.Operation) -> float:
    """A FLOP estimate of the StableHLO ops nested in ``operation`` (a module or function):
    the planner's per-op estimate (``planner.segment_costs.op_flops``), so a split the
    planner balanced is judged by the same measure."""
    from jaxpp_mlir.planner.segment_costs import nested_flops

    return nested_flops(operation)
