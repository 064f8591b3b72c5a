// RUN: jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-place-stages{mpmd-dim=2 placement=0,1,0})' | filecheck %s
// RUN: jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-place-stages{placement=2,0,1})' | filecheck %s --check-prefix=PERMUTED

// An explicit placement: three stages on two ranks (stages 0 and 2 share rank
// 0, as an interleaved schedule does), or a permutation of three ranks.

// CHECK-LABEL: module @explicit_placement attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 3 : i64}
// CHECK-NEXT:    func.func @main(%[[X:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[T0:.*]] = "jaxpp.task"(%[[X]]) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64}
// CHECK-NEXT:      %[[T1:.*]] = "jaxpp.task"(%[[T0]]) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64}
// CHECK-NEXT:      %[[T2:.*]] = "jaxpp.task"(%[[T1]]) {callee = @stage2_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 2 : i64}
// CHECK-NEXT:      return %[[T2]] : tensor<2x4xf32>
// CHECK-NEXT:    }

// PERMUTED-LABEL: module @explicit_placement attributes {jaxpp.num_ranks = 3 : i64, jaxpp.num_stages = 3 : i64}
// PERMUTED-NEXT:    func.func @main(%[[X:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// PERMUTED-NEXT:      %[[T0:.*]] = "jaxpp.task"(%[[X]]) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 2 : i64, jaxpp.stage = 0 : i64}
// PERMUTED-NEXT:      %[[T1:.*]] = "jaxpp.task"(%[[T0]]) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 1 : i64}
// PERMUTED-NEXT:      %[[T2:.*]] = "jaxpp.task"(%[[T1]]) {callee = @stage2_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 2 : i64}
// PERMUTED-NEXT:      return %[[T2]] : tensor<2x4xf32>
// PERMUTED-NEXT:    }
module @explicit_placement attributes {jaxpp.num_stages = 3 : i64} {
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
