// RUN: jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-verify-program)' | filecheck %s

// A program whose stacked input arrives as chunks (rows [0, 1) on rank 0, [1, 4) on
// rank 1), each read by its rank's task, and whose output is assembled from the pieces
// the ranks computed, passes unchanged.

// CHECK-LABEL: module @chunks_and_assemble
// CHECK:         "jaxpp.chunk"(%arg0) {jaxpp.rank = 0 : i64, jaxpp.rows = 1 : i64, jaxpp.start = 0 : i64}
// CHECK-NEXT:    "jaxpp.chunk"(%arg0) {jaxpp.rank = 1 : i64, jaxpp.rows = 3 : i64, jaxpp.start = 1 : i64}
// CHECK:         "jaxpp.assemble"
module @chunks_and_assemble attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<4x3xf32>) -> tensor<4x3xf32> {
    %c0 = "jaxpp.chunk"(%arg0) {jaxpp.rank = 0 : i64, jaxpp.rows = 1 : i64, jaxpp.start = 0 : i64} : (tensor<4x3xf32>) -> tensor<1x3xf32>
    %c1 = "jaxpp.chunk"(%arg0) {jaxpp.rank = 1 : i64, jaxpp.rows = 3 : i64, jaxpp.start = 1 : i64} : (tensor<4x3xf32>) -> tensor<3x3xf32>
    %0 = "jaxpp.task"(%c0) {callee = @post0_r0, jaxpp.kind = "post", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<1x3xf32>) -> tensor<1x3xf32>
    %1 = "jaxpp.task"(%c1) {callee = @post0_r1, jaxpp.kind = "post", jaxpp.rank = 1 : i64, jaxpp.stage = 0 : i64} : (tensor<3x3xf32>) -> tensor<3x3xf32>
    %2 = "jaxpp.assemble"(%0, %1) : (tensor<1x3xf32>, tensor<3x3xf32>) -> tensor<4x3xf32>
    return %2 : tensor<4x3xf32>
  }
  func.func private @post0_r0(%arg0: tensor<1x3xf32>) -> tensor<1x3xf32> {
    %0 = stablehlo.negate %arg0 : tensor<1x3xf32>
    return %0 : tensor<1x3xf32>
  }
  func.func private @post0_r1(%arg0: tensor<3x3xf32>) -> tensor<3x3xf32> {
    %0 = stablehlo.negate %arg0 : tensor<3x3xf32>
    return %0 : tensor<3x3xf32>
  }
}
