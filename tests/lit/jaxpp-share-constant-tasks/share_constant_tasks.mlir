// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-share-constant-tasks)' | filecheck %s
// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-share-constant-tasks{max-bytes=0})' | filecheck %s --check-prefix=OFF

// What jaxpp-outline-outer-code prints for zero accumulators on three ranks: rank 2 (the
// last stage's) also makes the loss accumulator's scalar zero. Ranks 0 and 1 take rank
// 2's body: their tasks return the scalar too, unused, so the three functions are one
// text (one compilation). The loop states keep reading the zeros they read before.
// Rank 3's zeros have another shape: its task stays as it was. With max-bytes=0 nothing
// changes.

// CHECK-LABEL: module @zero_accumulators
// CHECK:      %[[R0:.*]]:3 = "jaxpp.task"() {callee = @pre0_r0, jaxpp.kind = "pre", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : () -> (tensor<4x4xf32>, tensor<4xf32>, tensor<f32>)
// CHECK-NEXT: %[[R1:.*]]:3 = "jaxpp.task"() {callee = @pre0_r1, jaxpp.kind = "pre", jaxpp.rank = 1 : i64, jaxpp.stage = 0 : i64} : () -> (tensor<4x4xf32>, tensor<4xf32>, tensor<f32>)
// CHECK-NEXT: %[[R2:.*]]:3 = "jaxpp.task"() {callee = @pre0_r2, jaxpp.kind = "pre", jaxpp.rank = 2 : i64, jaxpp.stage = 0 : i64} : () -> (tensor<4x4xf32>, tensor<4xf32>, tensor<f32>)
// CHECK-NEXT: %[[R3:.*]] = "jaxpp.task"() {callee = @pre0_r3, jaxpp.kind = "pre", jaxpp.rank = 3 : i64, jaxpp.stage = 0 : i64} : () -> tensor<8xf32>
// CHECK-NEXT: return %[[R0]]#0, %[[R0]]#1, %[[R1]]#0, %[[R1]]#1, %[[R2]]#0, %[[R2]]#1, %[[R2]]#2, %[[R3]]
// CHECK-LABEL: func.func private @pre0_r0() -> (tensor<4x4xf32>, tensor<4xf32>, tensor<f32>) {
// CHECK-NEXT:    %[[A:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:    %[[B:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:    %[[W:.*]] = stablehlo.broadcast_in_dim %[[A]], dims = [] : (tensor<f32>) -> tensor<4x4xf32>
// CHECK-NEXT:    %[[V:.*]] = stablehlo.broadcast_in_dim %[[B]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    %[[L:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:    return %[[W]], %[[V]], %[[L]] : tensor<4x4xf32>, tensor<4xf32>, tensor<f32>
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func private @pre0_r1() -> (tensor<4x4xf32>, tensor<4xf32>, tensor<f32>) {
// CHECK-NEXT:    %[[A:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:    %[[B:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:    %[[W:.*]] = stablehlo.broadcast_in_dim %[[A]], dims = [] : (tensor<f32>) -> tensor<4x4xf32>
// CHECK-NEXT:    %[[V:.*]] = stablehlo.broadcast_in_dim %[[B]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    %[[L:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:    return %[[W]], %[[V]], %[[L]] : tensor<4x4xf32>, tensor<4xf32>, tensor<f32>
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func private @pre0_r2() -> (tensor<4x4xf32>, tensor<4xf32>, tensor<f32>) {
// CHECK:       func.func private @pre0_r3() -> tensor<8xf32> {
// CHECK-NEXT:    stablehlo.constant dense<0.000000e+00> : tensor<8xf32>
// CHECK-NEXT:    return

// OFF-LABEL: module @zero_accumulators
// OFF:      "jaxpp.task"() {callee = @pre0_r0, {{.*}} : () -> (tensor<4x4xf32>, tensor<4xf32>)
// OFF-NEXT: "jaxpp.task"() {callee = @pre0_r1, {{.*}} : () -> (tensor<4x4xf32>, tensor<4xf32>)
// OFF-NEXT: "jaxpp.task"() {callee = @pre0_r2, {{.*}} : () -> (tensor<4x4xf32>, tensor<4xf32>, tensor<f32>)
module @zero_accumulators attributes {jaxpp.num_ranks = 4 : i64, jaxpp.num_stages = 4 : i64} {
  func.func @main() -> (tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<f32>, tensor<8xf32>) {
    %0:2 = "jaxpp.task"() {callee = @pre0_r0, jaxpp.kind = "pre", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : () -> (tensor<4x4xf32>, tensor<4xf32>)
    %1:2 = "jaxpp.task"() {callee = @pre0_r1, jaxpp.kind = "pre", jaxpp.rank = 1 : i64, jaxpp.stage = 0 : i64} : () -> (tensor<4x4xf32>, tensor<4xf32>)
    %2:3 = "jaxpp.task"() {callee = @pre0_r2, jaxpp.kind = "pre", jaxpp.rank = 2 : i64, jaxpp.stage = 0 : i64} : () -> (tensor<4x4xf32>, tensor<4xf32>, tensor<f32>)
    %3 = "jaxpp.task"() {callee = @pre0_r3, jaxpp.kind = "pre", jaxpp.rank = 3 : i64, jaxpp.stage = 0 : i64} : () -> tensor<8xf32>
    return %0#0, %0#1, %1#0, %1#1, %2#0, %2#1, %2#2, %3 : tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<f32>, tensor<8xf32>
  }
  func.func private @pre0_r0() -> (tensor<4x4xf32>, tensor<4xf32>) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<4x4xf32>
    %1 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<4xf32>
    return %0, %1 : tensor<4x4xf32>, tensor<4xf32>
  }
  func.func private @pre0_r1() -> (tensor<4x4xf32>, tensor<4xf32>) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<4x4xf32>
    %1 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<4xf32>
    return %0, %1 : tensor<4x4xf32>, tensor<4xf32>
  }
  func.func private @pre0_r2() -> (tensor<4x4xf32>, tensor<4xf32>, tensor<f32>) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<4x4xf32>
    %1 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    return %0, %1, %cst_1 : tensor<4x4xf32>, tensor<4xf32>, tensor<f32>
  }
  func.func private @pre0_r3() -> tensor<8xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<8xf32>
    return %cst : tensor<8xf32>
  }
}

