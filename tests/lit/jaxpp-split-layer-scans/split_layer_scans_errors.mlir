// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-split-layer-scans)'

// The segments are not grouped into stages yet.
module @before_choose_stages attributes {jaxpp.num_segments = 2 : i64} {
  func.func @main(%w: tensor<2xf32>, %x0: tensor<f32>) -> tensor<f32> {
    // expected-error @+1 {{jaxpp-split-layer-scans: 'stablehlo.constant' has no stage assignment: run jaxpp-choose-stages first}}
    %c0 = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64} dense<0> : tensor<i32>
    %f:3 = stablehlo.while(%k = %c0, %x = %x0, %ws = %w) : tensor<i32>, tensor<f32>, tensor<2xf32> attributes {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64, jaxpp.segments = array<i64: 0, 2>}
     cond {
      %c2 = stablehlo.constant dense<2> : tensor<i32>
      %lt = stablehlo.compare  LT, %k, %c2 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %row = stablehlo.dynamic_slice %ws, %k, sizes = [1] : (tensor<2xf32>, tensor<i32>) -> tensor<1xf32>
      %wk = stablehlo.reshape %row : (tensor<1xf32>) -> tensor<f32>
      %y = stablehlo.multiply %x, %wk : tensor<f32>
      %one = stablehlo.constant dense<1> : tensor<i32>
      %k1 = stablehlo.add %k, %one : tensor<i32>
      stablehlo.return %k1, %y, %ws : tensor<i32>, tensor<f32>, tensor<2xf32>
    }
    return %f#1 : tensor<f32>
  }
}

// -----

module @no_stage_rows attributes {jaxpp.num_segments = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%w: tensor<2xf32>, %x0: tensor<f32>) -> tensor<f32> {
    %c0 = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} dense<0> : tensor<i32>
    // expected-error @+1 {{this layer scan has no jaxpp.stage_rows: run jaxpp-choose-stages first}}
    %f:3 = stablehlo.while(%k = %c0, %x = %x0, %ws = %w) : tensor<i32>, tensor<f32>, tensor<2xf32> attributes {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64, jaxpp.segments = array<i64: 0, 2>}
     cond {
      %c2 = stablehlo.constant dense<2> : tensor<i32>
      %lt = stablehlo.compare  LT, %k, %c2 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %row = stablehlo.dynamic_slice %ws, %k, sizes = [1] : (tensor<2xf32>, tensor<i32>) -> tensor<1xf32>
      %wk = stablehlo.reshape %row : (tensor<1xf32>) -> tensor<f32>
      %y = stablehlo.multiply %x, %wk : tensor<f32>
      %one = stablehlo.constant dense<1> : tensor<i32>
      %k1 = stablehlo.add %k, %one : tensor<i32>
      stablehlo.return %k1, %y, %ws : tensor<i32>, tensor<f32>, tensor<2xf32>
    }
    return %f#1 : tensor<f32>
  }
}

// -----

module @segments_and_iterations_disagree attributes {jaxpp.num_segments = 3 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%w: tensor<2xf32>, %x0: tensor<f32>) -> tensor<f32> {
    %c0 = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} dense<0> : tensor<i32>
    // expected-error @+1 {{this layer scan covers 3 segments and its stage rows [(0, 0, 2), (1, 2, 1)], but it runs 2 iterations}}
    %f:3 = stablehlo.while(%k = %c0, %x = %x0, %ws = %w) : tensor<i32>, tensor<f32>, tensor<2xf32> attributes {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64, jaxpp.segments = array<i64: 0, 3>, jaxpp.stage_rows = array<i64: 0, 0, 2, 1, 2, 1>}
     cond {
      %c2 = stablehlo.constant dense<2> : tensor<i32>
      %lt = stablehlo.compare  LT, %k, %c2 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %row = stablehlo.dynamic_slice %ws, %k, sizes = [1] : (tensor<2xf32>, tensor<i32>) -> tensor<1xf32>
      %wk = stablehlo.reshape %row : (tensor<1xf32>) -> tensor<f32>
      %y = stablehlo.multiply %x, %wk : tensor<f32>
      %one = stablehlo.constant dense<1> : tensor<i32>
      %k1 = stablehlo.add %k, %one : tensor<i32>
      stablehlo.return %k1, %y, %ws : tensor<i32>, tensor<f32>, tensor<2xf32>
    }
    return %f#1 : tensor<f32>
  }
}

// -----

module @tagged_loop_without_a_counter attributes {jaxpp.num_segments = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%w: tensor<2xf32>, %x0: tensor<f32>) -> tensor<f32> {
    // expected-error @+1 {{this loop is tagged as a layer scan but is not a loop of layers: its condition is not 'counter < constant'}}
    %f:2 = stablehlo.while(%x = %x0, %ws = %w) : tensor<f32>, tensor<2xf32> attributes {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64, jaxpp.segments = array<i64: 0, 2>, jaxpp.stage_rows = array<i64: 0, 0, 1, 1, 1, 1>}
     cond {
      %c2 = stablehlo.constant dense<2.0> : tensor<f32>
      %lt = stablehlo.compare  GT, %x, %c2 : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %y = stablehlo.multiply %x, %x : tensor<f32>
      stablehlo.return %y, %ws : tensor<f32>, tensor<2xf32>
    }
    return %f#0 : tensor<f32>
  }
}
