"""jaxpp-segment-repeated-blocks: cut a step without stage markers at its repeated blocks."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from jax.interpreters.mlir import ir

from jaxpp_mlir import diagnostics
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.passes import segment_slot
from jaxpp_mlir.passes.base import register_pass
from jaxpp_mlir.passes.segment_slot import BlockSegmenter
from jaxpp_mlir.runtime import records

if TYPE_CHECKING:
    from jaxpp_mlir.passes.module_blocks import Block, ModuleIndex


@register_pass
@records.frozen
class SegmentRepeatedBlocks(BlockSegmenter):
    """Cut a step without stage markers into one segment per repeated block of the model.

    A segmenter of the segment slot (``passes/pipelines.py``) for models one cannot edit:
    ``partition(..., schedule=Std1F1B(4))`` of a step with no stage markers. The repeated
    blocks are read from the module paths of JAX's name stack in the ops' locations (flax
    linen and haiku module names, ``jax.named_scope``): the members of the outermost
    families of numbered modules (``layers_0..layers_N``, ``blocks_i``, ``h_i``,
    Hugging Face's ``h/0..h/N``, penzai's ``0..N``; all families at that depth, in
    program order: an encoder's and a decoder's blocks), else the calls of the
    outermost module that runs several times (of several, the one before whose calls
    the forward carries the fewest elements, a block's first module rather than one
    after its residual branch; then the heaviest). Each block
    starts a segment, so jaxpp-choose-stages and the planner balance them into stages
    as they do marked segments; the ops before the first block (the embedding) join the
    first segment, those after the last (the head, the loss) the last, in the forward
    and the backward (see ``passes/module_blocks.py``).

    In the segment slot's chain it runs last, on a step that neither markers
    (jaxpp-assign-segments) nor a layer scan (jaxpp-segment-layer-scans) segmented; with no
    repeated blocks either, it fails with everything the chain looked for. Alone, a step
    with markers, or with neither markers nor repeated blocks, is a located error that says
    what was looked for.

    Precondition: no ``func.call`` in ``@main`` (jaxpp-inline-calls); the microbatch
    loop, if any, normalized (jaxpp-normalize-loop); the ops keep JAX's locations.
    Postcondition (when it applies): every op of the stage block but its terminator
    carries ``jaxpp.segment`` and ``jaxpp.kind``; the module carries
    ``jaxpp.num_segments`` (the number of blocks), ``jaxpp.segmenter`` and
    ``jaxpp.segment_starts`` (the block each segment after the first starts at);
    ordering by (forward segments ascending, then backward segments descending) is a
    topological order.
    """

    name = "jaxpp-segment-repeated-blocks"

    def applies(self, module: ir.Operation) -> bool:
        main = ir_utils.find_main(module)
        if main is None or segment_slot.stage_markers(main):
            return False  # the markers say where stages end: jaxpp-assign-segments
        return bool(_index(module).repeated_blocks())

    def segment(self, module: ir.Operation) -> None:
        main = ir_utils.get_main(module)
        if segment_slot.stage_markers(main):
            raise diagnostics.error(
                main,
                "the step has stage markers: jaxpp-assign-segments cuts it at them "
                "(jaxpp-segment-repeated-blocks cuts a step without markers)",
            )
        from jaxpp_mlir.passes.module_blocks import segment_by_blocks

        segment_by_blocks(module, self.name, functools.partial(self._repeated_blocks, main))

    def _repeated_blocks(
        self, main: ir.Operation, index: ModuleIndex, step: ir.Operation
    ) -> list[Block]:
        blocks = index.repeated_blocks()
        if blocks:
            return blocks[1:]
        if self.chained:  # the last of the segment slot's chain: say all it looked for
            raise segment_slot.nothing_to_segment(main)
        raise diagnostics.error(
            step,
            "no stage markers found, and no repeated blocks to split the step at (looked "
            "for modules numbered like layers_0..layers_N or h/0..h/N, or called several "
            "times, in the ops' locations): mark the end of every stage with "
            "jaxpp_mlir.pipeline_enter_stage, or pass split_points=(...) naming the "
            "modules where stages start",
        )


def _index(module: ir.Operation) -> ModuleIndex:
    from jaxpp_mlir.passes.module_blocks import ModuleIndex

    main = ir_utils.get_main(module)
    return ModuleIndex(ir_utils.block_ops(ir_utils.stage_block(main))[:-1])