// -----

// A task that reads a value, or whose function computes more than splat constants, is
// left alone even where its results look like another rank's.

// CHECK-LABEL: module @not_constant_only
// CHECK:      "jaxpp.task"(%{{.*}}) {callee = @pre0_r0, {{.*}} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: "jaxpp.task"() {callee = @pre0_r1, {{.*}} : () -> tensor<4xf32>
// CHECK-NEXT: "jaxpp.task"() {callee = @pre0_r2, {{.*}} : () -> (tensor<4xf32>, tensor<f32>)
// CHECK-LABEL: func.func private @pre0_r1() -> tensor<4xf32> {
// CHECK-NEXT:    stablehlo.iota
module @not_constant_only attributes {jaxpp.num_ranks = 3 : i64, jaxpp.num_stages = 3 : i64} {
  func.func @main(%arg0: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>) {
    %0 = "jaxpp.task"(%arg0) {callee = @pre0_r0, jaxpp.kind = "pre", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "jaxpp.task"() {callee = @pre0_r1, jaxpp.kind = "pre", jaxpp.rank = 1 : i64, jaxpp.stage = 0 : i64} : () -> tensor<4xf32>
    %2:2 = "jaxpp.task"() {callee = @pre0_r2, jaxpp.kind = "pre", jaxpp.rank = 2 : i64, jaxpp.stage = 0 : i64} : () -> (tensor<4xf32>, tensor<f32>)
    return %0, %1, %2#0, %2#1 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>
  }
  func.func private @pre0_r0(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<4xf32>
    %0 = stablehlo.multiply %arg0, %cst : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
  func.func private @pre0_r1() -> tensor<4xf32> {
    %0 = stablehlo.iota dim = 0 : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
  func.func private @pre0_r2() -> (tensor<4xf32>, tensor<f32>) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<4xf32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    return %cst, %cst_0 : tensor<4xf32>, tensor<f32>
  }
}

// -----

// Tasks with the same results whose bodies differ as text (here only in the order of
// their ops) are made one text: rank 1 takes rank 0's body. The bodies are compared
// with their values named within each function, so a difference in which constant a
// broadcast reads shows.

// CHECK-LABEL: module @same_results_other_text
// CHECK-LABEL: func.func private @pre0_r1() -> (tensor<4x4xf32>, tensor<4xf32>) {
// CHECK-NEXT:    %[[A:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:    %[[B:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:    %[[W:.*]] = stablehlo.broadcast_in_dim %[[A]], dims = [] : (tensor<f32>) -> tensor<4x4xf32>
// CHECK-NEXT:    %[[V:.*]] = stablehlo.broadcast_in_dim %[[B]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    return %[[W]], %[[V]] : tensor<4x4xf32>, tensor<4xf32>
// OFF-LABEL: module @same_results_other_text
// OFF-LABEL: func.func private @pre0_r1() -> (tensor<4x4xf32>, tensor<4xf32>) {
// OFF-NEXT:    %[[A:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// OFF-NEXT:    %[[B:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// OFF-NEXT:    %[[V:.*]] = stablehlo.broadcast_in_dim %[[B]], dims = [] : (tensor<f32>) -> tensor<4xf32>
module @same_results_other_text attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main() -> (tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>) {
    %0:2 = "jaxpp.task"() {callee = @pre0_r0, jaxpp.kind = "pre", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : () -> (tensor<4x4xf32>, tensor<4xf32>)
    %1:2 = "jaxpp.task"() {callee = @pre0_r1, jaxpp.kind = "pre", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64} : () -> (tensor<4x4xf32>, tensor<4xf32>)
    return %0#0, %0#1, %1#0, %1#1 : tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>
  }
  func.func private @pre0_r0() -> (tensor<4x4xf32>, tensor<4xf32>) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<4x4xf32>
    %1 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<4xf32>
    return %0, %1 : tensor<4x4xf32>, tensor<4xf32>
  }
  func.func private @pre0_r1() -> (tensor<4x4xf32>, tensor<4xf32>) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<4x4xf32>
    return %0, %1 : tensor<4x4xf32>, tensor<4xf32>
  }
}
