// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-split-layer-scans)' | filecheck %s

// The 3-layer scan of tests/lit/jaxpp-segment-layer-scans after jaxpp-choose-stages with
// stage_split 2,1: layers 0-1 in stage 0, layer 2 in stage 1. Each loop becomes one loop
// per stage: the forward's in ascending order, the gradient's in descending order, each
// counting its own iterations (2, then 1). Stage s reads rows [a, b) of the weight stack
// %arg0 through a slice placed before its loop, and indexes it locally (the gradient's
// loop with n - 1 - j). The residual stack becomes one piece per stage, started from a
// splat constant of the piece's shape; the gradient's loop of the same stage reads that
// piece directly. The stacked gradient's pieces are put back together (in row order)
// for the accumulator, in the stage and kind of the add that reads them. The activation
// flows from stage to stage.

// CHECK-LABEL: module @scan_split_in_two
// CHECK:         %[[X0:.*]] = stablehlo.tanh
// CHECK:         %[[C0:.*]] = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} dense<0> : tensor<i32>
// CHECK-NEXT:    %[[W0:.*]] = stablehlo.slice %arg0 [0:2, 0:2, 0:2] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<3x2x2xf32>) -> tensor<2x2x2xf32>
// CHECK-NEXT:    %[[R0:.*]] = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} dense<0.000000e+00> : tensor<2x2x2xf32>
// CHECK-NEXT:    %[[F0:.*]]:4 = stablehlo.while(%[[K:.*]] = %[[C0]], %[[X:.*]] = %[[X0]], %[[WS:.*]] = %[[W0]], %[[RES:.*]] = %[[R0]]) : tensor<i32>, tensor<2x2xf32>, tensor<2x2x2xf32>, tensor<2x2x2xf32> attributes {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64}
// CHECK-NEXT:    cond {
// CHECK-NEXT:      %[[N:.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK-NEXT:      stablehlo.compare LT, %[[K]], %[[N]]
// CHECK-NEXT:      stablehlo.return
// CHECK-NEXT:    } do {
// CHECK-NEXT:      %[[Z:.*]] = stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT:      stablehlo.dynamic_slice %[[WS]], %[[K]], %[[Z]], %[[Z]], sizes = [1, 2, 2] : (tensor<2x2x2xf32>
// CHECK:           stablehlo.dynamic_update_slice %[[RES]], {{.*}}, %[[K]], %[[Z]], %[[Z]] : (tensor<2x2x2xf32>
// CHECK:         %[[C1:.*]] = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} dense<0> : tensor<i32>
// CHECK-NEXT:    %[[W1:.*]] = stablehlo.slice %arg0 [2:3, 0:2, 0:2] {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<3x2x2xf32>) -> tensor<1x2x2xf32>
// CHECK-NEXT:    %[[R1:.*]] = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} dense<0.000000e+00> : tensor<1x2x2xf32>
// CHECK-NEXT:    %[[F1:.*]]:4 = stablehlo.while({{.*}} = %[[C1]], {{.*}} = %[[F0]]#1, {{.*}} = %[[W1]], {{.*}} = %[[R1]]) : {{.*}} attributes {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64}
// CHECK-NEXT:    cond {
// CHECK-NEXT:      stablehlo.constant dense<1> : tensor<i32>
// CHECK:         stablehlo.multiply %[[F1]]#1, %[[F1]]#1 {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64}
// CHECK:         %[[DY:.*]] = stablehlo.add %[[F1]]#1, %[[F1]]#1
// CHECK-NEXT:    %[[BC1:.*]] = stablehlo.constant {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} dense<0> : tensor<i32>
// CHECK-NEXT:    %[[BW1:.*]] = stablehlo.slice %arg0 [2:3, 0:2, 0:2] {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64}
// CHECK-NEXT:    %[[G1:.*]] = stablehlo.constant {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} dense<0.000000e+00> : tensor<1x2x2xf32>
// CHECK-NEXT:    %[[B1:.*]]:4 = stablehlo.while(%[[BK:.*]] = %[[BC1]], {{.*}} = %[[DY]], %[[BWS:.*]] = %[[BW1]], {{.*}} = %[[G1]]) : {{.*}} attributes {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64}
// CHECK:         } do {
// CHECK-NEXT:      %[[K0:.*]] = stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT:      %[[LOCAL:.*]] = stablehlo.subtract %[[K0]], %[[BK]] : tensor<i32>
// CHECK-NEXT:      %[[BZ:.*]] = stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT:      stablehlo.dynamic_slice %[[BWS]], %[[LOCAL]], %[[BZ]], %[[BZ]]
// CHECK-NEXT:      stablehlo.reshape
// CHECK-NEXT:      stablehlo.dynamic_slice %[[F1]]#3, %[[LOCAL]], %[[BZ]], %[[BZ]], sizes = [1, 2, 2] : (tensor<1x2x2xf32>
// CHECK:         %[[BW0:.*]] = stablehlo.slice %arg0 [0:2, 0:2, 0:2] {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64}
// CHECK-NEXT:    %[[G0:.*]] = stablehlo.constant {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} dense<0.000000e+00> : tensor<2x2x2xf32>
// CHECK-NEXT:    %[[B0:.*]]:4 = stablehlo.while({{.*}} = %[[B1]]#1, {{.*}} = %[[BW0]], {{.*}} = %[[G0]]) : {{.*}} attributes {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64}
// CHECK:         } do {
// CHECK-NEXT:      %[[K1:.*]] = stablehlo.constant dense<1> : tensor<i32>
// CHECK-NEXT:      stablehlo.subtract %[[K1]], %{{.*}} : tensor<i32>
// CHECK:           stablehlo.dynamic_slice %[[F0]]#3
// CHECK:         stablehlo.multiply %[[B0]]#1, {{.*}} {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64}
// CHECK-NEXT:    stablehlo.add
// CHECK-NEXT:    %[[WHOLE:.*]] = stablehlo.concatenate %[[B0]]#3, %[[B1]]#3, dim = 0 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<2x2x2xf32>, tensor<1x2x2xf32>) -> tensor<3x2x2xf32>
// CHECK-NEXT:    stablehlo.add %arg4, %[[WHOLE]] {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64}
// CHECK-NEXT:    "jaxpp.yield"
// CHECK-NOT:     jaxpp.segments

