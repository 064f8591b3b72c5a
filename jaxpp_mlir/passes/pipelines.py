"""The pipelines ``partition()`` runs, beside the passes, one line of reason per step.

``stage_pipeline`` finds the stages (no outlining yet); the schedule is picked
between the two (it needs the number of stages); ``placement_pipeline``
outlines the stages, places them on ranks and connects them. Every setting
is an argument, and so a pass option: ``default_pipeline_text`` is the
``jaxpp-opt --pass-pipeline`` that reproduces a partition.
"""

from __future__ import annotations

from typing import Any

from jaxpp_mlir.passes.assign_stages import AssignStages
from jaxpp_mlir.passes.check_host_callbacks import CheckHostCallbacks
from jaxpp_mlir.passes.check_shardings import CheckShardings
from jaxpp_mlir.passes.inline_calls import InlineCalls
from jaxpp_mlir.passes.insert_transfers import InsertTransfers
from jaxpp_mlir.passes.materialize_replica_groups import MaterializeReplicaGroups
from jaxpp_mlir.passes.normalize_loop import NormalizeLoop
from jaxpp_mlir.passes.outline_outer_code import OutlineOuterCode
from jaxpp_mlir.passes.outline_stages import OutlineStages
from jaxpp_mlir.passes.pipeline import PipelineElement, make_element
from jaxpp_mlir.passes.place_stages import PlaceStages
from jaxpp_mlir.passes.restore_sharding_constraints import RestoreShardingConstraints
from jaxpp_mlir.passes.split_accumulators import SplitAccumulators
from jaxpp_mlir.passes.verify_markers import VerifyMarkers
from jaxpp_mlir.passes.verify_program import VerifyProgram

SHARDY_PROPAGATION = "sdy-propagation-pipeline"
DEFAULT_REPLICATE_MAX_BYTES = OutlineOuterCode.replicate_max_bytes


def stage_pipeline(
    *,
    num_stages: int = 0,
    mpmd_axis: str = "",
    submesh_size: int = 0,
    sharded: bool = False,
    stage_split: tuple[int, ...] = (),
    pack_accumulators: bool = False,
    pack_parameters: bool = False,
    pack_contraction_operands: bool = True,
) -> list[PipelineElement]:
    """The passes that find the stages (no outlining yet): ``segment_pipeline`` then
    ``grouping_pipeline`` (``partition`` runs the two apart, to choose the split
    between them)."""
    return segment_pipeline(
        num_stages=num_stages, mpmd_axis=mpmd_axis, submesh_size=submesh_size, sharded=sharded
    ) + grouping_pipeline(
        stage_split=stage_split,
        pack_accumulators=pack_accumulators,
        pack_parameters=pack_parameters,
        pack_contraction_operands=pack_contraction_operands,
    )


def segment_pipeline(
    *,
    num_stages: int = 0,
    mpmd_axis: str = "",
    submesh_size: int = 0,
    sharded: bool = False,
) -> list[PipelineElement]:
    """The passes that give every op its marked segment (as ``jaxpp.stage``).

    For a ``sharded`` step (one with an ``sdy.mesh``), Shardy's propagation
    runs first so that every value crossing a stage boundary has a sharding.
    """
    propagation = [
        # Shardy gives every value a sharding, so stage boundaries have one.
        PipelineElement(name=SHARDY_PROPAGATION, text=SHARDY_PROPAGATION),
        # Propagation drops the user's sharding constraints; they are put back.
        make_element(RestoreShardingConstraints()),
    ]
    return [
        # Markers inside called functions must be visible in @main.
        make_element(InlineCalls()),
        # shard_map collectives name mesh axes; jaxpp.loop would hide the mesh from them.
        make_element(MaterializeReplicaGroups()),
        # A host callback cannot run inside a stage program: refused early, located.
        make_element(CheckHostCallbacks()),
        # Stage markers must be well nested before stages are read from them (and agree
        # with the schedule's stage count, when one is known).
        make_element(VerifyMarkers(num_stages=num_stages)),
        # The step's shardings must fit one rank's submesh.
        make_element(CheckShardings(mpmd_axis=mpmd_axis, submesh_size=submesh_size)),
        *(propagation if sharded else []),
        # One jaxpp.loop with the microbatch loop's body, whatever JAX lowered.
        make_element(NormalizeLoop()),
        # Every op of the loop body gets its stage and kind (fwd/bwd).
        make_element(AssignStages()),
    ]


