"""Segment positions of the ops of a stage block, written as their segment and kind tags.

A position is a forward segment (0..N-1) or a segment's backward (position 2N-1-s for
segment s): ordering ops by position puts the forward segments in order, then the
backward segments from the last. Shared by the segmenters (jaxpp-assign-segments,
jaxpp-segment-split-points, jaxpp-segment-repeated-blocks); a helper, not a pass.
"""

from __future__ import annotations

from jax.interpreters.mlir import ir

from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.passes.base import Evidence, find_untagged


def segments_left(module: ir.Operation) -> Evidence | None:
    """Work left to a segmenter (its ``unfinished``): an op of the stage block with
    neither a segment nor a stage (a segment becomes a stage once jaxpp-choose-stages
    ran), else a module without ``jaxpp.num_segments``."""
    return find_untagged(
        module,
        lambda op: jaxpp.has_segment(op) or jaxpp.has_stage(op),
        "segment",
        jaxpp.NUM_SEGMENTS_ATTR,
    )


def place_unanchored(producers: list[list[int]], positions: list[int | None]) -> None:
    """Places ops that depend on nothing that positions them (no marker, no scan: position
    None) with their earliest user (position 0 if none)."""
    # Users come after their producers: in reverse order every user of an op is placed
    # before the op, and has handed its position to its producers.
    earliest_user: list[int | None] = [None] * len(positions)
    for index in reversed(range(len(positions))):
        position = positions[index]
        if position is None:
            known = earliest_user[index]
            position = positions[index] = 0 if known is None else known
        for producer in producers[index]:
            known = earliest_user[producer]
            if known is None or position < known:
                earliest_user[producer] = position


def set_segments(top_ops: list[ir.Operation], positions: list[int], num_segments: int) -> None:
    """Tags every op with the segment and kind of its position (forward segments, then the
    backward segments from the last). The tags of a position are built once, on its first
    op, and copied onto the others."""
    tags_at: dict[int, tuple[ir.Attribute, ir.Attribute]] = {}
    for op, position in zip(top_ops, positions, strict=True):
        attributes = op.attributes
        tags = tags_at.get(position)
        if tags is None:
            if position < num_segments:
                jaxpp.set_segment(op, position, jaxpp.FORWARD)
            else:
                jaxpp.set_segment(op, 2 * num_segments - 1 - position, jaxpp.BACKWARD)
            tags_at[position] = (attributes[jaxpp.SEGMENT_ATTR], attributes[jaxpp.KIND_ATTR])
        else:
            attributes[jaxpp.SEGMENT_ATTR], attributes[jaxpp.KIND_ATTR] = tags
