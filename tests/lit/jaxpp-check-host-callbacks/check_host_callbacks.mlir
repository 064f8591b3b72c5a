// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-check-host-callbacks)' | filecheck %s

// A step without stage markers is not pipelined: its callback stays.

// CHECK-LABEL: module @unmarked_step
// CHECK:         stablehlo.custom_call @xla_ffi_python_cpu_callback
module @unmarked_step {
  func.func @main(%arg0: tensor<f32>) -> tensor<f32> {
    stablehlo.custom_call @xla_ffi_python_cpu_callback(%arg0) {has_side_effect = true} : (tensor<f32>) -> ()
    return %arg0 : tensor<f32>
  }
}

// -----

// CHECK-LABEL: module @marked_step_without_callback
// CHECK:         stablehlo.custom_call @jaxpp.enter_stage
module @marked_step_without_callback {
  func.func @main(%arg0: tensor<f32>) -> tensor<f32> {
    %0 = stablehlo.custom_call @jaxpp.enter_stage(%arg0) {mhlo.frontend_attributes = {jaxpp.direction = "fwd"}} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}
