"""The pipeline ``partition()`` runs, declared once, with one line of reason per step.

``default_pipeline(options, mpmd_dim=..., ...)`` is every pass ``partition`` runs, in
order, built from its options and the mesh alone: each setting is a pass option, and
each decision one pass makes for a later one (the stages, the schedule, whether the
backward is split, the rank of each stage, task fusion) travels in the attributes it
writes, never through the driver. ``default_pipeline_text`` is the same pipeline in
``jaxpp-opt --pass-pipeline`` syntax, and reproduces a partition.

The segment slot holds the passes that cut the step into segments (``segment_slot``):
with ``PartitionOptions.split_points``, jaxpp-segment-split-points alone; else by default
(``PartitionOptions.segmenter == "auto"``) the chain ``SEGMENT_CHAIN``, in which each
segmenter segments the module only when no segmenter before it did and it applies
(``passes/segment_slot.py``), the last one failing with what the chain looked for; else
the one of ``SEGMENTERS`` the option names. A new segmenter is its pass file (a
``segment_slot.Segmenter``), its line in ``SEGMENTERS`` and its place in the chain; a
new way to choose stages is a mode of jaxpp-choose-stages (``passes/choose_stages.py``).
"""

from __future__ import annotations

from typing import Any

from jaxpp_mlir.partition_options import PartitionOptions
from jaxpp_mlir.passes.assign_segments import AssignSegments
from jaxpp_mlir.passes.check_attributes import CheckAttributes
from jaxpp_mlir.passes.check_host_callbacks import CheckHostCallbacks
from jaxpp_mlir.passes.check_shardings import CheckShardings
from jaxpp_mlir.passes.choose_stages import ChooseStages
from jaxpp_mlir.passes.inline_calls import InlineCalls
from jaxpp_mlir.passes.insert_transfers import InsertTransfers
from jaxpp_mlir.passes.materialize_replica_groups import MaterializeReplicaGroups
from jaxpp_mlir.passes.normalize_loop import NormalizeLoop
from jaxpp_mlir.passes.outline_outer_code import OutlineOuterCode
from jaxpp_mlir.passes.outline_stages import OutlineStages
from jaxpp_mlir.passes.pipeline import PipelineElement, make_element
from jaxpp_mlir.passes.place_stages import PlaceStages
from jaxpp_mlir.passes.restore_sharding_constraints import RestoreShardingConstraints
from jaxpp_mlir.passes.segment_layer_scans import SegmentLayerScans
from jaxpp_mlir.passes.segment_repeated_blocks import SegmentRepeatedBlocks
from jaxpp_mlir.passes.segment_slot import Segmenter
from jaxpp_mlir.passes.segment_split_points import SegmentSplitPoints
from jaxpp_mlir.passes.share_constant_tasks import ShareConstantTasks
from jaxpp_mlir.passes.split_accumulators import SplitAccumulators
from jaxpp_mlir.passes.split_backward import SplitBackward
from jaxpp_mlir.passes.split_layer_scans import SplitLayerScans
from jaxpp_mlir.passes.split_stacked_values import SplitStackedValues
from jaxpp_mlir.passes.verify_markers import VerifyMarkers
from jaxpp_mlir.passes.verify_program import VerifyProgram

SHARDY_PROPAGATION = "sdy-propagation-pipeline"

#: The passes that can fill the segment slot, by the name ``PartitionOptions.segmenter``
#: takes; each writes ``jaxpp.segment``/``jaxpp.kind`` and ``jaxpp.num_segments``.
SEGMENTERS: dict[str, type[Segmenter]] = {
    "markers": AssignSegments,  # the stage markers the user wrote end the segments
    # A step without markers: each of the model's repeated blocks (layers_0..layers_N)
    "repeated-blocks": SegmentRepeatedBlocks,
    "layer-scans": SegmentLayerScans,  # each iteration of a scan over stacked layers
}
#: ``PartitionOptions.segmenter``'s default: the chain below.
AUTO_SEGMENTER = "auto"
#: The segment slot's chain, in order: the first segmenter that applies segments the step.
SEGMENT_CHAIN: tuple[str, ...] = ("markers", "layer-scans", "repeated-blocks")


