// RUN: jaxpp-opt %inputs/treduce_mlp.mlir --pass-pipeline='builtin.module(jaxpp-check-attributes,jaxpp-inline-calls{max-depth=64},jaxpp-materialize-replica-groups,jaxpp-check-host-callbacks,jaxpp-verify-markers{num-stages=0 mpmd-dim=2 merge-parallel=false},jaxpp-check-shardings{mpmd-axis= submesh-size=0},jaxpp-normalize-loop,jaxpp-assign-segments{chained=true optional=true merge-parallel=false},jaxpp-segment-layer-scans{chained=true optional=true},jaxpp-segment-repeated-blocks{chained=true optional=false},jaxpp-choose-stages{schedule= mpmd-dim=2 stage-split= memory-limit=0 fuse-tasks=false parallel-ranks=0},jaxpp-split-layer-scans,jaxpp-split-stacked-values,jaxpp-split-accumulators,jaxpp-split-backward,jaxpp-outline-stages,jaxpp-place-stages{mpmd-dim=2},jaxpp-outline-outer-code{replicate-max-bytes=1024},jaxpp-share-constant-tasks{max-bytes=1024},jaxpp-insert-transfers,jaxpp-verify-program)' | filecheck %s %jaxchecks

// default_pipeline_text(mpmd_dim=2): the passes
// partition() runs for a treduce step on 2 ranks with the default schedule
// (Std1F1B(2): stage s on rank s; partition's IR is the same), on the
// captured 2-stage MLP step of tests/lit/regenerate_inputs.py (treduce over
// 4 microbatches of value_and_grad, losses concatenated, gradients summed,
// then SGD).
//
// The loop carries the state only: the concatenated losses (updated by the
// forward of stage 1, where the loss is computed, so on rank 1) and one
// gradient accumulator per stage (rank 0, rank 1), jaxpp.state_ranks =
// [1, 0, 1]. Its body is one microbatch: the four tasks in 1F1B's dependency
// order, the activation and its gradient crossing ranks through a send/recv
// pair on their own channel, all inside the loop. Each rank zeroes its own
// accumulators before the loop (pre0_r*; rank 0's task makes rank 1's losses
// buffer too, unused, so both are one program: jaxpp-share-constant-tasks) and
// updates its own weight after it
// (post0_r*), so nothing crosses ranks outside the loop; the losses are
// returned from the loop as they are.

