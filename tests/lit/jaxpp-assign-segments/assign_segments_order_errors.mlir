// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-assign-segments)'

// The stages of a treduce step are in the body of its microbatch loop, which
// only jaxpp-normalize-loop turns into the jaxpp.loop this pass splits. The
// error blames the while and names the pass to run, not treduce (which the
// step already uses).

module @treduce_loop_not_normalized {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    // expected-error @+1 {{jaxpp-assign-segments: the microbatch loop is still a stablehlo.while holding treduce's loop marker: run jaxpp-normalize-loop first}}
    %0:2 = stablehlo.while(%iterArg = %c, %iterArg_0 = %arg0) : tensor<i32>, tensor<2x4xf32>
    cond {
      %c_1 = stablehlo.constant dense<2> : tensor<i32>
      %1 = stablehlo.compare LT, %iterArg, %c_1, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %c_1 = stablehlo.constant dense<1> : tensor<i32>
      %1 = stablehlo.custom_call @jaxpp.loop_marker(%iterArg) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.num_microbatches = "2", jaxpp.reductions = "add", jaxpp.schedule = ""}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<i32>) -> tensor<i32>
      %2 = stablehlo.add %iterArg, %c_1 : tensor<i32>
      %3 = stablehlo.tanh %iterArg_0 : tensor<2x4xf32>
      %4 = stablehlo.custom_call @jaxpp.enter_stage(%3) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
      %5 = stablehlo.sine %4 : tensor<2x4xf32>
      stablehlo.return %2, %5 : tensor<i32>, tensor<2x4xf32>
    }
    return %0#1 : tensor<2x4xf32>
  }
}
