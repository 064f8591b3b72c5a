// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-pack-parameters)' | filecheck %s

// A weight and a bias that stage 0 reads inside the loop become one
// float32[5,4] buffer (rows of 4, the gcd of their sizes), concatenated before
// the loop. Each (stage, kind) that read a member reads its rows instead,
// sliced (and reshaped) just before its first reader: the weight once in the
// forward and once in the backward. The batch (read by a dynamic_slice) and
// the weight's read after the loop stay as they are.

// CHECK-LABEL: module @weight_and_bias
// CHECK-NEXT:    func.func @main(%[[W:[a-z0-9]+]]: tensor<4x4xf32>, %[[B:[a-z0-9]+]]: tensor<4xf32>, %[[XS:[a-z0-9]+]]: tensor<2x4xf32>, %[[L0:[a-z0-9]+]]: tensor<f32>)
// CHECK-NEXT:      %[[RB:.*]] = stablehlo.reshape %[[B]] : (tensor<4xf32>) -> tensor<1x4xf32>
// CHECK-NEXT:      %[[P:.*]] = stablehlo.concatenate %[[W]], %[[RB]], dim = 0 : (tensor<4x4xf32>, tensor<1x4xf32>) -> tensor<5x4xf32>
// CHECK-NEXT:      %[[LOOP:.*]] = "jaxpp.loop"(%[[L0]]) ({
// CHECK-NEXT:      ^bb0(%[[I:.*]]: tensor<i32>, %[[LOSS:.*]]: tensor<f32>):
// CHECK-NEXT:        %[[C:.*]] = stablehlo.constant
// CHECK-NEXT:        %[[X1:.*]] = stablehlo.dynamic_slice %[[XS]], %[[I]], %[[C]]
// CHECK-NEXT:        %[[X:.*]] = stablehlo.reshape %[[X1]]
// CHECK-NEXT:        %[[FW:.*]] = stablehlo.slice %[[P]] [0:4, 0:4] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<5x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT:        %[[H:.*]] = stablehlo.dot_general %[[X]], %[[FW]]
// CHECK-NEXT:        %[[FB1:.*]] = stablehlo.slice %[[P]] [4:5, 0:4] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<5x4xf32>) -> tensor<1x4xf32>
// CHECK-NEXT:        %[[FB:.*]] = stablehlo.reshape %[[FB1]] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<1x4xf32>) -> tensor<4xf32>
// CHECK-NEXT:        %[[HB:.*]] = stablehlo.add %[[H]], %[[FB]]
// CHECK-NEXT:        %[[BW:.*]] = stablehlo.slice %[[P]] [0:4, 0:4] {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<5x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT:        stablehlo.dot_general %[[BW]], %[[HB]]
// CHECK-NOT:         stablehlo.slice
// CHECK:             "jaxpp.yield"
// CHECK:           return %[[LOOP]], %[[W]]
module @weight_and_bias attributes {jaxpp.num_stages = 2 : i64} {
  func.func @main(%w: tensor<4x4xf32>, %b: tensor<4xf32>, %xs: tensor<2x4xf32>, %loss0: tensor<f32>) -> (tensor<f32>, tensor<4x4xf32>) {
    %0 = "jaxpp.loop"(%loss0) ({
    ^bb0(%i: tensor<i32>, %loss: tensor<f32>):
      %c0 = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} dense<0> : tensor<i32>
      %x1 = stablehlo.dynamic_slice %xs, %i, %c0, sizes = [1, 4] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<2x4xf32>, tensor<i32>, tensor<i32>) -> tensor<1x4xf32>
      %x = stablehlo.reshape %x1 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<1x4xf32>) -> tensor<4xf32>
      %h = stablehlo.dot_general %x, %w, contracting_dims = [0] x [0] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<4xf32>, tensor<4x4xf32>) -> tensor<4xf32>
      %hb = stablehlo.add %h, %b {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<4xf32>
      %g = stablehlo.dot_general %w, %hb, contracting_dims = [1] x [0] {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<4x4xf32>, tensor<4xf32>) -> tensor<4xf32>
      %zero = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} dense<0.0> : tensor<f32>
      %s = stablehlo.reduce(%g init: %zero) applies stablehlo.add across dimensions = [0] {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
      %nl = stablehlo.add %loss, %s {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<f32>
      "jaxpp.yield"(%nl) : (tensor<f32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<f32>) -> tensor<f32>
    return %0, %w : tensor<f32>, tensor<4x4xf32>
  }
}

// -----

// Left alone: a value read by two stages, one read outside the loop only, an
// integer, an empty tensor, a constant and a value computed from constants
// alone (outlining copies them into the tasks), and a stage with a single
// parameter (a group of one).