// CHECK-LABEL: module @jit_step attributes {jaxpp.calls_inlined, jaxpp.num_ranks = 2 : i64, jaxpp.num_segments = 2 : i64, jaxpp.num_stages = 2 : i64
// CHECK-NEXT:    func.func public @main(%[[W0:.*]]: tensor<4x4xf32>, %[[W1:.*]]: tensor<4x4xf32>, %[[XS:.*]]: tensor<4x2x4xf32>, %[[YS:.*]]: tensor<4x2x4xf32>) -> (tensor<4x4xf32> {jax.result_info = "result[0][0]"}, tensor<4x4xf32> {jax.result_info = "result[0][1]"}, tensor<4xf32> {jax.result_info = "result[1]"}) {
// CHECK-NEXT:      %[[PRE0:.*]]:2 = "jaxpp.task"() {callee = @pre0_r0, jaxpp.kind = "pre", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : () -> (tensor<4xf32>, tensor<4x4xf32>)
// CHECK-NEXT:      %[[PRE1:.*]]:2 = "jaxpp.task"() {callee = @pre0_r1, jaxpp.kind = "pre", jaxpp.rank = 1 : i64, jaxpp.stage = 0 : i64} : () -> (tensor<4xf32>, tensor<4x4xf32>)
// CHECK-NEXT:      %[[LOOP:.*]]:3 = "jaxpp.loop"(%[[PRE1]]#0, %[[PRE0]]#1, %[[PRE1]]#1) ({
// CHECK-NEXT:      ^bb0(%[[I:.*]]: tensor<i32>, %[[LOSSES:.*]]: tensor<4xf32>, %[[G0:.*]]: tensor<4x4xf32>, %[[G1:.*]]: tensor<4x4xf32>):
// CHECK-NEXT:        %[[F0:.*]]:2 = "jaxpp.task"(%[[I]], %[[XS]], %[[W0]]) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<i32>, tensor<4x2x4xf32>, tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>)
// CHECK-NEXT:        "jaxpp.send"(%[[F0]]#1) {jaxpp.channel = 0 : i64, jaxpp.for_task = [0, "fwd"], jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64} : (tensor<2x4xf32>) -> ()
// CHECK-NEXT:        %[[H:.*]] = "jaxpp.recv"() {jaxpp.channel = 0 : i64, jaxpp.for_task = [1, "fwd"], jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64} : () -> tensor<2x4xf32>
// JAX010-NEXT:        %[[F1:.*]]:4 = "jaxpp.task"(%[[I]], %[[YS]], %[[H]], %[[W1]], %[[LOSSES]]) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64} : (tensor<i32>, tensor<4x2x4xf32>, tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<4xf32>)
// JAX011-NEXT:        %[[F1:.*]]:3 = "jaxpp.task"(%[[I]], %[[YS]], %[[H]], %[[W1]], %[[LOSSES]]) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64} : (tensor<i32>, tensor<4x2x4xf32>, tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4xf32>)
// JAX010-NEXT:        %[[B1:.*]]:2 = "jaxpp.task"(%[[F1]]#2, %[[F1]]#1, %[[F1]]#0, %[[H]], %[[W1]], %[[G1]]) {callee = @stage1_bwd, jaxpp.kind = "bwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>)
// JAX011-NEXT:        %[[B1:.*]]:2 = "jaxpp.task"(%[[F1]]#1, %[[F1]]#0, %[[H]], %[[W1]], %[[G1]]) {callee = @stage1_bwd, jaxpp.kind = "bwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>)
// CHECK-NEXT:        "jaxpp.send"(%[[B1]]#0) {jaxpp.channel = 1 : i64, jaxpp.for_task = [1, "bwd"], jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64} : (tensor<2x4xf32>) -> ()
// CHECK-NEXT:        %[[DH:.*]] = "jaxpp.recv"() {jaxpp.channel = 1 : i64, jaxpp.for_task = [0, "bwd"], jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64} : () -> tensor<2x4xf32>
// CHECK-NEXT:        %[[B0:.*]] = "jaxpp.task"(%[[F0]]#1, %[[DH]], %[[F0]]#0, %[[G0]]) {callee = @stage0_bwd, jaxpp.kind = "bwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// JAX010-NEXT:        "jaxpp.yield"(%[[F1]]#3, %[[B0]], %[[B1]]#1) : (tensor<4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> ()
// JAX011-NEXT:        "jaxpp.yield"(%[[F1]]#2, %[[B0]], %[[B1]]#1) : (tensor<4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> ()
// CHECK-NEXT:      }) {jaxpp.num_microbatches = 4 : i64, jaxpp.state_ranks = [1, 0, 1]} : (tensor<4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> (tensor<4xf32>, tensor<4x4xf32>, tensor<4x4xf32>)
// CHECK-NEXT:      %[[NEW0:.*]] = "jaxpp.task"(%[[LOOP]]#1, %[[W0]]) {callee = @post0_r0, jaxpp.kind = "post", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT:      %[[NEW1:.*]] = "jaxpp.task"(%[[LOOP]]#2, %[[W1]]) {callee = @post0_r1, jaxpp.kind = "post", jaxpp.rank = 1 : i64, jaxpp.stage = 0 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT:      return %[[NEW0]], %[[NEW1]], %[[LOOP]]#0 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4xf32>
// CHECK-NEXT:    }

// The stage functions, in task order, hold no marker; stage0_fwd slices its
// microbatch with the index, stage1_fwd writes the microbatch's loss at the
// index into the concatenated losses, each backward adds its weight
// gradient to its accumulator.

