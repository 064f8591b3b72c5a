// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-outline-outer-code)' | filecheck %s

// A stacked parameter held as chunks, one per rank (jaxpp-split-stacked-values and
// jaxpp-place-stages): the update of each chunk after the loop runs on its rank, with
// its gradient piece, so no row moves; the sum of squares of the pieces is a partial
// sum on each rank, combined on rank 0 (only that scalar is read from rank 1). The
// chunks stay at the top of @main, and the assemble of the new pieces before the
// return, after the tasks computing them.

// CHECK-LABEL: module @update_per_chunk
// CHECK-NEXT:    func.func @main(%[[W:.*]]: tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<f32>) {
// CHECK-NEXT:      %[[W0:.*]] = "jaxpp.chunk"(%[[W]]) {jaxpp.rank = 0 : i64, jaxpp.rows = 2 : i64, jaxpp.stage = 0 : i64, jaxpp.start = 0 : i64}
// CHECK-NEXT:      %[[W1:.*]] = "jaxpp.chunk"(%[[W]]) {jaxpp.rank = 1 : i64, jaxpp.rows = 2 : i64, jaxpp.stage = 1 : i64, jaxpp.start = 2 : i64}
// CHECK-NEXT:      %[[LOOP:.*]]:2 = "jaxpp.loop"(%[[W0]], %[[W1]])
// CHECK:           }) {jaxpp.num_microbatches = 2 : i64, jaxpp.state_ranks = [0, 1]}
// CHECK-NEXT:      %[[P0:.*]]:2 = "jaxpp.task"(%[[W0]], %[[LOOP]]#0) {callee = @post0_r0, jaxpp.kind = "post", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<f32>)
// CHECK-NEXT:      %[[P1:.*]]:2 = "jaxpp.task"(%[[W1]], %[[LOOP]]#1) {callee = @post0_r1, jaxpp.kind = "post", jaxpp.rank = 1 : i64, jaxpp.stage = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<f32>)
// CHECK-NEXT:      %[[SUM:.*]] = "jaxpp.task"(%[[P0]]#1, %[[P1]]#1) {callee = @post1_r0, jaxpp.kind = "post", jaxpp.rank = 0 : i64, jaxpp.stage = 1 : i64} : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT:      %[[NEW:.*]] = "jaxpp.assemble"(%[[P0]]#0, %[[P1]]#0) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:      return %[[NEW]], %[[SUM]] : tensor<4x3xf32>, tensor<f32>
module @update_per_chunk attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<f32>) {
    %c0 = "jaxpp.chunk"(%arg0) {jaxpp.rank = 0 : i64, jaxpp.rows = 2 : i64, jaxpp.stage = 0 : i64, jaxpp.start = 0 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
    %c1 = "jaxpp.chunk"(%arg0) {jaxpp.rank = 1 : i64, jaxpp.rows = 2 : i64, jaxpp.stage = 1 : i64, jaxpp.start = 2 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
    %0:2 = "jaxpp.loop"(%c0, %c1) ({
    ^bb0(%i: tensor<i32>, %g0: tensor<2x3xf32>, %g1: tensor<2x3xf32>):
      %1 = "jaxpp.task"(%g0, %c0) {callee = @stage0_bwd, jaxpp.kind = "bwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
      %2 = "jaxpp.task"(%g1, %c1) {callee = @stage0_bwd, jaxpp.kind = "bwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
      "jaxpp.yield"(%1, %2) : (tensor<2x3xf32>, tensor<2x3xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64, jaxpp.state_ranks = [0, 1]} : (tensor<2x3xf32>, tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
    %new0 = stablehlo.subtract %c0, %0#0 : tensor<2x3xf32>
    %new1 = stablehlo.subtract %c1, %0#1 : tensor<2x3xf32>
    %sq0 = stablehlo.multiply %0#0, %0#0 : tensor<2x3xf32>
    %sq1 = stablehlo.multiply %0#1, %0#1 : tensor<2x3xf32>
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %s0 = stablehlo.reduce(%sq0 init: %zero) applies stablehlo.add across dimensions = [0, 1] : (tensor<2x3xf32>, tensor<f32>) -> tensor<f32>
    %s1 = stablehlo.reduce(%sq1 init: %zero) applies stablehlo.add across dimensions = [0, 1] : (tensor<2x3xf32>, tensor<f32>) -> tensor<f32>
    %sum = stablehlo.add %s0, %s1 : tensor<f32>
    %new = "jaxpp.assemble"(%new0, %new1) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
    return %new, %sum : tensor<4x3xf32>, tensor<f32>
  }
  func.func private @stage0_bwd(%arg0: tensor<2x3xf32>, %arg1: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }
}
