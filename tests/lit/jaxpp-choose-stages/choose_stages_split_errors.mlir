// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-choose-stages{stage-split=2,2})'

// The split covers four segments, the program has three. Without a loop, located where
// the step was lowered (where JAX locates the step's return).

module @split_does_not_cover attributes {jaxpp.num_segments = 3 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64} : tensor<2x4xf32>
    %1 = stablehlo.sine %0 {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64} : tensor<2x4xf32>
    %2 = stablehlo.cosine %1 {jaxpp.kind = "fwd", jaxpp.segment = 2 : i64} : tensor<2x4xf32>
    // expected-error @+1 {{stage split [2, 2] covers 4 marked segments but the program has 3: give each stage's segment count so that they sum to 3}}
    return %2 : tensor<2x4xf32>
  }
}

// -----

// The split makes two stages, treduce's schedule has three.

module @split_does_not_fit_the_schedule attributes {jaxpp.num_segments = 4 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{stage_split (2, 2) makes 2 stages but the schedule GPipe(num_stages=3) has 3}}
    %0 = "jaxpp.loop"(%arg0) ({
    ^bb0(%i: tensor<i32>, %acc: tensor<2x4xf32>):
      %1 = stablehlo.tanh %acc {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64} : tensor<2x4xf32>
      %2 = stablehlo.sine %1 {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64} : tensor<2x4xf32>
      %3 = stablehlo.cosine %2 {jaxpp.kind = "fwd", jaxpp.segment = 2 : i64} : tensor<2x4xf32>
      %4 = stablehlo.negate %3 {jaxpp.kind = "fwd", jaxpp.segment = 3 : i64} : tensor<2x4xf32>
      "jaxpp.yield"(%4) : (tensor<2x4xf32>) -> ()
    }) {jaxpp.num_microbatches = 4 : i64, jaxpp.schedule = {kind = "GPipe", num_stages = 3 : i64}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}
