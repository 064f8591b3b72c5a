// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-split-backward)'

// With a microbatch loop the ops checked are those of the loop body; the
// untagged code around the loop (the constant 0 here) is left alone.

module @loop_op_without_stage attributes {jaxpp.num_stages = 1 : i64, jaxpp.schedule = {kind = "ZeroBubble", num_stages = 1 : i64}} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<2x4xf32>
    %0 = "jaxpp.loop"(%cst) ({
    ^bb0(%arg1: tensor<i32>, %arg2: tensor<2x4xf32>):
      %1 = stablehlo.tanh %arg0 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
      // expected-error @+1 {{has no stage assignment: run jaxpp-choose-stages first}}
      %2 = stablehlo.add %arg2, %1 : tensor<2x4xf32>
      "jaxpp.yield"(%2) : (tensor<2x4xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

module @loop_already_split attributes {jaxpp.num_stages = 1 : i64, jaxpp.schedule = {kind = "ZeroBubble", num_stages = 1 : i64}} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<2x4xf32>
    %0 = "jaxpp.loop"(%cst) ({
    ^bb0(%arg1: tensor<i32>, %arg2: tensor<2x4xf32>):
      %1 = stablehlo.tanh %arg0 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
      // expected-error @+1 {{the backward is already split}}
      %2 = stablehlo.sine %1 {jaxpp.kind = "bwd_i", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
      %3 = stablehlo.add %arg2, %2 {jaxpp.kind = "bwd_w", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
      "jaxpp.yield"(%3) : (tensor<2x4xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}