module @scan_split_in_two attributes {jaxpp.num_segments = 3 : i64, jaxpp.num_stages = 2 : i64, jaxpp.stage_split = array<i64: 2, 1>} {
  func.func @main(%arg0: tensor<3x2x2xf32>, %arg1: tensor<4x2x2xf32>) -> (tensor<f32>, tensor<3x2x2xf32>) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<3x2x2xf32>
    %1:2 = "jaxpp.loop"(%cst, %0) ({
    ^bb0(%arg2: tensor<i32>, %arg3: tensor<f32>, %arg4: tensor<3x2x2xf32>):
      %c = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} dense<0> : tensor<i32>
      %2 = stablehlo.dynamic_slice %arg1, %arg2, %c, %c, sizes = [1, 2, 2] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<4x2x2xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x2xf32>
      %3 = stablehlo.reshape %2 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<1x2x2xf32>) -> tensor<2x2xf32>
      %4 = stablehlo.tanh %3 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<2x2xf32>
      %cst_0 = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} dense<0.000000e+00> : tensor<3x2x2xf32>
      %5:4 = stablehlo.while(%iterArg = %c, %iterArg_1 = %4, %iterArg_2 = %arg0, %iterArg_3 = %cst_0) : tensor<i32>, tensor<2x2xf32>, tensor<3x2x2xf32>, tensor<3x2x2xf32> attributes {jaxpp.kind = "fwd", jaxpp.segments = array<i64: 0, 3>, jaxpp.stage = 0 : i64, jaxpp.stage_rows = array<i64: 0, 0, 2, 1, 2, 1>}
      cond {
        %c_4 = stablehlo.constant dense<3> : tensor<i32>
        %13 = stablehlo.compare LT, %iterArg, %c_4 : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %13 : tensor<i1>
      } do {
        %c_4 = stablehlo.constant dense<0> : tensor<i32>
        %13 = stablehlo.dynamic_slice %iterArg_2, %iterArg, %c_4, %c_4, sizes = [1, 2, 2] : (tensor<3x2x2xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x2xf32>
        %14 = stablehlo.reshape %13 : (tensor<1x2x2xf32>) -> tensor<2x2xf32>
        %15 = stablehlo.dot_general %iterArg_1, %14, contracting_dims = [1] x [0] : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
        %16 = stablehlo.reshape %iterArg_1 : (tensor<2x2xf32>) -> tensor<1x2x2xf32>
        %17 = stablehlo.dynamic_update_slice %iterArg_3, %16, %iterArg, %c_4, %c_4 : (tensor<3x2x2xf32>, tensor<1x2x2xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<3x2x2xf32>
        %c_5 = stablehlo.constant dense<1> : tensor<i32>
        %18 = stablehlo.add %iterArg, %c_5 : tensor<i32>
        stablehlo.return %18, %15, %iterArg_2, %17 : tensor<i32>, tensor<2x2xf32>, tensor<3x2x2xf32>, tensor<3x2x2xf32>
      }
      %6 = stablehlo.multiply %5#1, %5#1 {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<2x2xf32>
      %7 = stablehlo.reduce(%6 init: %cst) applies stablehlo.add across dimensions = [0, 1] {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<2x2xf32>, tensor<f32>) -> tensor<f32>
      %8 = stablehlo.add %5#1, %5#1 {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<2x2xf32>
      %9:4 = stablehlo.while(%iterArg = %c, %iterArg_1 = %8, %iterArg_2 = %arg0, %iterArg_3 = %cst_0) : tensor<i32>, tensor<2x2xf32>, tensor<3x2x2xf32>, tensor<3x2x2xf32> attributes {jaxpp.kind = "bwd", jaxpp.segments = array<i64: 0, 3>, jaxpp.stage = 1 : i64, jaxpp.stage_rows = array<i64: 0, 0, 2, 1, 2, 1>}
      cond {
        %c_4 = stablehlo.constant dense<3> : tensor<i32>
        %13 = stablehlo.compare LT, %iterArg, %c_4 : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %13 : tensor<i1>
      } do {
        %c_4 = stablehlo.constant dense<0> : tensor<i32>
        %c_5 = stablehlo.constant dense<2> : tensor<i32>
        %13 = stablehlo.subtract %c_5, %iterArg : tensor<i32>
        %14 = stablehlo.dynamic_slice %iterArg_2, %13, %c_4, %c_4, sizes = [1, 2, 2] : (tensor<3x2x2xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x2xf32>
        %15 = stablehlo.reshape %14 : (tensor<1x2x2xf32>) -> tensor<2x2xf32>
        %16 = stablehlo.dynamic_slice %5#3, %13, %c_4, %c_4, sizes = [1, 2, 2] : (tensor<3x2x2xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x2xf32>
        %17 = stablehlo.reshape %16 : (tensor<1x2x2xf32>) -> tensor<2x2xf32>
        %18 = stablehlo.dot_general %iterArg_1, %15, contracting_dims = [1] x [1] : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
        %19 = stablehlo.dot_general %17, %iterArg_1, contracting_dims = [0] x [0] : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
        %20 = stablehlo.reshape %19 : (tensor<2x2xf32>) -> tensor<1x2x2xf32>
        %21 = stablehlo.dynamic_update_slice %iterArg_3, %20, %13, %c_4, %c_4 : (tensor<3x2x2xf32>, tensor<1x2x2xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<3x2x2xf32>
        %c_6 = stablehlo.constant dense<1> : tensor<i32>
        %22 = stablehlo.add %iterArg, %c_6 : tensor<i32>
        stablehlo.return %22, %18, %iterArg_2, %21 : tensor<i32>, tensor<2x2xf32>, tensor<3x2x2xf32>, tensor<3x2x2xf32>
      }
      %10 = stablehlo.multiply %9#1, %3 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<2x2xf32>
      %11 = stablehlo.add %arg3, %7 {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<f32>
      %12 = stablehlo.add %arg4, %9#3 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<3x2x2xf32>
      "jaxpp.yield"(%11, %12) : (tensor<f32>, tensor<3x2x2xf32>) -> ()
    }) {jaxpp.num_microbatches = 4 : i64} : (tensor<f32>, tensor<3x2x2xf32>) -> (tensor<f32>, tensor<3x2x2xf32>)
    return %1#0, %1#1 : tensor<f32>, tensor<3x2x2xf32>
  }
}

// -----

// A body that reads its counter besides indexing a stack (a per-layer scale): stage 1's
// loop counts 0, 1 and gives the body counter + 2, the original layer number; a layer scan
// within one stage keeps its loop, without the layer-scan tags and markers.

// CHECK-LABEL: module @counter_read_by_the_body
// CHECK:         stablehlo.slice %arg0 [0:2]
// CHECK:         stablehlo.while
// CHECK:         %[[S1:.*]] = stablehlo.slice %arg0 [2:4] {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64}
// CHECK-NEXT:    stablehlo.while(%[[K:.*]] = %{{.*}}, %{{.*}} = %{{.*}}, %[[WS:.*]] = %[[S1]])
// CHECK:         } do {
// CHECK-NEXT:      %[[TWO:.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK-NEXT:      %[[LAYER:.*]] = stablehlo.add %[[K]], %[[TWO]] : tensor<i32>
// CHECK-NEXT:      stablehlo.dynamic_slice %[[WS]], %[[K]], sizes = [1] : (tensor<2xf32>, tensor<i32>) -> tensor<1xf32>
// CHECK-NEXT:      stablehlo.reshape
// CHECK-NEXT:      stablehlo.convert %[[LAYER]] : (tensor<i32>) -> tensor<f32>
// CHECK:           stablehlo.add %[[K]], %{{.*}} : tensor<i32>
// CHECK:         stablehlo.while
// CHECK-SAME:      attributes {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64}
// CHECK-NOT:     jaxpp.marker
// CHECK:         return
module @counter_read_by_the_body attributes {jaxpp.num_segments = 6 : i64, jaxpp.num_stages = 2 : i64, jaxpp.stage_split = array<i64: 2, 4>} {
  func.func @main(%w: tensor<4xf32>, %v: tensor<2xf32>, %x0: tensor<f32>) -> tensor<f32> {
    %c0 = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} dense<0> : tensor<i32>
    %f:3 = stablehlo.while(%k = %c0, %x = %x0, %ws = %w) : tensor<i32>, tensor<f32>, tensor<4xf32> attributes {jaxpp.kind = "fwd", jaxpp.segments = array<i64: 0, 4>, jaxpp.stage = 0 : i64, jaxpp.stage_rows = array<i64: 0, 0, 2, 1, 2, 2>}
     cond {
      %c4 = stablehlo.constant dense<4> : tensor<i32>
      %lt = stablehlo.compare  LT, %k, %c4 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %row = stablehlo.dynamic_slice %ws, %k, sizes = [1] : (tensor<4xf32>, tensor<i32>) -> tensor<1xf32>
      %wk = stablehlo.reshape %row : (tensor<1xf32>) -> tensor<f32>
      %layer = stablehlo.convert %k : (tensor<i32>) -> tensor<f32>
      %s = stablehlo.multiply %wk, %layer : tensor<f32>
      %y = stablehlo.multiply %x, %s : tensor<f32>
      %m = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %y : tensor<f32>
      %one = stablehlo.constant dense<1> : tensor<i32>
      %k1 = stablehlo.add %k, %one : tensor<i32>
      stablehlo.return %k1, %m, %ws : tensor<i32>, tensor<f32>, tensor<4xf32>
    }
    %g:3 = stablehlo.while(%k = %c0, %x = %f#1, %ws = %v) : tensor<i32>, tensor<f32>, tensor<2xf32> attributes {jaxpp.kind = "fwd", jaxpp.segments = array<i64: 4, 2>, jaxpp.stage = 1 : i64, jaxpp.stage_rows = array<i64: 1, 0, 2>}
     cond {
      %c2 = stablehlo.constant dense<2> : tensor<i32>
      %lt = stablehlo.compare  LT, %k, %c2 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %row = stablehlo.dynamic_slice %ws, %k, sizes = [1] : (tensor<2xf32>, tensor<i32>) -> tensor<1xf32>
      %wk = stablehlo.reshape %row : (tensor<1xf32>) -> tensor<f32>
      %y = stablehlo.multiply %x, %wk : tensor<f32>
      %m = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %y : tensor<f32>
      %one = stablehlo.constant dense<1> : tensor<i32>
      %k1 = stablehlo.add %k, %one : tensor<i32>
      stablehlo.return %k1, %m, %ws : tensor<i32>, tensor<f32>, tensor<2xf32>
    }
    return %g#1 : tensor<f32>
  }
}