// CHECK-NEXT:    func.func private @stage0_fwd(%[[I:.*]]: tensor<i32>, %[[XS:.*]]: tensor<4x2x4xf32>, %[[W:.*]]: tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
// CHECK-NOT:       stablehlo.custom_call
// CHECK:           stablehlo.dynamic_slice %[[XS]], %{{.*}}, sizes = [1, 2, 4]
// CHECK-NOT:       stablehlo.custom_call
// JAX010:         func.func private @stage1_fwd(%[[I:.*]]: tensor<i32>, %[[YS:.*]]: tensor<4x2x4xf32>, %[[H:.*]]: tensor<2x4xf32>, %[[W:.*]]: tensor<4x4xf32>, %[[LOSSES:.*]]: tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<4xf32>) {
// JAX011:         func.func private @stage1_fwd(%[[I:.*]]: tensor<i32>, %[[YS:.*]]: tensor<4x2x4xf32>, %[[H:.*]]: tensor<2x4xf32>, %[[W:.*]]: tensor<4x4xf32>, %[[LOSSES:.*]]: tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4xf32>) {
// CHECK-NOT:       stablehlo.custom_call
// CHECK:           %[[NEXT:.*]] = stablehlo.dynamic_update_slice %[[LOSSES]], %{{.*}}, %{{.*}} : (tensor<4xf32>, tensor<1xf32>, tensor<i32>) -> tensor<4xf32>
// JAX010-NEXT:      return %{{.*}}, %{{.*}}, %{{.*}}, %[[NEXT]] :
// JAX011-NEXT:      return %{{.*}}, %{{.*}}, %[[NEXT]] :
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage1_bwd(%{{.*}}, %[[ACC:[^:]*]]: tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>) {
// CHECK-NOT:       stablehlo.custom_call
// CHECK:           %[[NEXT:.*]] = stablehlo.add %[[ACC]], %{{.*}} : tensor<4x4xf32>
// CHECK-NEXT:      return %{{.*}}, %[[NEXT]] : tensor<2x4xf32>, tensor<4x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage0_bwd(%{{.*}}, %[[ACC:[^:]*]]: tensor<4x4xf32>) -> tensor<4x4xf32> {
// CHECK-NOT:       stablehlo.custom_call
// CHECK:           %[[NEXT:.*]] = stablehlo.add %[[ACC]], %{{.*}} : tensor<4x4xf32>
// CHECK-NEXT:      return %[[NEXT]] : tensor<4x4xf32>
// CHECK-NEXT:    }

// The code around the loop: zeros (the constant 0 copied into each function
// that needs it) and the SGD update w - 0.1 * g. (Ops are matched up to
// their operands: see tests/lit/jaxpp-outline-outer-code/
// outline_outer_code_functions.mlir for the jaxpp.rank left on them.)

// CHECK-NEXT:    func.func private @pre0_r0() -> (tensor<4xf32>, tensor<4x4xf32>) {
// CHECK-NEXT:      %[[Z:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:      %[[Z2:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:      %[[LOSSES0:.*]] = stablehlo.broadcast_in_dim %[[Z]], dims = []
// CHECK-NEXT:      %[[ZEROS:.*]] = stablehlo.broadcast_in_dim %[[Z2]], dims = []
// CHECK-NEXT:      return %[[LOSSES0]], %[[ZEROS]] : tensor<4xf32>, tensor<4x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @pre0_r1() -> (tensor<4xf32>, tensor<4x4xf32>) {
// CHECK-NEXT:      %[[Z:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:      %[[Z2:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:      %[[LOSSES0:.*]] = stablehlo.broadcast_in_dim %[[Z]], dims = []
// CHECK-NEXT:      %[[ZEROS:.*]] = stablehlo.broadcast_in_dim %[[Z2]], dims = []
// CHECK-NEXT:      return %[[LOSSES0]], %[[ZEROS]] : tensor<4xf32>, tensor<4x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @post0_r0(%[[G:.*]]: tensor<4x4xf32>, %[[W:.*]]: tensor<4x4xf32>) -> tensor<4x4xf32> {
// CHECK-NEXT:      %[[LR:.*]] = stablehlo.constant dense<1.000000e-01> : tensor<f32>
// CHECK-NEXT:      %[[LRS:.*]] = stablehlo.broadcast_in_dim %[[LR]], dims = []
// CHECK-NEXT:      %[[STEP:.*]] = stablehlo.multiply %[[LRS]], %[[G]]
// CHECK-NEXT:      %[[NEW:.*]] = stablehlo.subtract %[[W]], %[[STEP]]
// CHECK-NEXT:      return %[[NEW]] : tensor<4x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @post0_r1(%[[G:.*]]: tensor<4x4xf32>, %[[W:.*]]: tensor<4x4xf32>) -> tensor<4x4xf32> {
// CHECK-NEXT:      %[[LR:.*]] = stablehlo.constant dense<1.000000e-01> : tensor<f32>
// CHECK-NEXT:      %[[LRS:.*]] = stablehlo.broadcast_in_dim %[[LR]], dims = []
// CHECK-NEXT:      %[[STEP:.*]] = stablehlo.multiply %[[LRS]], %[[G]]
// CHECK-NEXT:      %[[NEW:.*]] = stablehlo.subtract %[[W]], %[[STEP]]
// CHECK-NEXT:      return %[[NEW]] : tensor<4x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
