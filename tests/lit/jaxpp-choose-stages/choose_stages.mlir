// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-choose-stages{mpmd-dim=2})' | filecheck %s

// Without a microbatch loop there is no schedule: one segment per stage, each op's
// jaxpp.segment replaced by its jaxpp.stage, the kinds kept, the split recorded.

// CHECK-LABEL: module @no_loop attributes {jaxpp.num_segments = 2 : i64, jaxpp.num_stages = 2 : i64, jaxpp.stage_split = array<i64: 1, 1>}
// CHECK-NEXT:    func.func @main(%[[ARG:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[TANH:.*]] = stablehlo.tanh %[[ARG]] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64}
// CHECK-NEXT:      %[[SIN:.*]] = stablehlo.sine %[[TANH]] {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64}
// CHECK-NEXT:      %[[NEG:.*]] = stablehlo.negate %[[SIN]] {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64}
// CHECK-NEXT:      return %[[NEG]] : tensor<2x4xf32>
module @no_loop attributes {jaxpp.num_segments = 2 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64} : tensor<2x4xf32>
    %1 = stablehlo.sine %0 {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64} : tensor<2x4xf32>
    %2 = stablehlo.negate %1 {jaxpp.kind = "bwd", jaxpp.segment = 0 : i64} : tensor<2x4xf32>
    return %2 : tensor<2x4xf32>
  }
}

// -----

// A loop with no schedule given anywhere: Std1F1B of one stage per segment, recorded
// on the module as a dictionary.

// CHECK-LABEL: module @loop_default_schedule attributes {jaxpp.num_segments = 2 : i64, jaxpp.num_stages = 2 : i64, jaxpp.schedule = {kind = "Std1F1B", num_stages = 2 : i64}, jaxpp.stage_split = array<i64: 1, 1>}
// CHECK:           %[[X:.*]] = stablehlo.tanh %{{.*}} {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64}
// CHECK-NEXT:      %[[Y:.*]] = stablehlo.sine %[[X]] {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64}
// CHECK-NEXT:      "jaxpp.yield"(%[[Y]])
// CHECK-NEXT:    }) {jaxpp.num_microbatches = 4 : i64}
module @loop_default_schedule attributes {jaxpp.num_segments = 2 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = "jaxpp.loop"(%arg0) ({
    ^bb0(%i: tensor<i32>, %acc: tensor<2x4xf32>):
      %1 = stablehlo.tanh %acc {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64} : tensor<2x4xf32>
      %2 = stablehlo.sine %1 {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64} : tensor<2x4xf32>
      "jaxpp.yield"(%2) : (tensor<2x4xf32>) -> ()
    }) {jaxpp.num_microbatches = 4 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

// treduce's schedule, a bare name on the loop, completed with the stage count (and the
// ranks, for a schedule of several stages per rank): the loop gives it up, the module
// records it whole.

// CHECK-LABEL: module @treduce_schedule_name attributes {jaxpp.num_segments = 4 : i64, jaxpp.num_stages = 4 : i64, jaxpp.schedule = {fuse_steady_state = false, kind = "Interleaved1F1B", mpmd_dim = 2 : i64, num_stages = 4 : i64}, jaxpp.stage_split = array<i64: 1, 1, 1, 1>}
// CHECK:         }) {jaxpp.num_microbatches = 4 : i64}
module @treduce_schedule_name attributes {jaxpp.num_segments = 4 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = "jaxpp.loop"(%arg0) ({
    ^bb0(%i: tensor<i32>, %acc: tensor<2x4xf32>):
      %1 = stablehlo.tanh %acc {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64} : tensor<2x4xf32>
      %2 = stablehlo.sine %1 {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64} : tensor<2x4xf32>
      %3 = stablehlo.cosine %2 {jaxpp.kind = "fwd", jaxpp.segment = 2 : i64} : tensor<2x4xf32>
      %4 = stablehlo.negate %3 {jaxpp.kind = "fwd", jaxpp.segment = 3 : i64} : tensor<2x4xf32>
      "jaxpp.yield"(%4) : (tensor<2x4xf32>) -> ()
    }) {jaxpp.num_microbatches = 4 : i64, jaxpp.schedule = {kind = "Interleaved1F1B"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

// An older module's schedule text, a bare built-in name, is read as that name.

// CHECK-LABEL: module @old_schedule_name attributes {jaxpp.num_segments = 1 : i64, jaxpp.num_stages = 1 : i64, jaxpp.schedule = {kind = "GPipe", num_stages = 1 : i64}, jaxpp.stage_split = array<i64: 1>}
module @old_schedule_name attributes {jaxpp.num_segments = 1 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = "jaxpp.loop"(%arg0) ({
    ^bb0(%i: tensor<i32>, %acc: tensor<2x4xf32>):
      %1 = stablehlo.tanh %acc {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64} : tensor<2x4xf32>
      "jaxpp.yield"(%1) : (tensor<2x4xf32>) -> ()
    }) {jaxpp.num_microbatches = 4 : i64, jaxpp.schedule = "GPipe"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}
