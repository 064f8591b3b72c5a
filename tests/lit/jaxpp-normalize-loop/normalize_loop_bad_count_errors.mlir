// RUN: jaxpp-opt %s --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-normalize-loop)'

// A microbatch count that is not a decimal number is as invalid as a missing
// or zero one.

module @non_decimal_num_microbatches {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %0:3 = stablehlo.while(%iterArg = %c, %iterArg_1 = %c_0, %iterArg_2 = %arg0) : tensor<i32>, tensor<i32>, tensor<2x4xf32>
    cond {
      %c_3 = stablehlo.constant dense<2> : tensor<i32>
      %1 = stablehlo.compare LT, %iterArg, %c_3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %c_3 = stablehlo.constant dense<1> : tensor<i32>
      %1 = stablehlo.add %iterArg, %c_3 : tensor<i32>
      %2 = stablehlo.add %iterArg_1, %c_3 : tensor<i32>
      // expected-error @+1 {{the loop marker has no valid jaxpp.num_microbatches}}
      %3 = stablehlo.custom_call @jaxpp.loop_marker(%iterArg_1) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.num_microbatches = "two", jaxpp.reductions = "add", jaxpp.schedule = ""}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<i32>) -> tensor<i32>
      %4 = stablehlo.tanh %iterArg_2 : tensor<2x4xf32>
      stablehlo.return %1, %2, %4 : tensor<i32>, tensor<i32>, tensor<2x4xf32>
    }
    return %0#2 : tensor<2x4xf32>
  }
}
