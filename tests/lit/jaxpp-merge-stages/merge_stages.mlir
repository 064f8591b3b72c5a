// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-merge-stages{stage-split=2,1})' | filecheck %s

// Three marked segments, forward and backward, merged into two stages: segments
// 0 and 1 become stage 0, segment 2 stage 1; the kinds stay, the marker between
// the merged segments stays (jaxpp-outline-stages drops it) and the module records
// the split.

// CHECK-LABEL: module @three_segments_two_stages attributes {jaxpp.num_stages = 2 : i64, jaxpp.stage_split = array<i64: 2, 1>}
// CHECK-NEXT:    func.func @main(%[[ARG:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[TANH:.*]] = stablehlo.tanh %[[ARG]] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64}
// CHECK-NEXT:      %[[M0:.*]] = stablehlo.custom_call @jaxpp.enter_stage(%[[TANH]]) {{.*}}jaxpp.kind = "fwd", jaxpp.stage = 0 : i64
// CHECK-NEXT:      %[[SIN:.*]] = stablehlo.sine %[[M0]] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64}
// CHECK-NEXT:      %[[M1:.*]] = stablehlo.custom_call @jaxpp.enter_stage(%[[SIN]]) {{.*}}jaxpp.kind = "fwd", jaxpp.stage = 0 : i64
// CHECK-NEXT:      %[[COS:.*]] = stablehlo.cosine %[[M1]] {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64}
// CHECK-NEXT:      %[[NEG2:.*]] = stablehlo.negate %[[COS]] {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64}
// CHECK-NEXT:      %[[NEG1:.*]] = stablehlo.negate %[[NEG2]] {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64}
// CHECK-NEXT:      %[[NEG0:.*]] = stablehlo.negate %[[NEG1]] {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64}
// CHECK-NEXT:      return %[[NEG0]] : tensor<2x4xf32>
module @three_segments_two_stages attributes {jaxpp.num_stages = 3 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    %1 = stablehlo.custom_call @jaxpp.enter_stage(%0) {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %2 = stablehlo.sine %1 {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<2x4xf32>
    %3 = stablehlo.custom_call @jaxpp.enter_stage(%2) {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %4 = stablehlo.cosine %3 {jaxpp.kind = "fwd", jaxpp.stage = 2 : i64} : tensor<2x4xf32>
    %5 = stablehlo.negate %4 {jaxpp.kind = "bwd", jaxpp.stage = 2 : i64} : tensor<2x4xf32>
    %6 = stablehlo.negate %5 {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : tensor<2x4xf32>
    %7 = stablehlo.negate %6 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    return %7 : tensor<2x4xf32>
  }
}
