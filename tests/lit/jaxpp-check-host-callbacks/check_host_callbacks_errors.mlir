// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-check-host-callbacks)'

module @debug_print_in_stage {
  func.func @main(%arg0: tensor<f32>) -> tensor<f32> {
    // expected-error @+1 {{a host callback (jax.debug.print, jax.pure_callback or jax.experimental.io_callback) inside a pipelined step is not supported}}
    stablehlo.custom_call @xla_ffi_python_cpu_callback(%arg0) {has_side_effect = true} : (tensor<f32>) -> ()
    %0 = stablehlo.custom_call @jaxpp.enter_stage(%arg0) {mhlo.frontend_attributes = {jaxpp.direction = "fwd"}} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

module @pure_callback_in_stage {
  func.func @main(%arg0: tensor<f32>) -> tensor<f32> {
    %0 = stablehlo.custom_call @jaxpp.enter_stage(%arg0) {mhlo.frontend_attributes = {jaxpp.direction = "fwd"}} : (tensor<f32>) -> tensor<f32>
    // expected-error @+1 {{a host callback}}
    %1 = stablehlo.custom_call @xla_ffi_partitioned_python_gpu_callback(%0) : (tensor<f32>) -> tensor<f32>
    return %1 : tensor<f32>
  }
}

// -----

// A treduce step without stage markers may still be pipelined (a layer scan split into
// stages): its callbacks are refused too.
module @callback_in_unmarked_treduce_step {
  func.func @main(%arg0: tensor<f32>) -> tensor<f32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.optimization_barrier {jaxpp.marker = "loop", jaxpp.num_microbatches = 2 : i64} %c : tensor<i32>
    // expected-error @+1 {{a host callback}}
    stablehlo.custom_call @xla_ffi_python_cpu_callback(%arg0) {has_side_effect = true} : (tensor<f32>) -> ()
    return %arg0 : tensor<f32>
  }
}
