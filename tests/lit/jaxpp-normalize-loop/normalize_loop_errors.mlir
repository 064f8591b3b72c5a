// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-normalize-loop)'

module @two_loop_markers {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    // expected-error @+1 {{a step may hold only one microbatch loop (treduce): call treduce once and return everything the microbatches compute from the function it applies}}
    %0:3 = stablehlo.while(%iterArg = %c, %iterArg_1 = %c_0, %iterArg_2 = %arg0) : tensor<i32>, tensor<i32>, tensor<2x4xf32>
    cond {
      %c_3 = stablehlo.constant dense<2> : tensor<i32>
      %1 = stablehlo.compare LT, %iterArg, %c_3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %c_3 = stablehlo.constant dense<1> : tensor<i32>
      %1 = stablehlo.add %iterArg, %c_3 : tensor<i32>
      %2 = stablehlo.add %iterArg_1, %c_3 : tensor<i32>
      %3 = stablehlo.custom_call @jaxpp.loop_marker(%iterArg_1) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.num_microbatches = "2", jaxpp.reductions = "add", jaxpp.schedule = ""}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<i32>) -> tensor<i32>
      %5 = stablehlo.custom_call @jaxpp.loop_marker(%iterArg_1) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.num_microbatches = "2", jaxpp.reductions = "add", jaxpp.schedule = ""}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<i32>) -> tensor<i32>
      %4 = stablehlo.tanh %iterArg_2 : tensor<2x4xf32>
      stablehlo.return %1, %2, %4 : tensor<i32>, tensor<i32>, tensor<2x4xf32>
    }
    return %0#2 : tensor<2x4xf32>
  }
}

// -----

module @marker_outside_while {
  func.func @main(%arg0: tensor<i32>) -> tensor<i32> {
    // expected-error @+1 {{the microbatch loop marker must sit directly in the body of a top-level stablehlo.while (treduce inside other control flow is not supported)}}
    %0 = stablehlo.custom_call @jaxpp.loop_marker(%arg0) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.num_microbatches = "2", jaxpp.reductions = "add", jaxpp.schedule = ""}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<i32>) -> tensor<i32>
    return %0 : tensor<i32>
  }
}

// -----

module @no_num_microbatches {
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
      %3 = stablehlo.custom_call @jaxpp.loop_marker(%iterArg_1) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.reductions = "add", jaxpp.schedule = ""}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<i32>) -> tensor<i32>
      %4 = stablehlo.tanh %iterArg_2 : tensor<2x4xf32>
      stablehlo.return %1, %2, %4 : tensor<i32>, tensor<i32>, tensor<2x4xf32>
    }
    return %0#2 : tensor<2x4xf32>
  }
}

// -----

module @zero_microbatches {
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
      %3 = stablehlo.custom_call @jaxpp.loop_marker(%iterArg_1) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.num_microbatches = "0", jaxpp.reductions = "add", jaxpp.schedule = ""}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<i32>) -> tensor<i32>
      %4 = stablehlo.tanh %iterArg_2 : tensor<2x4xf32>
      stablehlo.return %1, %2, %4 : tensor<i32>, tensor<i32>, tensor<2x4xf32>
    }
    return %0#2 : tensor<2x4xf32>
  }
}

// -----

// The marker is on a value computed from the state, not on a counter.
module @marker_on_state {
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
      %5 = stablehlo.convert %iterArg_2 : (tensor<2x4xf32>) -> tensor<2x4xi32>
      %6 = stablehlo.slice %5 [0:1, 0:1] : (tensor<2x4xi32>) -> tensor<1x1xi32>
      %7 = stablehlo.reshape %6 : (tensor<1x1xi32>) -> tensor<i32>
      // expected-error @+1 {{the loop marker must mark the loop's microbatch counter (0, 1, 2, ...)}}
      %3 = stablehlo.custom_call @jaxpp.loop_marker(%7) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.num_microbatches = "2", jaxpp.reductions = "add", jaxpp.schedule = ""}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<i32>) -> tensor<i32>
      %4 = stablehlo.tanh %iterArg_2 : tensor<2x4xf32>
      stablehlo.return %1, %2, %4 : tensor<i32>, tensor<i32>, tensor<2x4xf32>
    }
    return %0#2 : tensor<2x4xf32>
  }
}

// -----

module @counter_used_after_loop {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    // expected-error @+1 {{the microbatch counter is used after the loop, which is not supported}}
    %0:3 = stablehlo.while(%iterArg = %c, %iterArg_1 = %c_0, %iterArg_2 = %arg0) : tensor<i32>, tensor<i32>, tensor<2x4xf32>
    cond {
      %c_3 = stablehlo.constant dense<2> : tensor<i32>
      %1 = stablehlo.compare LT, %iterArg, %c_3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %c_3 = stablehlo.constant dense<1> : tensor<i32>
      %1 = stablehlo.add %iterArg, %c_3 : tensor<i32>
      %2 = stablehlo.add %iterArg_1, %c_3 : tensor<i32>
      %3 = stablehlo.custom_call @jaxpp.loop_marker(%iterArg_1) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.num_microbatches = "2", jaxpp.reductions = "add", jaxpp.schedule = ""}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<i32>) -> tensor<i32>
      %4 = stablehlo.tanh %iterArg_2 : tensor<2x4xf32>
      stablehlo.return %1, %2, %4 : tensor<i32>, tensor<i32>, tensor<2x4xf32>
    }
    %5 = stablehlo.convert %0#1 : (tensor<i32>) -> tensor<f32>
    return %0#2 : tensor<2x4xf32>
  }
}
