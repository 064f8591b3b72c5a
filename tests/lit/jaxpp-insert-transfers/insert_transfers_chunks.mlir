// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-insert-transfers)' | filecheck %s

// A chunk of an input is held by its rank (jaxpp.rank): the loop state it starts is
// held there; a task of another rank reading it gets it through a send/recv pair,
// received once, before the loop. The assemble of pieces held on both ranks needs none.

// CHECK-LABEL: module @chunk_read_on_another_rank
// CHECK-NEXT:    func.func @main(%[[W:.*]]: tensor<4x3xf32>) -> tensor<4x3xf32> {
// CHECK-NEXT:      %[[W0:.*]] = "jaxpp.chunk"(%[[W]]) {jaxpp.rank = 0 : i64, jaxpp.rows = 2 : i64, jaxpp.start = 0 : i64}
// CHECK-NEXT:      "jaxpp.send"(%[[W0]]) {jaxpp.channel = 0 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64} : (tensor<2x3xf32>) -> ()
// CHECK-NEXT:      %[[W1:.*]] = "jaxpp.chunk"(%[[W]]) {jaxpp.rank = 1 : i64, jaxpp.rows = 2 : i64, jaxpp.start = 2 : i64}
// CHECK-NEXT:      %[[R:.*]] = "jaxpp.recv"() {jaxpp.channel = 0 : i64, jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64} : () -> tensor<2x3xf32>
// CHECK-NEXT:      %[[LOOP:.*]]:2 = "jaxpp.loop"(%[[W0]], %[[W1]])
// CHECK-NEXT:      ^bb0(%{{.*}}: tensor<i32>, %[[S0:.*]]: tensor<2x3xf32>, %[[S1:.*]]: tensor<2x3xf32>):
// CHECK-NEXT:        %[[A:.*]] = "jaxpp.task"(%[[S0]]) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64}
// CHECK-NEXT:        %[[B:.*]] = "jaxpp.task"(%[[S1]], %[[R]]) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64}
// CHECK-NEXT:        "jaxpp.yield"(%[[A]], %[[B]])
// CHECK:           %[[ALL:.*]] = "jaxpp.assemble"(%[[LOOP]]#0, %[[LOOP]]#1)
// CHECK-NEXT:      return %[[ALL]]
module @chunk_read_on_another_rank attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<4x3xf32>) -> tensor<4x3xf32> {
    %c0 = "jaxpp.chunk"(%arg0) {jaxpp.rank = 0 : i64, jaxpp.rows = 2 : i64, jaxpp.start = 0 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
    %c1 = "jaxpp.chunk"(%arg0) {jaxpp.rank = 1 : i64, jaxpp.rows = 2 : i64, jaxpp.start = 2 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
    %0:2 = "jaxpp.loop"(%c0, %c1) ({
    ^bb0(%i: tensor<i32>, %s0: tensor<2x3xf32>, %s1: tensor<2x3xf32>):
      %1 = "jaxpp.task"(%s0) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
      %2 = "jaxpp.task"(%s1, %c0) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
      "jaxpp.yield"(%1, %2) : (tensor<2x3xf32>, tensor<2x3xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64, jaxpp.state_ranks = [0, 1]} : (tensor<2x3xf32>, tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
    %3 = "jaxpp.assemble"(%0#0, %0#1) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
    return %3 : tensor<4x3xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
    return %arg0 : tensor<2x3xf32>
  }
  func.func private @stage1_fwd(%arg0: tensor<2x3xf32>, %arg1: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }
}
