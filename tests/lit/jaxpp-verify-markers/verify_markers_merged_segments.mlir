// RUN: jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-verify-markers{num-stages=1 mpmd-dim=1})' 2>&1 | filecheck %s

// Two markers, a head (dot_general) after the last, one stage asked for: the two
// segments merge into one stage and the head runs in it, JaxPP's placement. No
// warning about the layer after the last marker.
// CHECK-NOT: warning
// CHECK-LABEL: module @head_after_merged_segments
// CHECK: stablehlo.dot_general
module @head_after_merged_segments {
  func.func @main(%arg0: tensor<2x4xf32>, %arg1: tensor<4x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    %1 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %0 : tensor<2x4xf32>
    %2 = stablehlo.sine %1 : tensor<2x4xf32>
    %3 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %2 : tensor<2x4xf32>
    %4 = stablehlo.dot_general %3, %arg1, contracting_dims = [1] x [0] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    return %4 : tensor<2x4xf32>
  }
}
