// RUN: jaxpp-opt %s --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-inline-calls{max-depth=1})'

// Two levels of calls with max-depth=1: the second level is refused, at its call.

module @deeper_than_max_depth {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = call @outer(%arg0) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @outer(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{this call of 'inner' is nested deeper than max-depth=1 calls (recursive functions cannot be partitioned)}}
    %0 = call @inner(%arg0) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @inner(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}
