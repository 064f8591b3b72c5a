// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-place-stages)' | filecheck %s

// The placement is the one of the schedule jaxpp-choose-stages recorded on the module.
// DualPipeV places four stages on two ranks as a V: stages 0 and 3 on rank 0, stages 1
// and 2 on rank 1. A CustomSchedule places its stages where its stage_rank says: here
// a permutation of three ranks. Without mpmd-dim, the program has as many ranks as
// stages (ranks 2 and 3 of the V's program run nothing).

// CHECK-LABEL: module @v_placement attributes {
// CHECK-SAME:    jaxpp.num_ranks = 4 : i64, jaxpp.num_stages = 4 : i64
// CHECK-NEXT:    func.func @main(%[[X:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[T0:.*]] = "jaxpp.task"(%[[X]]) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64}
// CHECK-NEXT:      %[[T1:.*]] = "jaxpp.task"(%[[T0]]) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64}
// CHECK-NEXT:      %[[T2:.*]] = "jaxpp.task"(%[[T1]]) {callee = @stage2_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 2 : i64}
// CHECK-NEXT:      %[[T3:.*]] = "jaxpp.task"(%[[T2]]) {callee = @stage3_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 3 : i64}
// CHECK-NEXT:      return %[[T3]] : tensor<2x4xf32>
// CHECK-NEXT:    }
module @v_placement attributes {jaxpp.num_stages = 4 : i64, jaxpp.schedule = {fuse_overlapped = false, kind = "DualPipeV", mpmd_dim = 2 : i64, num_stages = 4 : i64, split_backward = true}} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = "jaxpp.task"(%arg0) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %1 = "jaxpp.task"(%0) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %2 = "jaxpp.task"(%1) {callee = @stage2_fwd, jaxpp.kind = "fwd", jaxpp.stage = 2 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %3 = "jaxpp.task"(%2) {callee = @stage3_fwd, jaxpp.kind = "fwd", jaxpp.stage = 3 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
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
  func.func private @stage2_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.cosine %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage3_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.negate %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

// CHECK-LABEL: module @permuted_placement attributes {
// CHECK-SAME:    jaxpp.num_ranks = 3 : i64, jaxpp.num_stages = 3 : i64
// CHECK-NEXT:    func.func @main(%[[X:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[T0:.*]] = "jaxpp.task"(%[[X]]) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 2 : i64, jaxpp.stage = 0 : i64}
// CHECK-NEXT:      %[[T1:.*]] = "jaxpp.task"(%[[T0]]) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 1 : i64}
// CHECK-NEXT:      %[[T2:.*]] = "jaxpp.task"(%[[T1]]) {callee = @stage2_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 2 : i64}
// CHECK-NEXT:      return %[[T2]] : tensor<2x4xf32>
// CHECK-NEXT:    }
module @permuted_placement attributes {jaxpp.num_stages = 3 : i64, jaxpp.schedule = {kind = "CustomSchedule", num_stages = 3 : i64, stage_rank = [2, 0, 1], tasks = [[[[1, "fwd", 0]]], [[[2, "fwd", 0]]], [[[0, "fwd", 0]]]]}} {
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
