// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-split-accumulators)'

module @stages_not_assigned {
  func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "jaxpp.loop"(%arg0) ({
    ^bb0(%arg2: tensor<i32>, %arg3: tensor<4xf32>):
      // expected-error @+1 {{jaxpp-split-accumulators: 'stablehlo.sine' has no stage assignment: run jaxpp-choose-stages first}}
      %1 = stablehlo.sine %arg1 : tensor<4xf32>
      %2 = stablehlo.add %arg3, %1 : tensor<4xf32>
      "jaxpp.yield"(%2) : (tensor<4xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

// After outlining, the accumulators' updates sit in stage functions.
module @after_outlining attributes {jaxpp.num_stages = 1 : i64} {
  func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "jaxpp.loop"(%arg0) ({
    ^bb0(%arg1: tensor<i32>, %arg2: tensor<4xf32>):
      // expected-error @+1 {{jaxpp-split-accumulators: the stages are already outlined (found jaxpp.task @stage0_bwd): run jaxpp-split-accumulators before jaxpp-outline-stages}}
      %1 = "jaxpp.task"(%arg2) {callee = @stage0_bwd, jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
      "jaxpp.yield"(%1) : (tensor<4xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
  func.func private @stage0_bwd(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.sine %arg0 : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
