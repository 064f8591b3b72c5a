// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-choose-stages{schedule={kind = "GPipe", num_stages = 4} mpmd-dim=4})'

// A schedule of more stages than the program has segments.

module @more_stages_than_segments attributes {jaxpp.num_segments = 2 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{the schedule GPipe(num_stages=4) has 4 stages but the program has 2 (one per pipeline_enter_stage marker)}}
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

// treduce was given another schedule than the option's.

module @conflicting_schedules attributes {jaxpp.num_segments = 4 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{treduce was given the schedule Std1F1B(num_stages=4) but partition was given GPipe(num_stages=4): give the schedule in one place, or the same in both}}
    %0 = "jaxpp.loop"(%arg0) ({
    ^bb0(%i: tensor<i32>, %acc: tensor<2x4xf32>):
      %1 = stablehlo.tanh %acc {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64} : tensor<2x4xf32>
      %2 = stablehlo.sine %1 {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64} : tensor<2x4xf32>
      %3 = stablehlo.cosine %2 {jaxpp.kind = "fwd", jaxpp.segment = 2 : i64} : tensor<2x4xf32>
      %4 = stablehlo.negate %3 {jaxpp.kind = "fwd", jaxpp.segment = 3 : i64} : tensor<2x4xf32>
      "jaxpp.yield"(%4) : (tensor<2x4xf32>) -> ()
    }) {jaxpp.num_microbatches = 4 : i64, jaxpp.schedule = {kind = "Std1F1B", num_stages = 4 : i64}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

// A schedule orders the microbatches of a loop: a step without one has none to order.

module @no_loop_to_schedule attributes {jaxpp.num_segments = 4 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64} : tensor<2x4xf32>
    // expected-error @+1 {{a schedule orders the microbatches of a treduce loop, but the step has none}}
    return %0 : tensor<2x4xf32>
  }
}
