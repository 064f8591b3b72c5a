// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-assign-segments)'

// expected-error @+1 {{the module has no 'func.func @main' to partition}}
module @no_main {
  func.func @step(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    return %arg0 : tensor<2x4xf32>
  }
}

// -----

module @no_marker {
  // expected-error @+1 {{no stage markers found in the step (no_marker): mark the end of every stage with jaxpp_mlir.pipeline_enter_stage (the last one after the last layer)}}
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

// A microbatch loop without markers: blamed on the loop, whose location is the user's
// treduce call.
module @no_marker_in_the_loop {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{no stage markers found in the function treduce applies to each microbatch: mark the end of every stage}}
    %0 = "jaxpp.loop"(%arg0) ({
    ^bb0(%i: tensor<i32>, %acc: tensor<2x4xf32>):
      %1 = stablehlo.tanh %acc : tensor<2x4xf32>
      "jaxpp.yield"(%1) : (tensor<2x4xf32>) -> ()
    }) {jaxpp.num_microbatches = 4 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

// Two backward markers without any forward marker: autodiff gives at most one
// more backward marker than forward markers (jax.grad may drop the last one).
module @only_backward_markers {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.custom_call @jaxpp.enter_stage(%arg0) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "bwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    // expected-error @+1 {{this is backward marker 2 on its path, but the forward markers make 0 stage(s): more transposed markers than markers}}
    %1 = stablehlo.custom_call @jaxpp.enter_stage(%0) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "bwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %1 : tensor<2x4xf32>
  }
}

// -----

module @call_not_inlined {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{jaxpp-assign-segments: @main still calls @layer: run jaxpp-inline-calls first}}
    %0 = call @layer(%arg0) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %1 = stablehlo.custom_call @jaxpp.enter_stage(%0) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %1 : tensor<2x4xf32>
  }
  func.func private @layer(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

module @marker_in_loop {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0:2 = stablehlo.while(%iterArg = %c, %iterArg_0 = %arg0) : tensor<i32>, tensor<2x4xf32>
     cond {
      %c_1 = stablehlo.constant dense<3> : tensor<i32>
      %1 = stablehlo.compare  LT, %iterArg, %c_1 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %c_1 = stablehlo.constant dense<1> : tensor<i32>
      %1 = stablehlo.add %iterArg, %c_1 : tensor<i32>
      // expected-error @+1 {{stage marker inside 'stablehlo.while' is not supported: stage boundaries must sit at the top level of the step: markers inside a layer scan are read by jaxpp-segment-layer-scans, which partition runs when every marker ends a layer scan's body (each scanned layer then ends a segment): drop the markers outside the scan, or unroll the loop over layers; for the microbatch loop use jaxpp_mlir.treduce}}
      %2 = stablehlo.custom_call @jaxpp.enter_stage(%iterArg_0) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
      stablehlo.return %1, %2 : tensor<i32>, tensor<2x4xf32>
    }
    return %0#1 : tensor<2x4xf32>
  }
}

// -----

module @forward_marker_after_backward_marker {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.custom_call @jaxpp.enter_stage(%arg0) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %1 = stablehlo.custom_call @jaxpp.enter_stage(%0) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "bwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %2 = stablehlo.tanh %1 : tensor<2x4xf32>
    // expected-error @+1 {{a forward stage marker depends on a backward (gradient) value: higher-order gradients through stage markers are not supported}}
    %3 = stablehlo.custom_call @jaxpp.enter_stage(%2) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %3 : tensor<2x4xf32>
  }
}

// -----

module @more_backward_than_forward_markers {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.custom_call @jaxpp.enter_stage(%arg0) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %1 = stablehlo.custom_call @jaxpp.enter_stage(%0) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "bwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %2 = stablehlo.custom_call @jaxpp.enter_stage(%1) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "bwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    // expected-error @+1 {{this is backward marker 3 on its path, but the forward markers make 1 stage(s): more transposed markers than markers}}
    %3 = stablehlo.custom_call @jaxpp.enter_stage(%2) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "bwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %4 = stablehlo.tanh %3 : tensor<2x4xf32>
    return %4 : tensor<2x4xf32>
  }
}

