// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-place-stages{mpmd-dim=2})' | filecheck %s

// Rows of a stacked input (jaxpp.chunk, jaxpp-split-stacked-values) go to the rank of
// the stage holding them (jaxpp.stage); under Interleaved1F1B(4, 2) stage s runs on
// rank s % 2, so the chunks of stages 1 and 3 go to rank 1. A chunk without a stage
// goes to the rank of the first task reading it.

// CHECK-LABEL: module @chunks_on_their_stages_ranks
// CHECK:         "jaxpp.chunk"(%arg0) {jaxpp.rank = 0 : i64, jaxpp.rows = 1 : i64, jaxpp.stage = 0 : i64, jaxpp.start = 0 : i64}
// CHECK-NEXT:    "jaxpp.chunk"(%arg0) {jaxpp.rank = 1 : i64, jaxpp.rows = 1 : i64, jaxpp.stage = 1 : i64, jaxpp.start = 1 : i64}
// CHECK-NEXT:    "jaxpp.chunk"(%arg0) {jaxpp.rank = 0 : i64, jaxpp.rows = 1 : i64, jaxpp.stage = 2 : i64, jaxpp.start = 2 : i64}
// CHECK-NEXT:    "jaxpp.chunk"(%arg0) {jaxpp.rank = 1 : i64, jaxpp.rows = 1 : i64, jaxpp.stage = 3 : i64, jaxpp.start = 3 : i64}
// CHECK-NEXT:    "jaxpp.chunk"(%arg1) {jaxpp.rank = 1 : i64, jaxpp.rows = 4 : i64, jaxpp.start = 0 : i64}
module @chunks_on_their_stages_ranks attributes {jaxpp.num_stages = 4 : i64, jaxpp.schedule = {kind = "Interleaved1F1B", num_stages = 4 : i64, mpmd_dim = 2 : i64}} {
  func.func @main(%arg0: tensor<4x2xf32>, %arg1: tensor<4x2xf32>) {
    %c0 = "jaxpp.chunk"(%arg0) {jaxpp.rows = 1 : i64, jaxpp.stage = 0 : i64, jaxpp.start = 0 : i64} : (tensor<4x2xf32>) -> tensor<1x2xf32>
    %c1 = "jaxpp.chunk"(%arg0) {jaxpp.rows = 1 : i64, jaxpp.stage = 1 : i64, jaxpp.start = 1 : i64} : (tensor<4x2xf32>) -> tensor<1x2xf32>
    %c2 = "jaxpp.chunk"(%arg0) {jaxpp.rows = 1 : i64, jaxpp.stage = 2 : i64, jaxpp.start = 2 : i64} : (tensor<4x2xf32>) -> tensor<1x2xf32>
    %c3 = "jaxpp.chunk"(%arg0) {jaxpp.rows = 1 : i64, jaxpp.stage = 3 : i64, jaxpp.start = 3 : i64} : (tensor<4x2xf32>) -> tensor<1x2xf32>
    %d = "jaxpp.chunk"(%arg1) {jaxpp.rows = 4 : i64, jaxpp.start = 0 : i64} : (tensor<4x2xf32>) -> tensor<4x2xf32>
    "jaxpp.loop"() ({
    ^bb0(%i: tensor<i32>):
      %1 = "jaxpp.task"(%c0, %c0) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<1x2xf32>, tensor<1x2xf32>) -> tensor<1x2xf32>
      %2 = "jaxpp.task"(%1, %c1, %d) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<1x2xf32>, tensor<1x2xf32>, tensor<4x2xf32>) -> tensor<1x2xf32>
      %3 = "jaxpp.task"(%2, %c2) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.stage = 2 : i64} : (tensor<1x2xf32>, tensor<1x2xf32>) -> tensor<1x2xf32>
      %4 = "jaxpp.task"(%3, %c3) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.stage = 3 : i64} : (tensor<1x2xf32>, tensor<1x2xf32>) -> tensor<1x2xf32>
      "jaxpp.yield"() : () -> ()
    }) {jaxpp.num_microbatches = 4 : i64} : () -> ()
    return
  }
  func.func private @stage0_fwd(%arg0: tensor<1x2xf32>, %arg1: tensor<1x2xf32>) -> tensor<1x2xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<1x2xf32>
    return %0 : tensor<1x2xf32>
  }
  func.func private @stage1_fwd(%arg0: tensor<1x2xf32>, %arg1: tensor<1x2xf32>, %arg2: tensor<4x2xf32>) -> tensor<1x2xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<1x2xf32>
    return %0 : tensor<1x2xf32>
  }
}
