// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-pack-accumulators)' | filecheck %s

// Two f32 accumulators of stage 0's backward (a weight and a bias gradient)
// become one float32[5,4] state (rows of 4, the gcd of their sizes): started
// from their start values as rows, concatenated; updated by one add of the
// increments as rows, concatenated, in stage 0's backward; sliced by rows and
// reshaped after the loop. The loss (stage 1's forward, alone in its group)
// stays as it is.

// CHECK-LABEL: module @weight_and_bias
// CHECK-NEXT:    func.func @main(%[[W0:.*]]: tensor<4x4xf32>, %[[B0:.*]]: tensor<4xf32>, %[[L0:.*]]: tensor<f32>, %[[X:.*]]: tensor<4x4xf32>)
// CHECK-NEXT:      %[[RB:.*]] = stablehlo.reshape %[[B0]] : (tensor<4xf32>) -> tensor<1x4xf32>
// CHECK-NEXT:      %[[INIT:.*]] = stablehlo.concatenate %[[W0]], %[[RB]], dim = 0 : (tensor<4x4xf32>, tensor<1x4xf32>) -> tensor<5x4xf32>
// CHECK-NEXT:      %[[LOOP:.*]]:2 = "jaxpp.loop"(%[[L0]], %[[INIT]]) ({
// CHECK-NEXT:      ^bb0(%[[I:.*]]: tensor<i32>, %[[LOSS:.*]]: tensor<f32>, %[[PACKED:.*]]: tensor<5x4xf32>):
// CHECK-NEXT:        %[[GW:.*]] = stablehlo.sine %[[X]] {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64}
// CHECK:             %[[R:.*]] = stablehlo.reduce
// CHECK:             %[[V:.*]] = stablehlo.cosine {{.*}}jaxpp.stage = 1
// CHECK-NEXT:        %[[L:.*]] = stablehlo.add %[[LOSS]], %[[V]] {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64}
// CHECK-NEXT:        %[[RR:.*]] = stablehlo.reshape %[[R]] {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<4xf32>) -> tensor<1x4xf32>
// CHECK-NEXT:        %[[INC:.*]] = stablehlo.concatenate %[[GW]], %[[RR]], dim = 0 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<4x4xf32>, tensor<1x4xf32>) -> tensor<5x4xf32>
// CHECK-NEXT:        %[[U:.*]] = stablehlo.add %[[PACKED]], %[[INC]] {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<5x4xf32>
// CHECK-NEXT:        "jaxpp.yield"(%[[L]], %[[U]])
// CHECK-NEXT:      }) {jaxpp.num_microbatches = 4 : i64}
// CHECK-NEXT:      %[[OW:.*]] = stablehlo.slice %[[LOOP]]#1 [0:4, 0:4] : (tensor<5x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT:      %[[OB:.*]] = stablehlo.slice %[[LOOP]]#1 [4:5, 0:4] : (tensor<5x4xf32>) -> tensor<1x4xf32>
// CHECK-NEXT:      %[[RO:.*]] = stablehlo.reshape %[[OB]] : (tensor<1x4xf32>) -> tensor<4xf32>
// CHECK-NEXT:      return %[[OW]], %[[RO]], %[[LOOP]]#0
module @weight_and_bias attributes {jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<4x4xf32>, %arg1: tensor<4xf32>, %arg2: tensor<f32>, %arg3: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4xf32>, tensor<f32>) {
    %0:3 = "jaxpp.loop"(%arg0, %arg1, %arg2) ({
    ^bb0(%i: tensor<i32>, %w: tensor<4x4xf32>, %b: tensor<4xf32>, %loss: tensor<f32>):
      %gw = stablehlo.sine %arg3 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4x4xf32>
      %zero = stablehlo.constant {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} dense<0.0> : tensor<f32>
      %gb = stablehlo.reduce(%gw init: %zero) applies stablehlo.add across dimensions = [0] {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<4x4xf32>, tensor<f32>) -> tensor<4xf32>
      %nw = stablehlo.add %w, %gw {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4x4xf32>
      %nb = stablehlo.add %gb, %b {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4xf32>
      %v = stablehlo.cosine %zero {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<f32>
      %nl = stablehlo.add %loss, %v {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<f32>
      "jaxpp.yield"(%nw, %nb, %nl) : (tensor<4x4xf32>, tensor<4xf32>, tensor<f32>) -> ()
    }) {jaxpp.num_microbatches = 4 : i64} : (tensor<4x4xf32>, tensor<4xf32>, tensor<f32>) -> (tensor<4x4xf32>, tensor<4xf32>, tensor<f32>)
    return %0#0, %0#1, %0#2 : tensor<4x4xf32>, tensor<4xf32>, tensor<f32>
  }
}

// -----

// Left alone: the two accumulators belong to different stages, a third one's
// state is also read by a multiply (not a plain accumulator), and the i32
// counter is not floating point.

// CHECK-LABEL: module @nothing_to_pack
// CHECK-NEXT:    func.func @main
// CHECK-NEXT:      "jaxpp.loop"(%arg0, %arg0, %arg0, %arg1, %arg1) ({
// CHECK-NOT:       stablehlo.concatenate
// CHECK:           "jaxpp.yield"
// CHECK-NOT:       stablehlo.slice
// CHECK:           return
module @nothing_to_pack attributes {jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<i32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i32>, tensor<i32>) {
    %0:5 = "jaxpp.loop"(%arg0, %arg0, %arg0, %arg1, %arg1) ({
    ^bb0(%i: tensor<i32>, %a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<4xf32>, %n: tensor<i32>, %m: tensor<i32>):
      %s = stablehlo.sine %c {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4xf32>
      %na = stablehlo.add %a, %s {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4xf32>
      %nb = stablehlo.add %b, %s {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : tensor<4xf32>
      %nc = stablehlo.add %c, %s {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4xf32>
      %nn = stablehlo.add %n, %i {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<i32>
      %nm = stablehlo.add %m, %i {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<i32>
      "jaxpp.yield"(%na, %nb, %nc, %nn, %nm) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i32>, tensor<i32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i32>, tensor<i32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i32>, tensor<i32>)
    return %0#0, %0#1, %0#2, %0#3, %0#4 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i32>, tensor<i32>
  }
}

// -----

// The rows are as wide as the gcd of the members' sizes (24 and 4: rows of 4);
// a member whose shape is not already rows of that width is reshaped to rows
// (the 4x6 weight to 6x4) and back after the loop.

// CHECK-LABEL: module @rows_of_the_gcd
// CHECK:           %[[RW:.*]] = stablehlo.reshape %arg0 : (tensor<4x6xf32>) -> tensor<6x4xf32>
// CHECK-NEXT:      %[[RB:.*]] = stablehlo.reshape %arg1 : (tensor<4xf32>) -> tensor<1x4xf32>
// CHECK-NEXT:      %[[INIT:.*]] = stablehlo.concatenate %[[RW]], %[[RB]], dim = 0 : (tensor<6x4xf32>, tensor<1x4xf32>) -> tensor<7x4xf32>
// CHECK:             stablehlo.reshape {{.*}} : (tensor<4x6xf32>) -> tensor<6x4xf32>
// CHECK:             stablehlo.concatenate {{.*}} -> tensor<7x4xf32>
// CHECK-NEXT:        stablehlo.add {{.*}} : tensor<7x4xf32>
// CHECK:           %[[OW:.*]] = stablehlo.slice %{{.*}} [0:6, 0:4] : (tensor<7x4xf32>) -> tensor<6x4xf32>
// CHECK-NEXT:      stablehlo.reshape %[[OW]] : (tensor<6x4xf32>) -> tensor<4x6xf32>
module @rows_of_the_gcd attributes {jaxpp.num_stages = 1 : i64} {
  func.func @main(%arg0: tensor<4x6xf32>, %arg1: tensor<4xf32>, %arg2: tensor<4x6xf32>) -> (tensor<4x6xf32>, tensor<4xf32>) {
    %0:2 = "jaxpp.loop"(%arg0, %arg1) ({
    ^bb0(%i: tensor<i32>, %w: tensor<4x6xf32>, %b: tensor<4xf32>):
      %gw = stablehlo.sine %arg2 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4x6xf32>
      %zero = stablehlo.constant {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} dense<0.0> : tensor<f32>
      %gb = stablehlo.reduce(%gw init: %zero) applies stablehlo.add across dimensions = [1] {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<4x6xf32>, tensor<f32>) -> tensor<4xf32>
      %nw = stablehlo.add %w, %gw {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4x6xf32>
      %nb = stablehlo.add %b, %gb {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4xf32>
      "jaxpp.yield"(%nw, %nb) : (tensor<4x6xf32>, tensor<4xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<4x6xf32>, tensor<4xf32>) -> (tensor<4x6xf32>, tensor<4xf32>)
    return %0#0, %0#1 : tensor<4x6xf32>, tensor<4xf32>
  }
}