def default_pipeline(
    options: PartitionOptions | None = None,
    *,
    mpmd_dim: int = 0,
    mpmd_axis: str = "",
    submesh_size: int = 0,
    sharded: bool = False,
    schedule: str = "",
    schedule_stages: int = 0,
    parallel_ranks: int = 0,
) -> list[PipelineElement]:
    """Every pass ``partition`` runs, in order.

    ``partition(x, mesh=m, schedule=s, options=o)`` runs ``default_pipeline(o,
    mpmd_dim=m.mpmd_dim, mpmd_axis=m.mpmd_axis_name, submesh_size=<devices per rank>,
    sharded=<x has an sdy.mesh>, schedule=<s as jaxpp-choose-stages' option>,
    schedule_stages=s.num_stages, parallel_ranks=<ranks computing at once>)``; with the
    mesh arguments left out, the mesh checks are skipped.
    """
    options = PartitionOptions() if options is None else options
    return [
        # Every jaxpp attribute (a marker's direction, a loop's microbatch count) is of its
        # kind before any pass reads one: a misspelt marker would be a plain barrier.
        make_element(CheckAttributes()),
        # Markers inside called functions must be visible in @main.
        make_element(InlineCalls()),
        # shard_map collectives name mesh axes; jaxpp.loop would hide the mesh from them.
        make_element(MaterializeReplicaGroups()),
        # A host callback cannot run inside a stage program: refused early, located.
        make_element(CheckHostCallbacks()),
        # Stage markers must be well nested before segments are read from them (and agree
        # with the schedule's stage count, when one is given, or else the mesh's ranks).
        make_element(
            VerifyMarkers(
                num_stages=schedule_stages,
                mpmd_dim=mpmd_dim,
                merge_parallel=options.merge_parallel_markers,
            )
        ),
        # The step's shardings must fit one rank's submesh.
        make_element(CheckShardings(mpmd_axis=mpmd_axis, submesh_size=submesh_size)),
        # (Sharded steps) Shardy gives every value a sharding, so stage boundaries have one;
        # the user's sharding constraints it drops are put back.
        *_sharding_propagation(sharded),
        # One jaxpp.loop with the microbatch loop's body, whatever JAX lowered.
        make_element(NormalizeLoop()),
        # The segment slot: every op of the loop body gets its segment and kind (fwd/bwd).
        *segment_slot(options),
        # The stage decision: segments grouped into stages, the schedule chosen, recorded.
        make_element(
            ChooseStages(
                schedule=schedule,
                mpmd_dim=mpmd_dim,
                stage_split=options.stage_split or (),
                memory_limit=options.memory_limit_bytes or 0,
                fuse_tasks=options.fuse_tasks,
                parallel_ranks=parallel_ranks,
            )
        ),
        # A layer scan spanning several stages becomes one loop per stage over its layers.
        make_element(SplitLayerScans()),
        # A layer scan split into stages: each stage holds its rows of the stacked
        # parameters, gradients and optimizer state, from the inputs (jaxpp.chunk) to the
        # outputs (jaxpp.assemble); needs the stages and runs while their ops are in place.
        make_element(SplitStackedValues()),
        # Each stage accumulates its own gradients: no cross-stage accumulator.
        make_element(SplitAccumulators()),
        # Optional: fewer, larger accumulator buffers, and packed parameters, per launch.
        *_packing(options),
        # A schedule with separate input and weight gradients needs them as two tasks.
        make_element(SplitBackward()),
        # Each (stage, kind) becomes a function: the stage programs.
        make_element(OutlineStages()),
        # Each stage goes to the rank its schedule gives it.
        make_element(PlaceStages(mpmd_dim=mpmd_dim)),
        # Code before and after the loop runs where its inputs live, as tasks.
        make_element(OutlineOuterCode(replicate_max_bytes=options.replicate_max_bytes)),
        # Ranks whose zero accumulators differ by a scalar make them in one program text,
        # compiled once instead of once per variant.
        make_element(ShareConstantTasks()),
        # Values crossing ranks get explicit transfers.
        make_element(InsertTransfers()),
        # The program the plan builder reads is checked whole, located.
        make_element(VerifyProgram()),
    ]


def segment_slot(options: PartitionOptions) -> list[PipelineElement]:
    """The segmenters of the slot: jaxpp-segment-split-points for ``split_points``, else
    ``SEGMENT_CHAIN`` for ``segmenter="auto"`` (each chained, all but the last optional:
    ``passes/segment_slot.py``), else the one named."""
    if options.split_points:
        return [make_element(SegmentSplitPoints(points=options.split_points))]
    if options.segmenter != AUTO_SEGMENTER:
        return [make_element(SEGMENTERS[options.segmenter].for_partition(options))]
    last = len(SEGMENT_CHAIN) - 1
    return [
        make_element(
            SEGMENTERS[name].for_partition(options, chained=True, optional=position < last)
        )
        for position, name in enumerate(SEGMENT_CHAIN)
    ]


def segment_pipeline(
    options: PartitionOptions | None = None, **target: Any
) -> list[PipelineElement]:
    """The start of ``default_pipeline`` up to and including the segment slot: what
    ``plan_pipeline`` runs before asking the planner about the segments."""
    elements = default_pipeline(options, **target)
    segmenter = next(i for i, e in enumerate(elements) if e.name == ChooseStages.name) - 1
    return elements[: segmenter + 1]


def default_pipeline_text(options: PartitionOptions | None = None, **target: Any) -> str:
    """``default_pipeline(options, **target)`` in ``jaxpp-opt --pass-pipeline`` syntax."""
    elements = default_pipeline(options, **target)
    return "builtin.module(" + ",".join(str(e) for e in elements) + ")"


def _sharding_propagation(sharded: bool) -> list[PipelineElement]:
    if not sharded:
        return []
    return [
        PipelineElement(name=SHARDY_PROPAGATION, text=SHARDY_PROPAGATION),
        make_element(RestoreShardingConstraints()),
    ]


def _packing(options: PartitionOptions) -> list[PipelineElement]:
    # Imported only when asked for: a partition that runs neither does not load them.
    elements = []
    if options.pack_accumulators:
        from jaxpp_mlir.passes.pack_accumulators import PackAccumulators

        elements.append(make_element(PackAccumulators()))
    if options.pack_parameters:
        from jaxpp_mlir.passes.pack_parameters import PackParameters

        elements.append(
            make_element(PackParameters(contraction_operands=options.pack_contraction_operands))
        )
    return elements
