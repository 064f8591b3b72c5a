// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-pack-parameters)'

module @stages_not_assigned {
  func.func @main(%arg0: tensor<f32>, %arg1: tensor<4xf32>, %arg2: tensor<4xf32>) -> tensor<f32> {
    %0 = "jaxpp.loop"(%arg0) ({
    ^bb0(%arg3: tensor<i32>, %arg4: tensor<f32>):
      // expected-error @+1 {{jaxpp-pack-parameters: 'stablehlo.add' has no stage assignment: run jaxpp-choose-stages first}}
      %1 = stablehlo.add %arg1, %arg2 : tensor<4xf32>
      "jaxpp.yield"(%arg4) : (tensor<f32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

// After outlining, the parameters' reads sit in stage functions.
module @after_outlining attributes {jaxpp.num_stages = 1 : i64} {
  func.func @main(%arg0: tensor<f32>, %arg1: tensor<4xf32>, %arg2: tensor<4xf32>) -> tensor<f32> {
    %0 = "jaxpp.loop"(%arg0) ({
    ^bb0(%arg3: tensor<i32>, %arg4: tensor<f32>):
      // expected-error @+1 {{jaxpp-pack-parameters: the stages are already outlined (found jaxpp.task @stage0_fwd): run jaxpp-pack-parameters before jaxpp-outline-stages}}
      %1 = "jaxpp.task"(%arg4, %arg1, %arg2) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<f32>, tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
      "jaxpp.yield"(%1) : (tensor<f32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
  func.func private @stage0_fwd(%arg0: tensor<f32>, %arg1: tensor<4xf32>, %arg2: tensor<4xf32>) -> tensor<f32> {
    return %arg0 : tensor<f32>
  }
}

// -----

// Before jaxpp-normalize-loop, the microbatch loop is still a while.
module @loop_not_normalized {
  func.func @main(%arg0: tensor<i32>, %arg1: tensor<4xf32>) -> tensor<i32> {
    // expected-error @+1 {{jaxpp-pack-parameters: the microbatch loop is still a stablehlo.while holding treduce's loop marker: run jaxpp-normalize-loop first}}
    %0 = stablehlo.while(%iterArg = %arg0) : tensor<i32>
     cond {
      %c = stablehlo.constant dense<2> : tensor<i32>
      %1 = stablehlo.compare LT, %iterArg, %c : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %c = stablehlo.constant dense<1> : tensor<i32>
      %1 = stablehlo.custom_call @jaxpp.loop_marker(%iterArg) {jaxpp.num_microbatches = 2 : i64} : (tensor<i32>) -> tensor<i32>
      %2 = stablehlo.add %1, %c : tensor<i32>
      stablehlo.return %2 : tensor<i32>
    }
    return %0 : tensor<i32>
  }
}
