// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-choose-stages{stage-split=2,1})' | filecheck %s

// A forced split, stage-split segments per stage: segments 0 and 1 become stage 0,
// segment 2 stage 1, forward and backward alike; the marker between the merged
// segments stays (jaxpp-outline-stages drops it) and the module records the split.

// CHECK-LABEL: module @three_segments_two_stages attributes {jaxpp.num_segments = 3 : i64, jaxpp.num_stages = 2 : i64, jaxpp.stage_split = array<i64: 2, 1>}
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
module @three_segments_two_stages attributes {jaxpp.num_segments = 3 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64} : tensor<2x4xf32>
    %1 = stablehlo.custom_call @jaxpp.enter_stage(%0) {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %2 = stablehlo.sine %1 {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64} : tensor<2x4xf32>
    %3 = stablehlo.custom_call @jaxpp.enter_stage(%2) {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %4 = stablehlo.cosine %3 {jaxpp.kind = "fwd", jaxpp.segment = 2 : i64} : tensor<2x4xf32>
    %5 = stablehlo.negate %4 {jaxpp.kind = "bwd", jaxpp.segment = 2 : i64} : tensor<2x4xf32>
    %6 = stablehlo.negate %5 {jaxpp.kind = "bwd", jaxpp.segment = 1 : i64} : tensor<2x4xf32>
    %7 = stablehlo.negate %6 {jaxpp.kind = "bwd", jaxpp.segment = 0 : i64} : tensor<2x4xf32>
    return %7 : tensor<2x4xf32>
  }
}

// -----

// With a loop, the forced split must fit the schedule (treduce's GPipe, completed with
// the split's two stages), and the planner's estimate of it is recorded.

// CHECK-LABEL: module @forced_in_loop attributes {
// CHECK-SAME:    jaxpp.schedule = {kind = "GPipe", num_stages = 2 : i64},
// CHECK-SAME:    jaxpp.stage_estimate = {{{.*}}split = [2, 1]{{.*}}},
// CHECK-SAME:    jaxpp.stage_split = array<i64: 2, 1>}
module @forced_in_loop attributes {jaxpp.num_segments = 3 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = "jaxpp.loop"(%arg0) ({
    ^bb0(%i: tensor<i32>, %acc: tensor<2x4xf32>):
      %1 = stablehlo.tanh %acc {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64} : tensor<2x4xf32>
      %2 = stablehlo.sine %1 {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64} : tensor<2x4xf32>
      %3 = stablehlo.cosine %2 {jaxpp.kind = "fwd", jaxpp.segment = 2 : i64} : tensor<2x4xf32>
      "jaxpp.yield"(%3) : (tensor<2x4xf32>) -> ()
    }) {jaxpp.num_microbatches = 4 : i64, jaxpp.schedule = {kind = "GPipe"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}
