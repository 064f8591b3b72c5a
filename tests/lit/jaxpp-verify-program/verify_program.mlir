// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-verify-program)' | filecheck %s

// A well-formed partitioned program (what jaxpp-insert-transfers prints for a
// two-stage forward and backward) passes unchanged.

// CHECK-LABEL: module @good_program attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64}
// CHECK-NEXT:    func.func @main(%[[X:.*]]: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
// CHECK-NEXT:      %[[F0:.*]] = "jaxpp.task"(%[[X]]) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:      "jaxpp.send"(%[[F0]]) {jaxpp.channel = 0 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64} : (tensor<2x4xf32>) -> ()
// CHECK-NEXT:      %[[R0:.*]] = "jaxpp.recv"() {jaxpp.channel = 0 : i64, jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64} : () -> tensor<2x4xf32>
// CHECK-NEXT:      %[[F1:.*]] = "jaxpp.task"(%[[R0]]) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:      %[[B1:.*]] = "jaxpp.task"(%[[F1]], %[[R0]], %[[X]]) {callee = @stage1_bwd, jaxpp.kind = "bwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:      "jaxpp.send"(%[[B1]]) {jaxpp.channel = 1 : i64, jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64} : (tensor<2x4xf32>) -> ()
// CHECK-NEXT:      %[[R1:.*]] = "jaxpp.recv"() {jaxpp.channel = 1 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64} : () -> tensor<2x4xf32>
// CHECK-NEXT:      %[[B0:.*]] = "jaxpp.task"(%[[R1]], %[[F0]], %[[X]]) {callee = @stage0_bwd, jaxpp.kind = "bwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:      return %[[F1]], %[[B0]] : tensor<2x4xf32>, tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage0_fwd(%[[A:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[T:.*]] = stablehlo.tanh %[[A]] : tensor<2x4xf32>
// CHECK-NEXT:      return %[[T]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage1_fwd(%[[A:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[S:.*]] = stablehlo.sine %[[A]] : tensor<2x4xf32>
// CHECK-NEXT:      return %[[S]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage1_bwd(%[[A:.*]]: tensor<2x4xf32>, %[[B:.*]]: tensor<2x4xf32>, %[[C:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[M:.*]] = stablehlo.multiply %[[A]], %[[B]] : tensor<2x4xf32>
// CHECK-NEXT:      %[[AD:.*]] = stablehlo.add %[[M]], %[[C]] : tensor<2x4xf32>
// CHECK-NEXT:      return %[[AD]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage0_bwd(%[[A:.*]]: tensor<2x4xf32>, %[[B:.*]]: tensor<2x4xf32>, %[[C:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[M:.*]] = stablehlo.multiply %[[A]], %[[B]] : tensor<2x4xf32>
// CHECK-NEXT:      %[[AD:.*]] = stablehlo.add %[[M]], %[[C]] : tensor<2x4xf32>
// CHECK-NEXT:      return %[[AD]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @good_program attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
    %0 = "jaxpp.task"(%arg0) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    "jaxpp.send"(%0) {jaxpp.channel = 0 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64} : (tensor<2x4xf32>) -> ()
    %1 = "jaxpp.recv"() {jaxpp.channel = 0 : i64, jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64} : () -> tensor<2x4xf32>
    %2 = "jaxpp.task"(%1) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %3 = "jaxpp.task"(%2, %1, %arg0) {callee = @stage1_bwd, jaxpp.kind = "bwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    "jaxpp.send"(%3) {jaxpp.channel = 1 : i64, jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64} : (tensor<2x4xf32>) -> ()
    %4 = "jaxpp.recv"() {jaxpp.channel = 1 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64} : () -> tensor<2x4xf32>
    %5 = "jaxpp.task"(%4, %0, %arg0) {callee = @stage0_bwd, jaxpp.kind = "bwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    return %2, %5 : tensor<2x4xf32>, tensor<2x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage1_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.sine %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage1_bwd(%arg0: tensor<2x4xf32>, %arg1: tensor<2x4xf32>, %arg2: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.multiply %arg0, %arg1 : tensor<2x4xf32>
    %1 = stablehlo.add %0, %arg2 : tensor<2x4xf32>
    return %1 : tensor<2x4xf32>
  }
  func.func private @stage0_bwd(%arg0: tensor<2x4xf32>, %arg1: tensor<2x4xf32>, %arg2: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.multiply %arg0, %arg1 : tensor<2x4xf32>
    %1 = stablehlo.add %0, %arg2 : tensor<2x4xf32>
    return %1 : tensor<2x4xf32>
  }
}

// -----

// One rank, no transfer: two stages placed on rank 0 read each other's
// values directly.

// CHECK-LABEL: module @single_rank attributes {jaxpp.num_ranks = 1 : i64, jaxpp.num_stages = 2 : i64}
// CHECK-NEXT:    func.func @main(%[[X:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[F0:.*]] = "jaxpp.task"(%[[X]]) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64}
// CHECK-NEXT:      %[[F1:.*]] = "jaxpp.task"(%[[F0]]) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 1 : i64}
// CHECK-NEXT:      return %[[F1]] : tensor<2x4xf32>
// CHECK-NEXT:    }
module @single_rank attributes {jaxpp.num_ranks = 1 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = "jaxpp.task"(%arg0) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %1 = "jaxpp.task"(%0) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %1 : tensor<2x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage1_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.sine %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}
