// RUN: jaxpp-opt %inputs/treduce_mlp.mlir --pass-pipeline='builtin.module(jaxpp-check-attributes,jaxpp-inline-calls{max-depth=64},jaxpp-materialize-replica-groups,jaxpp-check-host-callbacks,jaxpp-verify-markers{num-stages=0 mpmd-dim=2 merge-parallel=false},jaxpp-check-shardings{mpmd-axis= submesh-size=0},jaxpp-normalize-loop,jaxpp-assign-segments{chained=true optional=true merge-parallel=false},jaxpp-segment-layer-scans{chained=true optional=true},jaxpp-segment-repeated-blocks{chained=true optional=false},jaxpp-choose-stages{schedule=ZeroBubble mpmd-dim=2 stage-split= memory-limit=0 fuse-tasks=false parallel-ranks=0},jaxpp-split-layer-scans,jaxpp-split-stacked-values,jaxpp-split-accumulators,jaxpp-split-backward,jaxpp-outline-stages,jaxpp-place-stages{mpmd-dim=2},jaxpp-outline-outer-code{replicate-max-bytes=1024},jaxpp-share-constant-tasks{max-bytes=1024},jaxpp-insert-transfers,jaxpp-verify-program)' | filecheck %s %jaxchecks

// The passes partition() runs for the same step (treduce_mlp.mlir) with
// schedule=ZeroBubble(2) on 2 ranks: those of treduce_mlp.mlir, with
// jaxpp-choose-stages recording ZeroBubble, which jaxpp-split-backward reads
// (default_pipeline_text(mpmd_dim=2, schedule="ZeroBubble"); partition's IR is
// the same). Stage 1's backward becomes
// stage1_bwd_i (the gradient of its input, which rank 0 waits for, sent as
// soon as it is computed) and stage1_bwd_w (its weight gradient and
// accumulation, which only the loop state reads); stage 0's whole backward
// feeds only its accumulator, so it is a single stage0_bwd_w. The code
// around the loop is the same as without the split.

// CHECK-LABEL: module @jit_step attributes {jaxpp.calls_inlined, jaxpp.num_ranks = 2 : i64, jaxpp.num_segments = 2 : i64, jaxpp.num_stages = 2 : i64
// CHECK-SAME:    jaxpp.schedule = {kind = "ZeroBubble", num_stages = 2 : i64}, jaxpp.stage_split = array<i64: 1, 1>
// CHECK-NEXT:    func.func public @main(%[[W0:.*]]: tensor<4x4xf32>, %[[W1:.*]]: tensor<4x4xf32>, %[[XS:.*]]: tensor<4x2x4xf32>, %[[YS:.*]]: tensor<4x2x4xf32>)
// CHECK-NEXT:      %[[PRE0:.*]]:2 = "jaxpp.task"() {callee = @pre0_r0, jaxpp.kind = "pre", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : () -> (tensor<4xf32>, tensor<4x4xf32>)
// CHECK-NEXT:      %[[PRE1:.*]]:2 = "jaxpp.task"() {callee = @pre0_r1, jaxpp.kind = "pre", jaxpp.rank = 1 : i64, jaxpp.stage = 0 : i64} : () -> (tensor<4xf32>, tensor<4x4xf32>)
// CHECK-NEXT:      %[[LOOP:.*]]:3 = "jaxpp.loop"(%[[PRE1]]#0, %[[PRE0]]#1, %[[PRE1]]#1) ({
// CHECK-NEXT:      ^bb0(%[[I:.*]]: tensor<i32>, %[[LOSSES:.*]]: tensor<4xf32>, %[[G0:.*]]: tensor<4x4xf32>, %[[G1:.*]]: tensor<4x4xf32>):
// CHECK-NEXT:        %[[F0:.*]]:2 = "jaxpp.task"(%[[I]], %[[XS]], %[[W0]]) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64}
// CHECK-NEXT:        "jaxpp.send"(%[[F0]]#1) {jaxpp.channel = 0 : i64, jaxpp.for_task = [0, "fwd"], jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64}
// CHECK-NEXT:        %[[H:.*]] = "jaxpp.recv"() {jaxpp.channel = 0 : i64, jaxpp.for_task = [1, "fwd"], jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64}
// JAX010-NEXT:        %[[F1:.*]]:4 = "jaxpp.task"(%[[I]], %[[YS]], %[[H]], %[[W1]], %[[LOSSES]]) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64}
// JAX011-NEXT:        %[[F1:.*]]:3 = "jaxpp.task"(%[[I]], %[[YS]], %[[H]], %[[W1]], %[[LOSSES]]) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64}
// JAX010-NEXT:        %[[BI1:.*]]:2 = "jaxpp.task"(%[[F1]]#2, %[[F1]]#1, %[[F1]]#0, %[[W1]]) {callee = @stage1_bwd_i, jaxpp.kind = "bwd_i", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>)
// JAX011-NEXT:        %[[BI1:.*]]:2 = "jaxpp.task"(%[[F1]]#1, %[[F1]]#0, %[[W1]]) {callee = @stage1_bwd_i, jaxpp.kind = "bwd_i", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>)
// CHECK-NEXT:        "jaxpp.send"(%[[BI1]]#1) {jaxpp.channel = 1 : i64, jaxpp.for_task = [1, "bwd_i"], jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64} : (tensor<2x4xf32>) -> ()
// CHECK-NEXT:        %[[BW1:.*]] = "jaxpp.task"(%[[BI1]]#0, %[[H]], %[[G1]]) {callee = @stage1_bwd_w, jaxpp.kind = "bwd_w", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT:        %[[DH:.*]] = "jaxpp.recv"() {jaxpp.channel = 1 : i64, jaxpp.for_task = [0, "bwd_w"], jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64} : () -> tensor<2x4xf32>
// CHECK-NEXT:        %[[BW0:.*]] = "jaxpp.task"(%[[F0]]#1, %[[DH]], %[[F0]]#0, %[[G0]]) {callee = @stage0_bwd_w, jaxpp.kind = "bwd_w", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// JAX010-NEXT:        "jaxpp.yield"(%[[F1]]#3, %[[BW0]], %[[BW1]]) : (tensor<4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> ()
// JAX011-NEXT:        "jaxpp.yield"(%[[F1]]#2, %[[BW0]], %[[BW1]]) : (tensor<4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> ()
// CHECK-NEXT:      }) {jaxpp.num_microbatches = 4 : i64, jaxpp.state_ranks = [1, 0, 1]}
// CHECK-NEXT:      %[[NEW0:.*]] = "jaxpp.task"(%[[LOOP]]#1, %[[W0]]) {callee = @post0_r0, jaxpp.kind = "post", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64}
// CHECK-NEXT:      %[[NEW1:.*]] = "jaxpp.task"(%[[LOOP]]#2, %[[W1]]) {callee = @post0_r1, jaxpp.kind = "post", jaxpp.rank = 1 : i64, jaxpp.stage = 0 : i64}
// CHECK-NEXT:      return %[[NEW0]], %[[NEW1]], %[[LOOP]]#0 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4xf32>
// CHECK-NEXT:    }