// -----

// A lax.scan over layers inside the function treduce applies to a microbatch.
module @marker_in_scan_inside_treduce {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = "jaxpp.loop"(%arg0) ({
    ^bb0(%arg1: tensor<i32>, %arg2: tensor<2x4xf32>):
      %c = stablehlo.constant dense<0> : tensor<i32>
      %1:2 = stablehlo.while(%iterArg = %c, %iterArg_0 = %arg2) : tensor<i32>, tensor<2x4xf32>
       cond {
        %c_1 = stablehlo.constant dense<3> : tensor<i32>
        %2 = stablehlo.compare  LT, %iterArg, %c_1 : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %2 : tensor<i1>
      } do {
        %c_1 = stablehlo.constant dense<1> : tensor<i32>
        %2 = stablehlo.add %iterArg, %c_1 : tensor<i32>
        // expected-error @+1 {{stage marker inside 'stablehlo.while' is not supported: stage boundaries must sit at the top level of the function treduce applies to each microbatch: markers inside a layer scan are read by jaxpp-segment-layer-scans, which partition runs when every marker ends a layer scan's body (each scanned layer then ends a segment): drop the markers outside the scan, or unroll the loop over layers}}
        %3 = stablehlo.custom_call @jaxpp.enter_stage(%iterArg_0) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
        stablehlo.return %2, %3 : tensor<i32>, tensor<2x4xf32>
      }
      "jaxpp.yield"(%1#1) : (tensor<2x4xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

// jax.grad of a function that calls treduce: the transposed loop holds the
// backward markers.
module @gradient_of_treduce {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = "jaxpp.loop"(%arg0) ({
    ^bb0(%arg1: tensor<i32>, %arg2: tensor<2x4xf32>):
      %1 = stablehlo.custom_call @jaxpp.enter_stage(%arg2) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
      "jaxpp.yield"(%1) : (tensor<2x4xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %1:2 = stablehlo.while(%iterArg = %c, %iterArg_0 = %0) : tensor<i32>, tensor<2x4xf32>
     cond {
      %c_1 = stablehlo.constant dense<2> : tensor<i32>
      %2 = stablehlo.compare  LT, %iterArg, %c_1 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %2 : tensor<i1>
    } do {
      %c_1 = stablehlo.constant dense<1> : tensor<i32>
      %2 = stablehlo.add %iterArg, %c_1 : tensor<i32>
      // expected-error @+1 {{a backward stage marker inside a loop: jax.grad of a function that calls treduce is not supported; take the gradient inside treduce, as in treduce(lambda mb: jax.value_and_grad(loss)(params, mb), batch)}}
      %3 = stablehlo.custom_call @jaxpp.enter_stage(%iterArg_0) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "bwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
      stablehlo.return %2, %3 : tensor<i32>, tensor<2x4xf32>
    }
    return %1#1 : tensor<2x4xf32>
  }
}

// -----

// A marker inside a shard_map body (sdy.manual_computation).
module @marker_in_shard_map {
  sdy.mesh @mesh = <["stage"=1, "data"=2]>
  func.func @main(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"data"}, {}]>] out_shardings=[<@mesh, [{"data"}, {}]>] manual_axes={"stage", "data"} (%arg1: tensor<2x4xf32>) {
      %1 = stablehlo.tanh %arg1 : tensor<2x4xf32>
      // expected-error @+1 {{stage marker inside 'sdy.manual_computation' (a shard_map body) is not supported: stage boundaries must sit at the top level of the step: a shard_map body runs per device shard, inside one stage; mark its results outside it}}
      %2 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %1 : tensor<2x4xf32>
      sdy.return %2 : tensor<2x4xf32>
    } : (tensor<4x4xf32>) -> tensor<4x4xf32>
    return %0 : tensor<4x4xf32>
  }
}
