// RUN: not jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-verify-markers)' 2>&1 | filecheck %s

// A saved module whose transposed marker's direction was edited to "fwd": its
// location still says autodiff placed it.

// CHECK: model.py:7:3: error: this stage marker is marked forward ('fwd') but autodiff placed it as the transpose of a marker
module @flipped_direction {
  func.func @main(%arg0: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    %1 = stablehlo.custom_call @jaxpp.enter_stage(%0) {mhlo.frontend_attributes = {jaxpp.direction = "fwd"}} : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("jvp()/jaxpp_enter_stage"("model.py":7:3))
    %2 = stablehlo.cosine %1 : tensor<2x4xf32>
    %3 = stablehlo.custom_call @jaxpp.enter_stage(%2) {mhlo.frontend_attributes = {jaxpp.direction = "fwd"}} : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("transpose(jvp())/jaxpp_enter_stage"("model.py":7:3))
    %4 = stablehlo.multiply %3, %0 : tensor<2x4xf32>
    return %2, %4 : tensor<2x4xf32>, tensor<2x4xf32>
  }
}
