// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-verify-markers)'

module @backward_marker_in_forward_code {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{backward-direction stage marker in forward code: the forward marker at}}
    %0 = stablehlo.custom_call @jaxpp.enter_stage(%arg0) {mhlo.frontend_attributes = {jaxpp.direction = "bwd"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %1 = stablehlo.tanh %0 : tensor<2x4xf32>
    %2 = stablehlo.custom_call @jaxpp.enter_stage(%1) {mhlo.frontend_attributes = {jaxpp.direction = "fwd"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %2 : tensor<2x4xf32>
  }
}

// -----

// Three forward markers but one backward marker: the gradient code reading
// stage 1's value would run in the backward of stage 2.
module @missing_backward_marker {
  func.func @main(%arg0: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    %1 = stablehlo.custom_call @jaxpp.enter_stage(%0) {mhlo.frontend_attributes = {jaxpp.direction = "fwd"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %2 = stablehlo.sine %1 : tensor<2x4xf32>
    // expected-error @+1 {{a stage marker has no backward counterpart: the step's gradient crosses 1 backward marker(s) for 3 forward marker(s)}}
    %3 = stablehlo.custom_call @jaxpp.enter_stage(%2) {mhlo.frontend_attributes = {jaxpp.direction = "fwd"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %4 = stablehlo.cosine %3 : tensor<2x4xf32>
    %5 = stablehlo.custom_call @jaxpp.enter_stage(%4) {mhlo.frontend_attributes = {jaxpp.direction = "fwd"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %6 = stablehlo.exponential %5 : tensor<2x4xf32>
    %7 = stablehlo.custom_call @jaxpp.enter_stage(%6) {mhlo.frontend_attributes = {jaxpp.direction = "bwd"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %8 = stablehlo.multiply %7, %2 : tensor<2x4xf32>
    return %6, %8 : tensor<2x4xf32>, tensor<2x4xf32>
  }
}

