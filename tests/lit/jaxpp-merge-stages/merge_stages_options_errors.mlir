// RUN: not jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-merge-stages{stage-split=2,0,1})' 2>&1 | filecheck %s

// A stage of no segment is refused before the input is read, as a wrong command line.

// CHECK: option 'stage-split' entries must be at least 1, got 0
module @empty_stage attributes {jaxpp.num_stages = 3 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}
