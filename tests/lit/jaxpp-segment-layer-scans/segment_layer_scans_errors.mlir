// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-segment-layer-scans)'

module @no_marker_no_scan {
  // expected-error @+1 {{no stage markers found in the step (no_marker_no_scan): mark the end of every stage with jaxpp_mlir.pipeline_enter_stage (the last one after the last layer), or pass split_points=(...) naming the modules where stages start; looked for stage markers at the top level of the step}}
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

// A loop over the rows of the microbatch (time steps), no markers: it reads no stacked
// weight, so it is not a layer scan, and nothing else segments the step.
module @loop_over_microbatch_rows {
  func.func @main(%xs: tensor<4x3x2xf32>) -> tensor<2xf32> {
    %zero = stablehlo.constant dense<0.000000e+00> : tensor<2xf32>
    // expected-error @+1 {{no stage markers found in the function treduce applies to each microbatch}}
    %r = "jaxpp.loop"(%zero) ({
    ^bb0(%i: tensor<i32>, %acc: tensor<2xf32>):
      %c0 = stablehlo.constant dense<0> : tensor<i32>
      %mb0 = stablehlo.dynamic_slice %xs, %i, %c0, %c0, sizes = [1, 3, 2] : (tensor<4x3x2xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x3x2xf32>
      %mb = stablehlo.reshape %mb0 : (tensor<1x3x2xf32>) -> tensor<3x2xf32>
      %h:3 = stablehlo.while(%k = %c0, %s = %zero, %rows = %mb) : tensor<i32>, tensor<2xf32>, tensor<3x2xf32>
       cond {
        %c3 = stablehlo.constant dense<3> : tensor<i32>
        %lt = stablehlo.compare  LT, %k, %c3 : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %lt : tensor<i1>
      } do {
        %z = stablehlo.constant dense<0> : tensor<i32>
        %row = stablehlo.dynamic_slice %rows, %k, %z, sizes = [1, 2] : (tensor<3x2xf32>, tensor<i32>, tensor<i32>) -> tensor<1x2xf32>
        %x = stablehlo.reshape %row : (tensor<1x2xf32>) -> tensor<2xf32>
        %s1 = stablehlo.add %s, %x : tensor<2xf32>
        %one = stablehlo.constant dense<1> : tensor<i32>
        %k1 = stablehlo.add %k, %one : tensor<i32>
        stablehlo.return %k1, %s1, %rows : tensor<i32>, tensor<2xf32>, tensor<3x2xf32>
      }
      %a = stablehlo.add %acc, %h#1 : tensor<2xf32>
      "jaxpp.yield"(%a) : (tensor<2xf32>) -> ()
    }) {jaxpp.num_microbatches = 4 : i64} : (tensor<2xf32>) -> tensor<2xf32>
    return %r : tensor<2xf32>
  }
}

// -----

// The loop runs until a carried value says stop: no static trip count.
module @marker_in_loop_without_trip_count {
  func.func @main(%w: tensor<3x2x2xf32>, %x0: tensor<2x2xf32>, %n: tensor<i32>) -> tensor<2x2xf32> {
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %f:4 = stablehlo.while(%k = %c0, %x = %x0, %ws = %w, %limit = %n) : tensor<i32>, tensor<2x2xf32>, tensor<3x2x2xf32>, tensor<i32>
     cond {
      %lt = stablehlo.compare  LT, %k, %limit : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %z = stablehlo.constant dense<0> : tensor<i32>
      %row = stablehlo.dynamic_slice %ws, %k, %z, %z, sizes = [1, 2, 2] : (tensor<3x2x2xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x2xf32>
      %wk = stablehlo.reshape %row : (tensor<1x2x2xf32>) -> tensor<2x2xf32>
      %y = stablehlo.dot_general %x, %wk, contracting_dims = [1] x [0] : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
      // expected-error @+1 {{stage marker inside a 'stablehlo.while' that is not a layer scan: its trip count is not a constant. A marker may end the body of a loop over stacked layers}}
      %m = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %y : tensor<2x2xf32>
      %one = stablehlo.constant dense<1> : tensor<i32>
      %k1 = stablehlo.add %k, %one : tensor<i32>
      stablehlo.return %k1, %m, %ws, %limit : tensor<i32>, tensor<2x2xf32>, tensor<3x2x2xf32>, tensor<i32>
    }
    return %f#1 : tensor<2x2xf32>
  }
}

// -----

module @marker_in_loop_nested_in_scan {
  func.func @main(%w: tensor<3x2x2xf32>, %x0: tensor<2x2xf32>) -> tensor<2x2xf32> {
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %f:3 = stablehlo.while(%k = %c0, %x = %x0, %ws = %w) : tensor<i32>, tensor<2x2xf32>, tensor<3x2x2xf32>
     cond {
      %c3 = stablehlo.constant dense<3> : tensor<i32>
      %lt = stablehlo.compare  LT, %k, %c3 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %z = stablehlo.constant dense<0> : tensor<i32>
      %row = stablehlo.dynamic_slice %ws, %k, %z, %z, sizes = [1, 2, 2] : (tensor<3x2x2xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x2xf32>
      %wk = stablehlo.reshape %row : (tensor<1x2x2xf32>) -> tensor<2x2xf32>
      %inner:2 = stablehlo.while(%j = %z, %h = %x) : tensor<i32>, tensor<2x2xf32>
       cond {
        %c2 = stablehlo.constant dense<2> : tensor<i32>
        %lt = stablehlo.compare  LT, %j, %c2 : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %lt : tensor<i1>
      } do {
        %y = stablehlo.dot_general %h, %wk, contracting_dims = [1] x [0] : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
        // expected-error @+1 {{stage marker in a loop or conditional nested inside a loop over layers: a marker may only end the body of the layer scan itself}}
        %m = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %y : tensor<2x2xf32>
        %one = stablehlo.constant dense<1> : tensor<i32>
        %j1 = stablehlo.add %j, %one : tensor<i32>
        stablehlo.return %j1, %m : tensor<i32>, tensor<2x2xf32>
      }
      %one = stablehlo.constant dense<1> : tensor<i32>
      %k1 = stablehlo.add %k, %one : tensor<i32>
      stablehlo.return %k1, %inner#1, %ws : tensor<i32>, tensor<2x2xf32>, tensor<3x2x2xf32>
    }
    return %f#1 : tensor<2x2xf32>
  }
}

// -----

// Alone, the pass reads only markers that end a layer scan's body; partition's chain
// gives this step to jaxpp-assign-segments.
module @marker_outside_the_scan {
  func.func @main(%w: tensor<3x2x2xf32>, %x0: tensor<2x2xf32>) -> tensor<2x2xf32> {
    // expected-error @+1 {{this stage marker is not at the end of a layer scan's body: jaxpp-segment-layer-scans reads steps whose markers all end the body of a top-level loop over layers}}
    %x1 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %x0 : tensor<2x2xf32>
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %f:3 = stablehlo.while(%k = %c0, %x = %x1, %ws = %w) : tensor<i32>, tensor<2x2xf32>, tensor<3x2x2xf32>
     cond {
      %c3 = stablehlo.constant dense<3> : tensor<i32>
      %lt = stablehlo.compare  LT, %k, %c3 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %z = stablehlo.constant dense<0> : tensor<i32>
      %row = stablehlo.dynamic_slice %ws, %k, %z, %z, sizes = [1, 2, 2] : (tensor<3x2x2xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x2xf32>
      %wk = stablehlo.reshape %row : (tensor<1x2x2xf32>) -> tensor<2x2xf32>
      %y = stablehlo.dot_general %x, %wk, contracting_dims = [1] x [0] : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
      %m = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %y : tensor<2x2xf32>
      %one = stablehlo.constant dense<1> : tensor<i32>
      %k1 = stablehlo.add %k, %one : tensor<i32>
      stablehlo.return %k1, %m, %ws : tensor<i32>, tensor<2x2xf32>, tensor<3x2x2xf32>
    }
    return %f#1 : tensor<2x2xf32>
  }
}

// -----

module @backward_markers_without_forward_scan {
  func.func @main(%w: tensor<3x2x2xf32>, %x0: tensor<2x2xf32>) -> tensor<2x2xf32> {
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    // expected-error @+1 {{a loop over layers holds backward stage markers but no forward layer scan of 3 iterations comes before it}}
    %f:3 = stablehlo.while(%k = %c0, %x = %x0, %ws = %w) : tensor<i32>, tensor<2x2xf32>, tensor<3x2x2xf32>
     cond {
      %c3 = stablehlo.constant dense<3> : tensor<i32>
      %lt = stablehlo.compare  LT, %k, %c3 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %z = stablehlo.constant dense<0> : tensor<i32>
      %c2 = stablehlo.constant dense<2> : tensor<i32>
      %idx = stablehlo.subtract %c2, %k : tensor<i32>
      %m = stablehlo.optimization_barrier {jaxpp.marker = "bwd"} %x : tensor<2x2xf32>
      %row = stablehlo.dynamic_slice %ws, %idx, %z, %z, sizes = [1, 2, 2] : (tensor<3x2x2xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x2xf32>
      %wk = stablehlo.reshape %row : (tensor<1x2x2xf32>) -> tensor<2x2xf32>
      %y = stablehlo.dot_general %m, %wk, contracting_dims = [1] x [1] : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
      %one = stablehlo.constant dense<1> : tensor<i32>
      %k1 = stablehlo.add %k, %one : tensor<i32>
      stablehlo.return %k1, %y, %ws : tensor<i32>, tensor<2x2xf32>, tensor<3x2x2xf32>
    }
    return %f#1 : tensor<2x2xf32>
  }
}

