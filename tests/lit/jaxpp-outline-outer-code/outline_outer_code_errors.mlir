// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-outline-outer-code)'

// expected-error @+1 {{the module has no 'func.func @main' to partition}}
module @no_main {
  func.func @step(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    return %arg0 : tensor<2x4xf32>
  }
}

// -----

module @loop_without_state_ranks attributes {jaxpp.num_ranks = 1 : i64, jaxpp.num_stages = 1 : i64} {
  func.func @main(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {
    // expected-error @+1 {{the loop has no jaxpp.state_ranks: run jaxpp-place-stages}}
    %0 = "jaxpp.loop"(%arg0) ({
    ^bb0(%arg1: tensor<i32>, %arg2: tensor<4x4xf32>):
      %1 = "jaxpp.task"(%arg2) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
      "jaxpp.yield"(%1) : (tensor<4x4xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    return %0 : tensor<4x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<4x4xf32>
    return %0 : tensor<4x4xf32>
  }
}

// -----

// Running the pass twice is refused at the first task outside the loop.
module @already_outlined attributes {jaxpp.num_ranks = 1 : i64, jaxpp.num_stages = 1 : i64} {
  func.func @main(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {
    // expected-error @+1 {{'jaxpp.task' outside the loop is already outlined}}
    %0 = "jaxpp.task"(%arg0) {callee = @pre0_r0, jaxpp.kind = "pre", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %1 = "jaxpp.loop"(%0) ({
    ^bb0(%arg1: tensor<i32>, %arg2: tensor<4x4xf32>):
      %2 = "jaxpp.task"(%arg2) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
      "jaxpp.yield"(%2) : (tensor<4x4xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64, jaxpp.state_ranks = [0]} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    return %1 : tensor<4x4xf32>
  }
  func.func private @pre0_r0(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {
    return %arg0 : tensor<4x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<4x4xf32>
    return %0 : tensor<4x4xf32>
  }
}
