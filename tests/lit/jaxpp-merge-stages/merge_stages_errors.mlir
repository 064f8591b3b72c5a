// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-merge-stages{stage-split=2,2})'

// The split covers four segments, the program has three.

// expected-error @+1 {{stage split [2, 2] covers 4 marked segments but the program has 3: give each stage's segment count so that they sum to 3}}
module @split_does_not_cover attributes {jaxpp.num_stages = 3 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    %1 = stablehlo.sine %0 {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<2x4xf32>
    %2 = stablehlo.cosine %1 {jaxpp.kind = "fwd", jaxpp.stage = 2 : i64} : tensor<2x4xf32>
    return %2 : tensor<2x4xf32>
  }
}

// -----

// Merged once already: a second merge would renumber stages that are no longer segments.

// expected-error @+1 {{the stages are already merged}}
module @merged_twice attributes {jaxpp.num_stages = 2 : i64, jaxpp.stage_split = array<i64: 2, 2>} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    %1 = stablehlo.sine %0 {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<2x4xf32>
    return %1 : tensor<2x4xf32>
  }
}

// -----

// Stages not assigned yet.

module @not_assigned {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{jaxpp-merge-stages: 'stablehlo.tanh' has no stage assignment: run jaxpp-assign-stages first}}
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}
