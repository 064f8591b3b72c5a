"""jaxpp-segment-split-points: cut the step into segments before the modules the user names."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from jax.interpreters.mlir import ir

from jaxpp_mlir import diagnostics
from jaxpp_mlir.passes.base import register_pass
from jaxpp_mlir.passes.segment_slot import BlockSegmenter
from jaxpp_mlir.runtime import records

if TYPE_CHECKING:
    from jaxpp_mlir.passes.module_blocks import Block, ModuleIndex


@register_pass
@records.frozen
class SegmentSplitPoints(BlockSegmenter):
    """Cut the step into segments before the modules ``points`` names (no markers needed).

    A segmenter of the segment slot (``passes/pipelines.py``), after PyTorch pipelining's
    ``split_spec``, for models one cannot edit: ``partition(..., split_points=(...))``.
    Each split point is a module path, as JAX's name stack in the ops' locations spells
    it (flax linen and haiku module names, ``jax.named_scope``): ``layers_4``,
    ``transformer/h/4``, ``Model/encoder/layers_2``. It names the module whose path ends
    with it, the shallowest such module; ``path#k`` names call k (from 0) of a module that
    runs several times. Segment k+1 starts at the first forward op of the k-th point's
    module; the backward of the segments follows the backward of the modules (see
    ``passes/module_blocks.py``): the ops before the first point (the embedding) and
    their backward are segment 0, those after the last point (the head, the loss) the
    last segment, and ops in no module go with the ops they compute from. Stage markers,
    if any, are ignored (they are identities).

    Errors, located at the microbatch loop (the ``treduce`` call), else ``@main``: a
    point naming no module lists the repeated blocks found; a point naming several
    (modules at the same depth, or a module called several times without ``#k``) lists
    them; points out of the model's order, two points starting at the same op, and a
    first point with nothing before it are refused.

    Precondition: no ``func.call`` in ``@main`` (jaxpp-inline-calls); the microbatch
    loop, if any, normalized (jaxpp-normalize-loop); the ops keep JAX's locations.
    Postcondition: every op of the stage block but its terminator carries
    ``jaxpp.segment`` and ``jaxpp.kind``; the module carries ``jaxpp.num_segments`` (the
    number of points plus one), ``jaxpp.segmenter`` and ``jaxpp.segment_starts`` (the
    module each segment after the first starts at); ordering by (forward segments
    ascending, then backward segments descending) is a topological order.

    Options: ``points``, the split points in the model's order (comma-separated).
    """

    name = "jaxpp-segment-split-points"
    points: tuple[str, ...] = dataclasses.field(
        default=(),
        metadata={"help": "module paths (layers_4, transformer/h/4, path#k) where segments start"},
    )

    def applies(self, module: ir.Operation) -> bool:
        return True  # the user named the points: never left to another segmenter

    def segment(self, module: ir.Operation) -> None:
        from jaxpp_mlir.passes.module_blocks import segment_by_blocks

        segment_by_blocks(module, self.name, self._cuts)

    def _cuts(self, index: ModuleIndex, step: ir.Operation) -> list[Block]:
        if not self.points:
            raise diagnostics.error(
                step, f"{self.name} needs split points: points=layers_4,layers_8 (module paths)"
            )
        cuts: list[Block] = []
        for point in self.points:
            found = index.resolve(point)
            if isinstance(found, str):
                raise diagnostics.error(step, found)
            if cuts and found.first_forward <= cuts[-1].first_forward:
                earlier = cuts[-1].name
                if found.first_forward == cuts[-1].first_forward:
                    why = f"split points '{earlier}' and {found.name!r} start at the same op"
                else:
                    why = (
                        f"split point {found.name!r} runs before {earlier!r}: list the split "
                        "points in the order the model runs them"
                    )
                raise diagnostics.error(step, why)
            cuts.append(found)
        first = cuts[0]
        if not any(index.anchored[i] and not index.backward[i] for i in range(first.first_forward)):
            raise diagnostics.error(
                step,
                f"split point {first.name!r} is where the step's first module starts: "
                "nothing would run before it (split points name where stages 1, 2, ... "
                "start, not stage 0)",
            )
        return cuts
