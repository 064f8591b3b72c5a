"""How stage markers flow through a stage block: per op, the markers on the paths into it.

Shared by the passes that read it (jaxpp-verify-markers checks the markers against it,
jaxpp-assign-segments assigns segments from it); a helper, not a pass.
"""

from __future__ import annotations

import functools

from jax.interpreters.mlir import ir

from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.ir import utils as ir_utils


class MarkerFlow:
    """For every op of the stage block, by its position in ``ops``: the most forward
    markers (``forward``) and backward markers (``backward``) on a path into it, whether
    it depends on any stage marker (``anchored``) or on the microbatch
    (``per_microbatch``), the first backward marker upstream of it, the positions of the
    ops it reads from (``producers``, in the order it reads them) and its direction if it
    is a stage marker (None for other ops). ``loop_marker``: treduce's loop marker while
    it is still in the block (what reads it is per microbatch)."""

    def __init__(self, top_ops: list[ir.Operation], loop_marker: ir.Operation | None = None):
        self.ops = top_ops
        self.names: list[str] = []
        self.direction: list[str | None] = []
        self.forward: list[int] = []
        self.backward: list[int] = []
        self.anchored: list[bool] = []
        self.per_microbatch: list[bool] = []
        self.upstream_backward_marker: list[int | None] = []
        self.producers: list[list[int]] = []
        # Per op, the info of its results: ``value_info``.
        self._result_info: list[tuple[int, int, bool, bool, int | None]] = []
        # The position of the op defining each value of the block. Looked up by value:
        # asking a value for its defining op costs far more.
        self._position: dict[ir.Value, int] = {}
        position = self._position
        position_of = position.get
        result_info = self._result_info
        for index, op in enumerate(top_ops):
            name = op.name
            operands = ir_utils.operands_read(op)
            producers = [p for p in map(position_of, operands) if p is not None]
            forward = backward = 0
            anchored = per_microbatch = False
            upstream = None
            for producer in producers:
                stage, count, producer_anchored, producer_per_microbatch, marker = result_info[
                    producer
                ]
                forward = max(forward, stage)
                backward = max(backward, count)
                anchored = anchored or producer_anchored
                per_microbatch = per_microbatch or producer_per_microbatch
                if upstream is None:
                    upstream = marker
            direction = None
            if name in jaxpp.MARKER_OP_NAMES:
                if jaxpp.is_stage_marker(op):
                    direction = jaxpp.marker_direction(op)
                    anchored = True
                elif loop_marker is not None and op == loop_marker:
                    per_microbatch = True
            self.names.append(name)
            self.direction.append(direction)
            self.forward.append(forward)
            self.backward.append(backward)
            self.anchored.append(anchored)
            self.per_microbatch.append(per_microbatch)
            self.upstream_backward_marker.append(upstream)
            self.producers.append(producers)
            if direction == jaxpp.FORWARD:
                forward += 1
            elif direction is not None:
                backward += 1
                upstream = index
            result_info.append((forward, backward, anchored, per_microbatch, upstream))
            for result in op.results:
                position[result] = index

    @functools.cached_property
    def feeds_stage(self) -> list[int | None]:
        """Per op, the stage of the first forward marker it feeds (the stage it computes)."""
        # Users come after their producers: in reverse order each user hands its stage
        # to its producers before they are reached.
        fed: list[int | None] = [None] * len(self.ops)
        for index in reversed(range(len(self.ops))):
            stage = self.forward[index] if self.direction[index] == jaxpp.FORWARD else fed[index]
            if stage is None:
                continue
            for producer in self.producers[index]:
                known = fed[producer]
                if known is None or stage < known:
                    fed[producer] = stage
        return fed

    def forward_stage_of(self, producer: int) -> int | None:
        """The forward stage that computes the results of op ``producer`` for this
        microbatch, if they are forward code of a stage: downstream of stage markers, or
        upstream of one and computed from the microbatch (a weight or a constant belongs
        to no stage)."""
        stage, backward, anchored, per_microbatch, _ = self._result_info[producer]
        if backward > 0:
            return None
        if anchored:
            return stage
        return self.feeds_stage[producer] if per_microbatch else None

    def value_info(self, value: ir.Value) -> tuple[int, int, bool, bool, int | None]:
        """(forward stage, backward count, anchored, per microbatch, a backward marker
        upstream) of a value; values defined outside the stage block count as none."""
        producer = self._position.get(value)
        return _OUTSIDE_BLOCK if producer is None else self._result_info[producer]


_OUTSIDE_BLOCK = (0, 0, False, False, None)
