// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-place-stages)' | filecheck %s
// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-place-stages{mpmd-dim=4})' | filecheck %s --check-prefix=MESH4

// By default there is one rank per stage and stage s runs on rank s. With a
// larger mesh (mpmd-dim=4), stage s still runs on rank s % 4 = s and the last
// rank is left idle. Stage functions are not touched.

// CHECK-LABEL: module @one_rank_per_stage attributes {jaxpp.num_ranks = 3 : i64, jaxpp.num_stages = 3 : i64}
// CHECK-NEXT:    func.func @main(%[[X:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[T0:.*]] = "jaxpp.task"(%[[X]]) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64}
// CHECK-NEXT:      %[[T1:.*]] = "jaxpp.task"(%[[T0]]) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64}
// CHECK-NEXT:      %[[T2:.*]] = "jaxpp.task"(%[[T1]]) {callee = @stage2_fwd, jaxpp.kind = "fwd", jaxpp.rank = 2 : i64, jaxpp.stage = 2 : i64}
// CHECK-NEXT:      return %[[T2]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage0_fwd(%[[A0:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[TANH:.*]] = stablehlo.tanh %[[A0]] : tensor<2x4xf32>
// CHECK-NEXT:      return %[[TANH]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage1_fwd(%[[A1:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[SIN:.*]] = stablehlo.sine %[[A1]] : tensor<2x4xf32>
// CHECK-NEXT:      return %[[SIN]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage2_fwd(%[[A2:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[COS:.*]] = stablehlo.cosine %[[A2]] : tensor<2x4xf32>
// CHECK-NEXT:      return %[[COS]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }

