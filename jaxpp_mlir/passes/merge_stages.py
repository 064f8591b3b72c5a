"""jaxpp-merge-stages: merge neighbouring marked segments into the schedule's stages."""

from __future__ import annotations

import dataclasses

from jax.extend.mlir import ir

from jaxpp_mlir import diagnostics
from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.passes.base import Evidence, ModulePass, register_pass


@register_pass
@dataclasses.dataclass(frozen=True)
class MergeStages(ModulePass):
    """Merge neighbouring marked segments into stages: ``stage-split`` segments per stage.

    The markers a user writes end segments; a schedule with fewer stages than that
    runs several neighbouring segments as one stage. With ``stage-split=2,1,1,4``
    segments 0-1 become stage 0, segment 2 stage 1, segment 3 stage 2 and segments
    4-7 stage 3, forward and backward alike (an op of the backward of segment 5 is
    in the backward of stage 3). Only the stage numbers change: the markers between
    segments of one stage stay until jaxpp-outline-stages drops them with the others,
    and ordering tasks by (forward stages ascending, then backward stages descending)
    stays a topological order, since the merge keeps the segments' order.

    Precondition: every op of the stage block but its terminator carries
    ``jaxpp.stage``/``jaxpp.kind`` (jaxpp-assign-stages), the module carries
    ``jaxpp.num_stages`` (the segment count), the stages are not outlined yet and
    not merged yet; ``stage-split`` has positive entries summing to the segment count.
    Postcondition: ``jaxpp.stage`` of every op is its merged stage,
    ``jaxpp.num_stages`` is ``len(stage-split)`` and the module carries
    ``jaxpp.stage_split`` (the segments per stage). An empty ``stage-split`` leaves
    the module unchanged.
    """

    name = "jaxpp-merge-stages"
    stage_split: tuple[int, ...] = dataclasses.field(
        default=(),
        metadata={
            "help": "marked segments in each stage, comma separated (empty: no merge)",
            "min": 1,
        },
    )

    requires = ("jaxpp-assign-stages",)
    must_precede = ("jaxpp-outline-stages", "jaxpp-split-backward")

    @classmethod
    def finished(cls, module: ir.Operation) -> Evidence | None:
        if jaxpp.get_stage_split(module) is None:
            return None
        return Evidence(module, f"the stages are already merged (found {jaxpp.STAGE_SPLIT_ATTR})")

    def run(self, module: ir.Operation) -> None:
        if not self.stage_split:
            return
        num_segments = jaxpp.get_int_attr(module, jaxpp.NUM_STAGES_ATTR)
        if sum(self.stage_split) != num_segments:
            raise diagnostics.error(
                module,
                f"stage split {list(self.stage_split)} covers {sum(self.stage_split)} marked "
                f"segments but the program has {num_segments}: give each stage's segment "
                f"count so that they sum to {num_segments}",
            )
        stage_of = [stage for stage, count in enumerate(self.stage_split) for _ in range(count)]
        main = ir_utils.get_main(module)
        block = ir_utils.stage_block(main)
        for op in ir_utils.block_ops(block)[:-1]:
            jaxpp.set_stage(op, stage_of[jaxpp.get_stage(op)], jaxpp.get_kind(op))
        jaxpp.set_int_attr(module, jaxpp.NUM_STAGES_ATTR, len(self.stage_split))
        jaxpp.set_stage_split(module, self.stage_split)