def grouping_pipeline(
    *,
    stage_split: tuple[int, ...] = (),
    pack_accumulators: bool = False,
    pack_parameters: bool = False,
    pack_contraction_operands: bool = True,
) -> list[PipelineElement]:
    """The passes that make stages of the segments and their state.

    A ``stage_split`` (segments per stage) prepends ``jaxpp-merge-stages``;
    ``pack_accumulators`` appends ``jaxpp-pack-accumulators``; ``pack_parameters``
    appends ``jaxpp-pack-parameters``, which leaves the operands of contractions
    alone unless ``pack_contraction_operands`` (``PartitionOptions`` has the same
    fields).
    """
    # The optional passes are imported only when asked for: a first partition
    # that runs none of them does not load them.
    merging, packing_accumulators, packing_parameters = [], [], []
    if stage_split:
        from jaxpp_mlir.passes.merge_stages import MergeStages

        merging = [make_element(MergeStages(stage_split=stage_split))]
    if pack_accumulators:
        from jaxpp_mlir.passes.pack_accumulators import PackAccumulators

        packing_accumulators = [make_element(PackAccumulators())]
    if pack_parameters:
        from jaxpp_mlir.passes.pack_parameters import PackParameters

        packing_parameters = [
            make_element(PackParameters(contraction_operands=pack_contraction_operands))
        ]
    return [
        # Optional: several neighbouring marked segments run as one stage.
        *merging,
        # Each stage accumulates its own gradients: no cross-stage accumulator.
        make_element(SplitAccumulators()),
        # Optional: fewer, larger accumulator buffers per launch.
        *packing_accumulators,
        # Optional: the parameters a stage reads as a few packed buffers.
        *packing_parameters,
    ]


def placement_pipeline(
    *,
    mpmd_dim: int,
    placement: tuple[int, ...] = (),
    split_backward: bool = False,
    replicate_max_bytes: int = DEFAULT_REPLICATE_MAX_BYTES,
) -> list[PipelineElement]:
    """The passes that outline the stages, place them on ranks (``placement``: the
    schedule's rank of each stage) and connect them."""
    splitting = []
    if split_backward:  # imported only when asked for, as the optional grouping passes
        from jaxpp_mlir.passes.split_backward import SplitBackward

        splitting = [make_element(SplitBackward())]
    return [
        # A schedule with separate input and weight gradients needs them as two tasks.
        *splitting,
        # Each (stage, kind) becomes a function: the stage programs.
        make_element(OutlineStages()),
        # Each stage goes to the rank its schedule gives it.
        make_element(PlaceStages(mpmd_dim=mpmd_dim, placement=placement)),
        # Code before and after the loop runs where its inputs live, as tasks.
        make_element(OutlineOuterCode(replicate_max_bytes=replicate_max_bytes)),
        # Values crossing ranks get explicit transfers.
        make_element(InsertTransfers()),
        # The program the plan builder reads is checked whole, located.
        make_element(VerifyProgram()),
    ]


def default_pipeline(
    *,
    mpmd_dim: int,
    placement: tuple[int, ...] = (),
    mpmd_axis: str = "",
    submesh_size: int = 0,
    sharded: bool = False,
) -> list[PipelineElement]:
    """The passes ``partition()`` runs, in order, for a schedule that does not split backwards.

    ``partition(x, mesh=m)`` runs ``default_pipeline(mpmd_dim=m.mpmd_dim,
    mpmd_axis=m.mpmd_axis_name, submesh_size=len(m.rank_devices(0)),
    sharded=<x has an sdy.mesh>)``; with the mesh arguments left out, the mesh
    checks are skipped.
    """
    return stage_pipeline(
        mpmd_axis=mpmd_axis, submesh_size=submesh_size, sharded=sharded
    ) + placement_pipeline(mpmd_dim=mpmd_dim, placement=placement)


def default_pipeline_text(**kwargs: Any) -> str:
    """``default_pipeline(**kwargs)`` in ``jaxpp-opt --pass-pipeline`` syntax."""
    elements = default_pipeline(**kwargs)
    return "builtin.module(" + ",".join(str(e) for e in elements) + ")"
