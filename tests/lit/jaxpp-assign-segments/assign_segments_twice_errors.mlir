// RUN: jaxpp-opt %s --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-assign-segments,jaxpp-assign-segments)'

// Running the pass twice is refused at the module, which the first run gave
// its jaxpp.num_segments.

// expected-error @+1 {{jaxpp-assign-segments: the segments are already assigned (found jaxpp.num_segments): run jaxpp-assign-segments only once}}
module @assigned_twice {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    %1 = stablehlo.custom_call @jaxpp.enter_stage(%0) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %2 = stablehlo.sine %1 : tensor<2x4xf32>
    return %2 : tensor<2x4xf32>
  }
}
