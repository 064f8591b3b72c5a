"""The words jaxpp's IR is spelled with: task kinds, op and attribute names.

Plain strings with no import, so that schedules, the plan builder and the
passes share them without loading MLIR; ``dialect.ops`` re-exports them next
to the builders and accessors that use them.
"""

# Task kinds: the forward of a stage, its full backward, and the two halves of a
# split backward (input gradient, weight gradient).
FORWARD = "fwd"
BACKWARD = "bwd"
BACKWARD_INPUT = "bwd_i"
BACKWARD_WEIGHT = "bwd_w"
KINDS = (FORWARD, BACKWARD, BACKWARD_INPUT, BACKWARD_WEIGHT)
# Phases of the code outside the microbatch loop.
PRE = "pre"
POST = "post"

# Markers are optimization barriers tagged with MARKER_ATTR: "fwd"/"bwd" for a stage marker,
# "loop" for treduce's loop marker (users' own barriers carry no such attribute).
MARKER_OP = "stablehlo.optimization_barrier"
MARKER_ATTR = "jaxpp.marker"
LOOP_MARKER = "loop"
# The older custom-call form of the markers, still read from saved modules.
ENTER_STAGE_TARGET = "jaxpp.enter_stage"
DIRECTION_ATTR = "jaxpp.direction"
STAGE_NAME_ATTR = "jaxpp.stage_name"  # the label mark_stage_end(..., name=) gives a stage
# The JAX primitive of the stage marker: JAX names a traced marker's location
# "<name stack>/jaxpp_enter_stage" ("transpose(jvp())/..." where autodiff placed it).
MARKER_PRIMITIVE = "jaxpp_enter_stage"

LOOP_MARKER_TARGET = "jaxpp.loop_marker"

LOOP_NUM_MICROBATCHES_ATTR = "jaxpp.num_microbatches"
# A schedule as a dictionary attribute (``schedules.record``): on the loop marker and
# then the jaxpp.loop, the one treduce was given; on the module, the one
# jaxpp-choose-stages chose.
SCHEDULE_ATTR = "jaxpp.schedule"
LOOP_REDUCTIONS_ATTR = "jaxpp.reductions"
LOOP_STAGE_MARKERS_ATTR = "jaxpp.stage_markers"

TASK_OP = "jaxpp.task"
SEND_OP = "jaxpp.send"
RECV_OP = "jaxpp.recv"
LOOP_OP = "jaxpp.loop"
YIELD_OP = "jaxpp.yield"
REPLICATED_OP = "jaxpp.replicated"
# A program input split along its leading axis over ranks, and a program output put
# together from such pieces (stacked layer parameters of a scan split into stages).
CHUNK_OP = "jaxpp.chunk"
ASSEMBLE_OP = "jaxpp.assemble"
JAXPP_OPS = (TASK_OP, SEND_OP, RECV_OP, LOOP_OP, YIELD_OP, REPLICATED_OP, CHUNK_OP, ASSEMBLE_OP)
# On jaxpp.chunk: the first row of its piece along axis 0, and how many rows it has.
CHUNK_START_ATTR = "jaxpp.start"
CHUNK_ROWS_ATTR = "jaxpp.rows"
STATE_RANKS_ATTR = "jaxpp.state_ranks"
# On a transfer in a loop body: [stage, kind] of the task it feeds (recv) or drains (send).
FOR_TASK_ATTR = "jaxpp.for_task"

CALLEE_ATTR = "callee"
# Segments are what the segmenter (jaxpp-assign-segments: the markers) cuts the step
# into; stages are what jaxpp-choose-stages makes of them (one or more segments each).
SEGMENT_ATTR = "jaxpp.segment"
NUM_SEGMENTS_ATTR = "jaxpp.num_segments"
# On a loop of layers (a ``stablehlo.while`` whose iterations are segments, tagged by
# jaxpp-segment-layer-scans): ``[first, count]``, the segments its iterations cover
# (its ``jaxpp.segment`` is the first). Once jaxpp-choose-stages ran: which stage takes
# which of them, ``[stage, first, count, ...]`` in the loop's segment offsets, in order
# (an offset is the layer: the forward loop's iteration number).
SEGMENTS_ATTR = "jaxpp.segments"
STAGE_ROWS_ATTR = "jaxpp.stage_rows"
# On the module, from a segmenter that cuts the step by module paths: its pass name (a
# later segmenter of the segment slot leaves such a module alone) and the module path
# (a Block name, ``Model/layers_4``) each segment after the first starts at.
SEGMENTER_ATTR = "jaxpp.segmenter"
SEGMENT_STARTS_ATTR = "jaxpp.segment_starts"
STAGE_ATTR = "jaxpp.stage"
KIND_ATTR = "jaxpp.kind"
RANK_ATTR = "jaxpp.rank"
RANKS_ATTR = "jaxpp.ranks"  # on jaxpp.replicated: the rank holding each operand
PEER_ATTR = "jaxpp.peer"
CHANNEL_ATTR = "jaxpp.channel"
NUM_STAGES_ATTR = "jaxpp.num_stages"
# On the module once jaxpp-choose-stages ran: the segments in each stage, and (where it
# chose or checked a split with the planner) the split's estimate, a dictionary.
STAGE_SPLIT_ATTR = "jaxpp.stage_split"
STAGE_ESTIMATE_ATTR = "jaxpp.stage_estimate"
NUM_RANKS_ATTR = "jaxpp.num_ranks"
# On the module once jaxpp-inline-calls ran (a unit attribute).
CALLS_INLINED_ATTR = "jaxpp.calls_inlined"

FRONTEND_ATTRIBUTES = "mhlo.frontend_attributes"
CUSTOM_CALL_OP = "stablehlo.custom_call"
# The ops a stage or loop marker can be (its two forms): a name test that spares the
# marker accessors' call on every other op in a walk.
MARKER_OP_NAMES = (MARKER_OP, CUSTOM_CALL_OP)
SHARDING_ATTR = "sdy.sharding"  # Shardy's per-value sharding of arguments, results and ops