// CHECK-LABEL: module @nothing_to_pack
// CHECK-NEXT:    func.func @main
// CHECK-NEXT:      stablehlo.constant
// CHECK-NEXT:      stablehlo.broadcast_in_dim
// CHECK-NEXT:      "jaxpp.loop"
// CHECK-NOT:       stablehlo.slice
// CHECK:           return
module @nothing_to_pack attributes {jaxpp.num_stages = 2 : i64} {
  func.func @main(%shared: tensor<4xf32>, %after: tensor<4xf32>, %n: tensor<4xi32>, %empty: tensor<0xf32>, %alone: tensor<4xf32>, %l0: tensor<f32>) -> (tensor<f32>, tensor<4xf32>) {
    %one = stablehlo.constant dense<1.0> : tensor<f32>
    %ones = stablehlo.broadcast_in_dim %one, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %0 = "jaxpp.loop"(%l0) ({
    ^bb0(%i: tensor<i32>, %loss: tensor<f32>):
      %a = stablehlo.sine %shared {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<4xf32>
      %b = stablehlo.cosine %shared {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<4xf32>
      %c = stablehlo.convert %n {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<4xi32>) -> tensor<4xf32>
      %d = stablehlo.concatenate %empty, %alone, dim = 0 {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<0xf32>, tensor<4xf32>) -> tensor<4xf32>
      %e = stablehlo.add %a, %c {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<4xf32>
      %f = stablehlo.add %b, %d {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<4xf32>
      %g0 = stablehlo.add %e, %f {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<4xf32>
      %g = stablehlo.multiply %g0, %ones {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<4xf32>
      %zero = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} dense<0.0> : tensor<f32>
      %s0 = stablehlo.reduce(%g init: %zero) applies stablehlo.add across dimensions = [0] {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
      %s = stablehlo.multiply %s0, %one {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<f32>
      %nl = stablehlo.add %loss, %s {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<f32>
      "jaxpp.yield"(%nl) : (tensor<f32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<f32>) -> tensor<f32>
    %r = stablehlo.sine %after : tensor<4xf32>
    return %0, %r : tensor<f32>, tensor<4xf32>
  }
}

// -----

// Members of different element types go to different buffers, and the rows
// are as wide as the gcd of the members' sizes (24 and 4: rows of 4, the 4x6
// weight reshaped to 6x4 and read back as 4x6); a parameter computed before
// the loop (a cast) is packed like an argument, after its definition.

// CHECK-LABEL: module @rows_and_types
// CHECK-NEXT:    func.func @main(%[[W:[a-z0-9]+]]: tensor<4x6xf32>, %[[B:[a-z0-9]+]]: tensor<4xf32>, %[[H1:[a-z0-9]+]]: tensor<2xbf16>, %[[H2:[a-z0-9]+]]: tensor<2xbf16>, %[[L0:[a-z0-9]+]]: tensor<f32>)
// CHECK-NEXT:      %[[CAST:.*]] = stablehlo.convert %[[B]] : (tensor<4xf32>) -> tensor<4xbf16>
// CHECK-NEXT:      %[[RW:.*]] = stablehlo.reshape %[[W]] : (tensor<4x6xf32>) -> tensor<6x4xf32>
// CHECK-NEXT:      %[[RB:.*]] = stablehlo.reshape %[[B]] : (tensor<4xf32>) -> tensor<1x4xf32>
// CHECK-NEXT:      %[[PF:.*]] = stablehlo.concatenate %[[RW]], %[[RB]], dim = 0 : (tensor<6x4xf32>, tensor<1x4xf32>) -> tensor<7x4xf32>
// CHECK-NEXT:      %[[R1:.*]] = stablehlo.reshape %[[H1]] : (tensor<2xbf16>) -> tensor<1x2xbf16>
// CHECK-NEXT:      %[[R2:.*]] = stablehlo.reshape %[[H2]] : (tensor<2xbf16>) -> tensor<1x2xbf16>
// CHECK-NEXT:      %[[RC:.*]] = stablehlo.reshape %[[CAST]] : (tensor<4xbf16>) -> tensor<2x2xbf16>
// CHECK-NEXT:      %[[PH:.*]] = stablehlo.concatenate %[[R1]], %[[R2]], %[[RC]], dim = 0 : (tensor<1x2xbf16>, tensor<1x2xbf16>, tensor<2x2xbf16>) -> tensor<4x2xbf16>
// CHECK-NEXT:      "jaxpp.loop"
// CHECK:             %[[SW:.*]] = stablehlo.slice %[[PF]] [0:6, 0:4] {{.*}} : (tensor<7x4xf32>) -> tensor<6x4xf32>
// CHECK-NEXT:        stablehlo.reshape %[[SW]] {{.*}} : (tensor<6x4xf32>) -> tensor<4x6xf32>
// CHECK:             stablehlo.slice %[[PH]] [2:4, 0:2] {{.*}} : (tensor<4x2xbf16>) -> tensor<2x2xbf16>
module @rows_and_types attributes {jaxpp.num_stages = 1 : i64} {
  func.func @main(%w: tensor<4x6xf32>, %b: tensor<4xf32>, %h1: tensor<2xbf16>, %h2: tensor<2xbf16>, %l0: tensor<f32>) -> tensor<f32> {
    %cast = stablehlo.convert %b : (tensor<4xf32>) -> tensor<4xbf16>
    %0 = "jaxpp.loop"(%l0) ({
    ^bb0(%i: tensor<i32>, %loss: tensor<f32>):
      %zero = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} dense<0.0> : tensor<f32>
      %sw = stablehlo.reduce(%w init: %zero) applies stablehlo.add across dimensions = [1] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<4x6xf32>, tensor<f32>) -> tensor<4xf32>
      %x = stablehlo.add %sw, %b {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<4xf32>
      %hh = stablehlo.add %h1, %h2 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<2xbf16>
      %hc = stablehlo.convert %hh {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<2xbf16>) -> tensor<2xf32>
      %cc = stablehlo.convert %cast {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<4xbf16>) -> tensor<4xf32>
      %y = stablehlo.add %x, %cc {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<4xf32>
      %s1 = stablehlo.reduce(%y init: %zero) applies stablehlo.add across dimensions = [0] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
      %s2 = stablehlo.reduce(%hc init: %zero) applies stablehlo.add across dimensions = [0] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<2xf32>, tensor<f32>) -> tensor<f32>
      %s = stablehlo.add %s1, %s2 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<f32>
      %nl = stablehlo.add %loss, %s {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<f32>
      "jaxpp.yield"(%nl) : (tensor<f32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}
