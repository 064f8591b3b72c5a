// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-split-stacked-values)'

// The pass reads each op's stage: the stages must be chosen first.

module @stages_not_chosen {
  func.func @main(%w: tensor<4x3xf32>, %start: tensor<4x3xf32>) -> tensor<4x3xf32> {
    %acc = "jaxpp.loop"(%start) ({
    ^bb0(%i: tensor<i32>, %g: tensor<4x3xf32>):
      // expected-error @+1 {{jaxpp-split-stacked-values: 'stablehlo.slice' has no stage assignment: run jaxpp-choose-stages first}}
      %w0 = stablehlo.slice %w [0:2, 0:3] : (tensor<4x3xf32>) -> tensor<2x3xf32>
      %w1 = stablehlo.slice %w [2:4, 0:3] : (tensor<4x3xf32>) -> tensor<2x3xf32>
      %whole = stablehlo.concatenate %w0, %w1, dim = 0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
      %sum = stablehlo.add %g, %whole : tensor<4x3xf32>
      "jaxpp.yield"(%sum) : (tensor<4x3xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    return %acc : tensor<4x3xf32>
  }
}

// -----

// After outlining, the stages' ops sit in their functions, where the pass no longer
// sees which stage reads which rows.

module @after_outlining attributes {jaxpp.num_stages = 1 : i64} {
  func.func @main(%w: tensor<4x3xf32>) -> tensor<4x3xf32> {
    %acc = "jaxpp.loop"(%w) ({
    ^bb0(%i: tensor<i32>, %g: tensor<4x3xf32>):
      // expected-error @+1 {{jaxpp-split-stacked-values: the stages are already outlined (found jaxpp.task @stage0_bwd): run jaxpp-split-stacked-values before jaxpp-outline-stages}}
      %0 = "jaxpp.task"(%g) {callee = @stage0_bwd, jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<4x3xf32>) -> tensor<4x3xf32>
      "jaxpp.yield"(%0) : (tensor<4x3xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    return %acc : tensor<4x3xf32>
  }
  func.func private @stage0_bwd(%arg0: tensor<4x3xf32>) -> tensor<4x3xf32> {
    return %arg0 : tensor<4x3xf32>
  }
}

// -----

// Without the microbatch loop normalized, the step is still treduce's while loop.

module @loop_not_normalized {
  func.func @main(%w: tensor<4x3xf32>) -> tensor<i32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    // expected-error @+1 {{jaxpp-split-stacked-values: the microbatch loop is still a stablehlo.while holding treduce's loop marker: run jaxpp-normalize-loop first}}
    %r = stablehlo.while(%i = %c) : tensor<i32>
    cond {
      %t = stablehlo.constant dense<false> : tensor<i1>
      stablehlo.return %t : tensor<i1>
    } do {
      %m = stablehlo.optimization_barrier {jaxpp.marker = "loop", jaxpp.num_microbatches = 2 : i64} %i : tensor<i32>
      stablehlo.return %m : tensor<i32>
    }
    return %r : tensor<i32>
  }
}
