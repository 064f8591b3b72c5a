// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-outline-stages)'

// expected-error @+1 {{the module has no 'func.func @main' to partition}}
module @no_main attributes {jaxpp.num_stages = 1 : i64} {
  func.func @step(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    return %arg0 : tensor<2x4xf32>
  }
}

// -----

module @op_without_stage attributes {jaxpp.num_stages = 1 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    // expected-error @+1 {{'stablehlo.sine' has no stage assignment: run jaxpp-choose-stages first}}
    %1 = stablehlo.sine %0 : tensor<2x4xf32>
    return %1 : tensor<2x4xf32>
  }
}

// -----

// expected-error @+1 {{module has no jaxpp.num_stages attribute}}
module @no_num_stages {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

// Running the pass twice is refused at the first task (outlining tasks again
// would define @stage0_fwd a second time).
module @already_outlined attributes {jaxpp.num_stages = 1 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{jaxpp-outline-stages: the stages are already outlined (found jaxpp.task @stage0_fwd): run jaxpp-outline-stages only once}}
    %0 = "jaxpp.task"(%arg0) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

// A treduce step whose loop is still a stablehlo.while.
module @treduce_loop_not_normalized attributes {jaxpp.num_stages = 1 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    // expected-error @+1 {{jaxpp-outline-stages: the microbatch loop is still a stablehlo.while holding treduce's loop marker: run jaxpp-normalize-loop first}}
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

// -----

// Shardy's propagation ran but its reshard was not turned back into a
// constraint: it would reach a stage module, which XLA rejects.
module @reshard_left attributes {jaxpp.num_stages = 1 : i64} {
  sdy.mesh @mesh = <["data"=2]>
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{jaxpp-outline-stages: an sdy.reshard made by Shardy's propagation is left (XLA rejects it): run jaxpp-restore-sharding-constraints first}}
    %0 = sdy.reshard %arg0 <@mesh, [{"data"}, {}]> {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    %1 = stablehlo.tanh %0 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    return %1 : tensor<2x4xf32>
  }
}