// The shared value (the gradient at stage 1's pre-activation) is computed
// once, in bwd_i, and passed to bwd_w.

// JAX010:         func.func private @stage1_bwd_i(%{{.*}}: tensor<2x4xf32>, %{{.*}}: tensor<2x4xf32>, %{{.*}}: tensor<2x4xf32>, %[[W:.*]]: tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
// JAX011:         func.func private @stage1_bwd_i(%{{.*}}: tensor<2x4xf32>, %{{.*}}: tensor<2x4xf32>, %[[W:.*]]: tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
// JAX010:           %[[DZ:.*]] = stablehlo.add
// JAX011:           %[[DZ:.*]] = stablehlo.multiply
// CHECK-NEXT:      %[[DX:.*]] = stablehlo.dot_general %[[DZ]], %[[W]], contracting_dims = [1] x [1]
// CHECK-NEXT:      return %[[DZ]], %[[DX]] : tensor<2x4xf32>, tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage1_bwd_w(%[[DZ:.*]]: tensor<2x4xf32>, %[[H:.*]]: tensor<2x4xf32>, %[[ACC:.*]]: tensor<4x4xf32>) -> tensor<4x4xf32> {
// CHECK-NEXT:      %[[DWT:.*]] = stablehlo.dot_general %[[DZ]], %[[H]], contracting_dims = [0] x [0]
// CHECK-NEXT:      %[[DW:.*]] = stablehlo.transpose %[[DWT]], dims = [1, 0]
// CHECK-NEXT:      %[[NEXT:.*]] = stablehlo.add %[[ACC]], %[[DW]] : tensor<4x4xf32>
// CHECK-NEXT:      return %[[NEXT]] : tensor<4x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage0_bwd_w(%{{.*}}, %[[ACC:[^:]*]]: tensor<4x4xf32>) -> tensor<4x4xf32> {
// CHECK-NOT:       stablehlo.custom_call
// CHECK:           %[[NEXT:.*]] = stablehlo.add %[[ACC]], %{{.*}} : tensor<4x4xf32>
// CHECK-NEXT:      return %[[NEXT]] : tensor<4x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @pre0_r0()
