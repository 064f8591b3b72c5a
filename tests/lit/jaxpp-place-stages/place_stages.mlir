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
