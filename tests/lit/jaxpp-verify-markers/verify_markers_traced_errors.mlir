// RUN: not jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-verify-markers)' 2>&1 | filecheck %s

// Saved modules whose marker locations are JAX's (a name stack ending in the
// marker's primitive): the errors are located at the user's lines.

// CHECK: model.py:9:5: error: backward-direction stage marker in forward code: it was bound outside every 'transpose(...)' of JAX's name stack (its location), where autodiff places backward markers. Backward markers are the transposes autodiff places (or mark_stage_end_backward in a custom_vjp backward rule)
// CHECK: model.py:4:11: error: a stage marker has no backward counterpart: the step's gradient crosses 0 backward marker(s) for 2 forward marker(s), so the gradient code at model.py:14:7, which reads a value of stage 1, would run in the backward of stage 2. The marker without one is among those ending stage 1 at model.py:4:11 (in 'layer_fwd'). If a marker is inside a jax.custom_vjp forward rule, pass the cotangents its backward rule receives through jaxpp_mlir.mark_stage_end_backward

// A backward marker bound in forward code with nothing downstream of it: its
// location (JAX's name stack) has no transpose, where autodiff places them.
module @backward_marker_bound_in_forward_code {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    %1 = stablehlo.optimization_barrier {jaxpp.marker = "bwd"} %0 : tensor<2x4xf32> loc("jit(step)/jvp()/jaxpp_enter_stage"("model.py":9:5))
    %2 = stablehlo.sine %1 : tensor<2x4xf32>
    return %2 : tensor<2x4xf32>
  }
}

// -----

// A marker in a custom_vjp forward rule whose backward rule has no
// mark_stage_end_backward: no backward marker at all, and the backward rule's
// code (inside a transpose) reads stage 1's value.
module @custom_vjp_without_backward_marker {
  func.func @main(%arg0: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>) {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    %1 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %0 : tensor<2x4xf32> loc("jit(step)/jvp()/jaxpp_enter_stage"("model.py":2:7))
    %2 = stablehlo.sine %1 : tensor<2x4xf32>
    %3 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %2 : tensor<2x4xf32> loc("jit(step)/jvp()/jaxpp_enter_stage"(callsite("layer_fwd"("model.py":4:11) at "model"("model.py":20:3))))
    %4 = stablehlo.cosine %3 : tensor<2x4xf32>
    %5 = stablehlo.dot_general %2, %4, contracting_dims = [0] x [0] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32> loc("jit(step)/transpose(jvp())/dot_general"("model.py":14:7))
    return %4, %5 : tensor<2x4xf32>, tensor<4x4xf32>
  }
}