// MESH4-LABEL: module @one_rank_per_stage attributes {jaxpp.num_ranks = 4 : i64, jaxpp.num_stages = 3 : i64}
// MESH4-NEXT:    func.func @main
// MESH4-NEXT:      "jaxpp.task"{{.*}} {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64}
// MESH4-NEXT:      "jaxpp.task"{{.*}} {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64}
// MESH4-NEXT:      "jaxpp.task"{{.*}} {callee = @stage2_fwd, jaxpp.kind = "fwd", jaxpp.rank = 2 : i64, jaxpp.stage = 2 : i64}
// MESH4-NEXT:      return
module @one_rank_per_stage attributes {jaxpp.num_stages = 3 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = "jaxpp.task"(%arg0) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %1 = "jaxpp.task"(%0) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %2 = "jaxpp.task"(%1) {callee = @stage2_fwd, jaxpp.kind = "fwd", jaxpp.stage = 2 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %2 : tensor<2x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage1_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.sine %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage2_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.cosine %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

// The forward and the backward of a stage run on the same rank.

// CHECK-LABEL: module @forward_and_backward attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64}
// CHECK-NEXT:    func.func @main(%[[X:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[F0:.*]] = "jaxpp.task"(%[[X]]) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64}
// CHECK-NEXT:      %[[F1:.*]] = "jaxpp.task"(%[[F0]]) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64}
// CHECK-NEXT:      %[[B1:.*]] = "jaxpp.task"(%[[F1]], %[[F0]]) {callee = @stage1_bwd, jaxpp.kind = "bwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64}
// CHECK-NEXT:      %[[B0:.*]] = "jaxpp.task"(%[[B1]], %[[X]]) {callee = @stage0_bwd, jaxpp.kind = "bwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64}
// CHECK-NEXT:      return %[[B0]] : tensor<2x4xf32>
// CHECK-NEXT:    }

// MESH4-LABEL: module @forward_and_backward attributes {jaxpp.num_ranks = 4 : i64, jaxpp.num_stages = 2 : i64}
// MESH4-NEXT:    func.func @main
// MESH4-NEXT:      "jaxpp.task"{{.*}} {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64}
// MESH4-NEXT:      "jaxpp.task"{{.*}} {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64}
// MESH4-NEXT:      "jaxpp.task"{{.*}} {callee = @stage1_bwd, jaxpp.kind = "bwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64}
// MESH4-NEXT:      "jaxpp.task"{{.*}} {callee = @stage0_bwd, jaxpp.kind = "bwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64}
// MESH4-NEXT:      return
module @forward_and_backward attributes {jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = "jaxpp.task"(%arg0) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %1 = "jaxpp.task"(%0) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %2 = "jaxpp.task"(%1, %0) {callee = @stage1_bwd, jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %3 = "jaxpp.task"(%2, %arg0) {callee = @stage0_bwd, jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    return %3 : tensor<2x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage1_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.sine %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage1_bwd(%arg0: tensor<2x4xf32>, %arg1: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.multiply %arg0, %arg1 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage0_bwd(%arg0: tensor<2x4xf32>, %arg1: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.multiply %arg0, %arg1 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

// With a microbatch loop, the tasks of the loop body are placed, and the loop
// records the rank holding each piece of its state: the rank of the one task
// that reads and updates it. The code around the loop is left for
// jaxpp-outline-outer-code.

// CHECK-LABEL: module @microbatch_loop attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64}
// CHECK-NEXT:    func.func @main(
// CHECK-NEXT:      %[[ZERO:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<4x4xf32>
// CHECK-NEXT:      %[[SQ:.*]] = stablehlo.multiply %{{.*}}, %{{.*}} : tensor<4x4xf32>
// CHECK-NEXT:      %[[LOOP:.*]]:2 = "jaxpp.loop"(%[[ZERO]], %[[ZERO]]) ({
// CHECK-NEXT:      ^bb0(
// CHECK-NEXT:        %[[T0:.*]]:2 = "jaxpp.task"({{.*}}) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64}
// CHECK-NEXT:        %[[T1:.*]] = "jaxpp.task"(%[[T0]]#0, %[[SQ]], %{{.*}}) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64}
// CHECK-NEXT:        "jaxpp.yield"(%[[T0]]#1, %[[T1]])
// CHECK-NEXT:      }) {jaxpp.num_microbatches = 2 : i64, jaxpp.state_ranks = [0, 1]}
// CHECK-NEXT:      %[[LR:.*]] = stablehlo.constant dense<1.000000e-01> : tensor<4x4xf32>
// CHECK-NEXT:      stablehlo.multiply %[[LR]], %[[LOOP]]#0 : tensor<4x4xf32>
module @microbatch_loop attributes {jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<4x4xf32>, %arg1: tensor<4x4xf32>, %arg2: tensor<2x2x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<4x4xf32>
    %0 = stablehlo.multiply %arg1, %arg1 : tensor<4x4xf32>
    %1:2 = "jaxpp.loop"(%cst, %cst) ({
    ^bb0(%arg3: tensor<i32>, %arg4: tensor<4x4xf32>, %arg5: tensor<4x4xf32>):
      %5:2 = "jaxpp.task"(%arg3, %arg2, %arg0, %arg4) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<i32>, tensor<2x2x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>)
      %6 = "jaxpp.task"(%5#0, %0, %arg5) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
      "jaxpp.yield"(%5#1, %6) : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>)
    %cst_0 = stablehlo.constant dense<1.000000e-01> : tensor<4x4xf32>
    %2 = stablehlo.multiply %cst_0, %1#0 : tensor<4x4xf32>
    %3 = stablehlo.subtract %arg0, %2 : tensor<4x4xf32>
    %4 = stablehlo.multiply %cst_0, %1#1 : tensor<4x4xf32>
    %7 = stablehlo.subtract %arg1, %4 : tensor<4x4xf32>
    %8 = stablehlo.add %3, %7 : tensor<4x4xf32>
    return %3, %7, %8 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<i32>, %arg1: tensor<2x2x4xf32>, %arg2: tensor<4x4xf32>, %arg3: tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>) {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.dynamic_slice %arg1, %arg0, %c, %c, sizes = [1, 2, 4] : (tensor<2x2x4xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x4xf32>
    %1 = stablehlo.reshape %0 : (tensor<1x2x4xf32>) -> tensor<2x4xf32>
    %2 = stablehlo.dot_general %1, %arg2, contracting_dims = [1] x [0] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %3 = stablehlo.add %arg3, %arg2 : tensor<4x4xf32>
    return %2, %3 : tensor<2x4xf32>, tensor<4x4xf32>
  }
  func.func private @stage1_fwd(%arg0: tensor<2x4xf32>, %arg1: tensor<4x4xf32>, %arg2: tensor<4x4xf32>) -> tensor<4x4xf32> {
    %0 = stablehlo.dot_general %arg0, %arg0, contracting_dims = [0] x [0] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %1 = stablehlo.multiply %0, %arg1 : tensor<4x4xf32>
    %2 = stablehlo.add %arg2, %1 : tensor<4x4xf32>
    return %2 : tensor<4x4xf32>
  }
}
