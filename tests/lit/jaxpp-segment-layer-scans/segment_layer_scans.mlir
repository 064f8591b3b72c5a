// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-segment-layer-scans)' | filecheck %s

// value_and_grad of a 3-layer lax.scan inside treduce, no stage markers (hand-written from
// what JAX lowers, shapes shrunk). Each iteration is a segment: the forward loop and its
// gradient (told apart without locations by reading the residual stack %f#3 and the
// weight stack in reverse order) cover segments [0, 3). The code before the loop joins
// segment 0, the loss after it the last segment (2), the code after the gradient's loop
// the backward of segment 0; the microbatch slice, read by the code before the loop and
// by the backward, goes with its earliest user.

// CHECK-LABEL: module @scan_without_markers attributes {jaxpp.num_segments = 3 : i64}
// CHECK:         "jaxpp.loop"
// CHECK-NEXT:    ^bb0(
// CHECK-NEXT:      stablehlo.constant {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64} dense<0>
// CHECK-NEXT:      stablehlo.dynamic_slice {{.*}} {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:      %[[MB:.*]] = stablehlo.reshape {{.*}} {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:      stablehlo.tanh %[[MB]] {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:      stablehlo.constant {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64} dense<0.000000e+00> : tensor<3x2x2xf32>
// CHECK-NEXT:      %[[F:.*]]:4 = stablehlo.while
// CHECK-SAME:        attributes {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64, jaxpp.segments = array<i64: 0, 3>}
// CHECK:           stablehlo.multiply %[[F]]#1, %[[F]]#1 {jaxpp.kind = "fwd", jaxpp.segment = 2 : i64}
// CHECK-NEXT:      %[[LOSS:.*]] = stablehlo.reduce{{.*}} {jaxpp.kind = "fwd", jaxpp.segment = 2 : i64}
// CHECK-NEXT:      stablehlo.add %[[F]]#1, %[[F]]#1 {jaxpp.kind = "fwd", jaxpp.segment = 2 : i64}
// CHECK-NEXT:      %[[B:.*]]:4 = stablehlo.while
// CHECK-SAME:        attributes {jaxpp.kind = "bwd", jaxpp.segment = 0 : i64, jaxpp.segments = array<i64: 0, 3>}
// CHECK:           stablehlo.multiply %[[B]]#1, %[[MB]] {jaxpp.kind = "bwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:      stablehlo.add {{.*}}, %[[LOSS]] {jaxpp.kind = "fwd", jaxpp.segment = 2 : i64}
// CHECK-NEXT:      stablehlo.add {{.*}}, %[[B]]#3 {jaxpp.kind = "bwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:      "jaxpp.yield"
module @scan_without_markers {
  func.func @main(%w: tensor<3x2x2xf32>, %xs: tensor<4x2x2xf32>) -> (tensor<f32>, tensor<3x2x2xf32>) {
    %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %gw0 = stablehlo.broadcast_in_dim %zero, dims = [] : (tensor<f32>) -> tensor<3x2x2xf32>
    %r:2 = "jaxpp.loop"(%zero, %gw0) ({
    ^bb0(%i: tensor<i32>, %loss_acc: tensor<f32>, %gw_acc: tensor<3x2x2xf32>):
      %c0 = stablehlo.constant dense<0> : tensor<i32>
      %mb0 = stablehlo.dynamic_slice %xs, %i, %c0, %c0, sizes = [1, 2, 2] : (tensor<4x2x2xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x2xf32>
      %mb = stablehlo.reshape %mb0 : (tensor<1x2x2xf32>) -> tensor<2x2xf32>
      %x0 = stablehlo.tanh %mb : tensor<2x2xf32>
      %zeros = stablehlo.constant dense<0.000000e+00> : tensor<3x2x2xf32>
      %f:4 = stablehlo.while(%k = %c0, %x = %x0, %ws = %w, %res = %zeros) : tensor<i32>, tensor<2x2xf32>, tensor<3x2x2xf32>, tensor<3x2x2xf32>
       cond {
        %c3 = stablehlo.constant dense<3> : tensor<i32>
        %lt = stablehlo.compare  LT, %k, %c3 : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %lt : tensor<i1>
      } do {
        %z = stablehlo.constant dense<0> : tensor<i32>
        %row = stablehlo.dynamic_slice %ws, %k, %z, %z, sizes = [1, 2, 2] : (tensor<3x2x2xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x2xf32>
        %wk = stablehlo.reshape %row : (tensor<1x2x2xf32>) -> tensor<2x2xf32>
        %y = stablehlo.dot_general %x, %wk, contracting_dims = [1] x [0] : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
        %xr = stablehlo.reshape %x : (tensor<2x2xf32>) -> tensor<1x2x2xf32>
        %res1 = stablehlo.dynamic_update_slice %res, %xr, %k, %z, %z : (tensor<3x2x2xf32>, tensor<1x2x2xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<3x2x2xf32>
        %one = stablehlo.constant dense<1> : tensor<i32>
        %k1 = stablehlo.add %k, %one : tensor<i32>
        stablehlo.return %k1, %y, %ws, %res1 : tensor<i32>, tensor<2x2xf32>, tensor<3x2x2xf32>, tensor<3x2x2xf32>
      }
      %sq = stablehlo.multiply %f#1, %f#1 : tensor<2x2xf32>
      %loss = stablehlo.reduce(%sq init: %zero) applies stablehlo.add across dimensions = [0, 1] : (tensor<2x2xf32>, tensor<f32>) -> tensor<f32>
      %dy = stablehlo.add %f#1, %f#1 : tensor<2x2xf32>
      %b:4 = stablehlo.while(%k = %c0, %dx = %dy, %ws = %w, %g = %zeros) : tensor<i32>, tensor<2x2xf32>, tensor<3x2x2xf32>, tensor<3x2x2xf32>
       cond {
        %c3 = stablehlo.constant dense<3> : tensor<i32>
        %lt = stablehlo.compare  LT, %k, %c3 : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %lt : tensor<i1>
      } do {
        %z = stablehlo.constant dense<0> : tensor<i32>
        %c2 = stablehlo.constant dense<2> : tensor<i32>
        %idx = stablehlo.subtract %c2, %k : tensor<i32>
        %row = stablehlo.dynamic_slice %ws, %idx, %z, %z, sizes = [1, 2, 2] : (tensor<3x2x2xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x2xf32>
        %wk = stablehlo.reshape %row : (tensor<1x2x2xf32>) -> tensor<2x2xf32>
        %xrow = stablehlo.dynamic_slice %f#3, %idx, %z, %z, sizes = [1, 2, 2] : (tensor<3x2x2xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x2xf32>
        %xk = stablehlo.reshape %xrow : (tensor<1x2x2xf32>) -> tensor<2x2xf32>
        %dxn = stablehlo.dot_general %dx, %wk, contracting_dims = [1] x [1] : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
        %gk = stablehlo.dot_general %xk, %dx, contracting_dims = [0] x [0] : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
        %gr = stablehlo.reshape %gk : (tensor<2x2xf32>) -> tensor<1x2x2xf32>
        %g1 = stablehlo.dynamic_update_slice %g, %gr, %idx, %z, %z : (tensor<3x2x2xf32>, tensor<1x2x2xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<3x2x2xf32>
        %one = stablehlo.constant dense<1> : tensor<i32>
        %k1 = stablehlo.add %k, %one : tensor<i32>
        stablehlo.return %k1, %dxn, %ws, %g1 : tensor<i32>, tensor<2x2xf32>, tensor<3x2x2xf32>, tensor<3x2x2xf32>
      }
      %dx0 = stablehlo.multiply %b#1, %mb : tensor<2x2xf32>
      %l1 = stablehlo.add %loss_acc, %loss : tensor<f32>
      %g2 = stablehlo.add %gw_acc, %b#3 : tensor<3x2x2xf32>
      "jaxpp.yield"(%l1, %g2) : (tensor<f32>, tensor<3x2x2xf32>) -> ()
    }) {jaxpp.num_microbatches = 4 : i64} : (tensor<f32>, tensor<3x2x2xf32>) -> (tensor<f32>, tensor<3x2x2xf32>)
    return %r#0, %r#1 : tensor<f32>, tensor<3x2x2xf32>
  }
}

// -----

// Two layer scans in program order (an encoder's, then a decoder's), with a stage marker
// ending each body: the first covers segments [0, 2), the second [2, 5); the code between
// them joins the second's first segment, the code after it the last segment.

// CHECK-LABEL: module @two_marked_scans attributes {jaxpp.num_segments = 5 : i64}
// CHECK:         %[[E:.*]]:3 = stablehlo.while
// CHECK-SAME:      attributes {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64, jaxpp.segments = array<i64: 0, 2>}
// CHECK:         %[[T:.*]] = stablehlo.tanh %[[E]]#1 {jaxpp.kind = "fwd", jaxpp.segment = 2 : i64}
// CHECK-NEXT:    %[[D:.*]]:3 = stablehlo.while({{.*}}%[[T]]
// CHECK-SAME:      attributes {jaxpp.kind = "fwd", jaxpp.segment = 2 : i64, jaxpp.segments = array<i64: 2, 3>}
// CHECK:         stablehlo.optimization_barrier {jaxpp.marker = "fwd"}
// CHECK:         stablehlo.negate %[[D]]#1 {jaxpp.kind = "fwd", jaxpp.segment = 4 : i64}
// CHECK-NEXT:    return
module @two_marked_scans {
  func.func @main(%enc: tensor<2x2x2xf32>, %dec: tensor<3x2x2xf32>, %x0: tensor<2x2xf32>) -> tensor<2x2xf32> {
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %e:3 = stablehlo.while(%k = %c0, %x = %x0, %ws = %enc) : tensor<i32>, tensor<2x2xf32>, tensor<2x2x2xf32>
     cond {
      %c2 = stablehlo.constant dense<2> : tensor<i32>
      %lt = stablehlo.compare  LT, %k, %c2 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %z = stablehlo.constant dense<0> : tensor<i32>
      %row = stablehlo.dynamic_slice %ws, %k, %z, %z, sizes = [1, 2, 2] : (tensor<2x2x2xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x2xf32>
      %wk = stablehlo.reshape %row : (tensor<1x2x2xf32>) -> tensor<2x2xf32>
      %y = stablehlo.dot_general %x, %wk, contracting_dims = [1] x [0] : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
      %m = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %y : tensor<2x2xf32>
      %one = stablehlo.constant dense<1> : tensor<i32>
      %k1 = stablehlo.add %k, %one : tensor<i32>
      stablehlo.return %k1, %m, %ws : tensor<i32>, tensor<2x2xf32>, tensor<2x2x2xf32>
    }
    %t = stablehlo.tanh %e#1 : tensor<2x2xf32>
    %d:3 = stablehlo.while(%k = %c0, %x = %t, %ws = %dec) : tensor<i32>, tensor<2x2xf32>, tensor<3x2x2xf32>
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
    %out = stablehlo.negate %d#1 : tensor<2x2xf32>
    return %out : tensor<2x2xf32>
  }
}
