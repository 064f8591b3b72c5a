// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-check-attributes)'

// A marker direction out of the vocabulary would make a plain barrier of the marker.
module @unknown_direction {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{attribute 'jaxpp.marker' on 'stablehlo.optimization_barrier' must be a string: 'fwd' or 'bwd' (a stage marker) or 'loop' (treduce's loop marker), got "fwdx"}}
    %0 = stablehlo.optimization_barrier {jaxpp.marker = "fwdx"} %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

module @direction_of_another_kind {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{attribute 'jaxpp.marker' on 'stablehlo.optimization_barrier' must be a string: 'fwd' or 'bwd' (a stage marker) or 'loop' (treduce's loop marker), got 1 : i64}}
    %0 = stablehlo.optimization_barrier {jaxpp.marker = 1 : i64} %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

module @stage_name_of_another_kind {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{attribute 'jaxpp.stage_name' on 'stablehlo.optimization_barrier' must be a string (the stage's name), got 5 : i64}}
    %0 = stablehlo.optimization_barrier {jaxpp.marker = "fwd", jaxpp.stage_name = 5 : i64} %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

module @unknown_attribute {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{unknown attribute 'jaxpp.stagename' on 'stablehlo.tanh' (did you mean 'jaxpp.stage_name'?): jaxpp_mlir knows jaxpp.marker, jaxpp.stage_name,}}
    %0 = stablehlo.tanh %arg0 {jaxpp.stagename = "embed"} : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

module @marker_on_another_op {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{attribute 'jaxpp.marker' on 'stablehlo.tanh': only stablehlo.optimization_barrier carries it; remove it}}
    %0 = stablehlo.tanh %arg0 {jaxpp.marker = "fwd"} : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

// expected-error @+1 {{attribute 'jaxpp.num_segments' on 'builtin.module' must be an integer of at least 1, got 0 : i64}}
module @module_attribute_out_of_range attributes {jaxpp.num_segments = 0 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    return %arg0 : tensor<2x4xf32>
  }
}

// -----

// A saved custom-call marker: its direction among its frontend attributes.
module @saved_marker_with_unknown_direction {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{attribute 'jaxpp.direction' on 'stablehlo.custom_call' among its frontend attributes must be the string 'fwd' or 'bwd', got "forward"}}
    %0 = stablehlo.custom_call @jaxpp.enter_stage(%arg0) {mhlo.frontend_attributes = {jaxpp.direction = "forward"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

module @loop_marker_with_bad_reductions {
  func.func @main(%arg0: tensor<i32>) -> tensor<i32> {
    // expected-error @+1 {{attribute 'jaxpp.reductions' on 'stablehlo.optimization_barrier' must be a string of comma-separated reductions (add, max, concat(AXIS)), got "add,sum"}}
    %0 = stablehlo.optimization_barrier {jaxpp.marker = "loop", jaxpp.num_microbatches = 4 : i64, jaxpp.reductions = "add,sum"} %arg0 : tensor<i32>
    return %0 : tensor<i32>
  }
}
