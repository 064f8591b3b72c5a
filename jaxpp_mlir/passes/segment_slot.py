"""The segment slot: the base class of the segmenters and what they share; not a pass.

A segmenter cuts the step into segments: it tags every op of the stage block with
``jaxpp.segment``/``jaxpp.kind`` and the module with ``jaxpp.num_segments``. The segment
slot of the pipeline (``passes/pipelines.py``, ``segment_slot``) is a chain of them, each
run ``chained`` (it leaves a module a segmenter before it segmented) and all but the last
``optional`` (it leaves a module it does not apply to, ``Segmenter.applies``, to the next);
the last fails, where nothing applied, with ``nothing_to_segment`` (what the chain looked
for). Alone (``jaxpp-opt``), a segmenter segments or says why it cannot.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from typing import TYPE_CHECKING

from jax.interpreters.mlir import ir

from jaxpp_mlir import diagnostics
from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.passes.base import UNCHANGED, Evidence, ModulePass, Unchanged
from jaxpp_mlir.passes.segment_positions import segments_left
from jaxpp_mlir.runtime import records

if TYPE_CHECKING:
    from jaxpp_mlir.partition_options import PartitionOptions

#: What the segment slot looks for, in its order (the error of an unsegmented step lists
#: them; a new segmenter adds its line).
LOOKED_FOR: list[str] = [
    "stage markers at the top level of the step (of the function treduce applies to each "
    "microbatch)",
    "stage markers at the end of the body of a layer scan (jax.lax.scan, flax nn.scan or "
    "nnx.scan over stacked layer parameters)",
    "a layer scan without markers (a stablehlo.while of 2 or more iterations reading a "
    "stacked parameter [L, ...] a row at a time at its counter)",
    "repeated blocks without markers (modules numbered like layers_0..layers_N or "
    "h/0..h/N, or called several times, in the ops' locations)",
]


def nothing_to_segment(main: ir.Operation) -> diagnostics.PassFailed:
    """The located error of a step no segmenter applies to: at the treduce call (its
    loop) when there is one, else at the step."""
    loop = ir_utils.find_loop(main)
    where = (
        "the function treduce applies to each microbatch"
        if loop is not None
        else f"the step ({step_name(main)})"
    )
    return diagnostics.error(
        loop if loop is not None else main,
        f"no stage markers found in {where}: mark the end of every stage with "
        "jaxpp_mlir.pipeline_enter_stage (the last one after the last layer), or pass "
        "split_points=(...) naming the modules where stages start; looked for "
        + "; ".join(LOOKED_FOR),
    )


def step_name(main: ir.Operation) -> str:
    """The jitted function's name, as JAX names the module (``jit_step``: ``step``)."""
    module = ir_utils.parent_op(main)
    if module is None or "sym_name" not in module.attributes:
        return "@main"
    return ir.StringAttr(module.attributes["sym_name"]).value.removeprefix("jit_")


def is_segmented(module: ir.Operation) -> bool:
    return jaxpp.NUM_SEGMENTS_ATTR in module.attributes


def stage_markers(main: ir.Operation) -> list[ir.Operation]:
    """Every stage marker in ``main``, nested ones included, in order."""
    return [
        op
        for op in ir_utils.walk(main)
        if op.name in jaxpp.MARKER_OP_NAMES and jaxpp.is_stage_marker(op)
    ]


def markers_outside_loops(main: ir.Operation) -> list[ir.Operation]:
    """The stage markers of ``main`` that are not inside a ``stablehlo.while`` of its stage
    block (those end a layer scan's body: jaxpp-segment-layer-scans'), in order."""
    block = ir_utils.stage_block(main)
    outside = []
    for marker in stage_markers(main):
        owner = owner_in(marker, block)
        if owner is None or owner == marker or owner.name != ir_utils.WHILE_OP:
            outside.append(marker)
    return outside


def owner_in(op: ir.Operation, block: ir.Block) -> ir.Operation | None:
    """The op of ``block`` that is ``op`` or holds it (None: ``op`` is not inside it)."""
    current: ir.Operation | None = op
    while current is not None and current.block != block:
        current = ir_utils.parent_op(current)
    return current


@records.frozen
class Segmenter(ModulePass):
    """Base of the segmenters: the options of the chain and the order they share."""

    chained: bool = dataclasses.field(
        default=False,
        metadata={
            "help": "in the segment slot's chain: leave a module that a segmenter before it "
            "segmented unchanged"
        },
    )
    optional: bool = dataclasses.field(
        default=False,
        metadata={
            "help": "leave a module this segmenter does not apply to unchanged, for the next "
            "segmenter of the chain (else it fails, saying what it looked for)"
        },
    )

    @classmethod
    def for_partition(cls, options: PartitionOptions, **chain: bool) -> Segmenter:
        """The segmenter ``partition`` runs for ``options`` (``chain``: its place in the
        chain); a segmenter with options of its own reads them from ``options``."""
        return cls(**chain)

    def applies(self, module: ir.Operation) -> bool:
        """Whether this segmenter segments ``module`` (it has what the segmenter reads)."""
        raise NotImplementedError

    def check_order(self, module: ir.Operation, completed: Collection[str] = ()) -> None:
        if self.chained and is_segmented(module):
            return  # a segmenter before it in the chain segmented the module
        super().check_order(module, completed)

    @classmethod
    def finished(cls, module: ir.Operation) -> Evidence | None:
        if not is_segmented(module):
            return None
        return Evidence(
            module, f"the segments are already assigned (found {jaxpp.NUM_SEGMENTS_ATTR})"
        )

    def run(self, module: ir.Operation) -> Unchanged | None:
        if self.chained and is_segmented(module):
            return UNCHANGED
        if self.optional and not self.applies(module):
            return UNCHANGED
        return self.segment(module)

    def segment(self, module: ir.Operation) -> Unchanged | None:
        """Segments ``module`` (or fails, located, saying why it cannot)."""
        raise NotImplementedError


@records.frozen
class BlockSegmenter(Segmenter):
    """What the segmenters that cut by module paths declare alike: their place in the
    pipeline (after jaxpp-inline-calls and jaxpp-normalize-loop, once). Their machinery
    (``passes/module_blocks.py``) loads when one segments, not for a step with markers."""

    requires = ("jaxpp-normalize-loop", "jaxpp-inline-calls")

    @classmethod
    def unfinished(cls, module: ir.Operation) -> Evidence | None:
        return segments_left(module)
