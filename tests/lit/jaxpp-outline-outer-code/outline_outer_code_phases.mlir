// RUN: jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-outline-outer-code)' | filecheck %s

// Phases, and code that reads only arguments of @main, after the loop. Loop
// state 0 lives on rank 0 and state 1 on rank 1. After the loop:
// - the squares of the two states run on their ranks (phase 0); their sum
//   reads a value of rank 1 from rank 0, so it is phase 1 on rank 0; the
//   division reads that sum back on rank 1: phase 2 on rank 1, with the
//   reduction (a region op) that reads it;
// - sqrt(%arg2) and its broadcast read only an argument: each rank that
//   consumes them computes its own, in phase 0 (rank 1 passes its copy on to
//   its phase 2 task); the negation of %arg2, read only by the return, runs
//   on rank 0.
// Before the loop, the zero constant initializes state on both ranks: one
// copy per rank.

// CHECK-LABEL: module @phases_and_argument_only_code
// CHECK-NEXT:    func.func @main(%[[W0:.*]]: tensor<4x4xf32>, %[[W1:.*]]: tensor<4x4xf32>, %[[STEP:.*]]: tensor<f32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>, tensor<f32>) {
// CHECK-NEXT:      %[[PRE0:.*]] = "jaxpp.task"() {callee = @pre0_r0, jaxpp.kind = "pre", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : () -> tensor<4x4xf32>
// CHECK-NEXT:      %[[PRE1:.*]] = "jaxpp.task"() {callee = @pre0_r1, jaxpp.kind = "pre", jaxpp.rank = 1 : i64, jaxpp.stage = 0 : i64} : () -> tensor<4x4xf32>
// CHECK-NEXT:      %[[LOOP:.*]]:2 = "jaxpp.loop"(%[[PRE0]], %[[PRE1]]) ({
// CHECK-NEXT:      ^bb0(%[[I:.*]]: tensor<i32>, %[[S0:.*]]: tensor<4x4xf32>, %[[S1:.*]]: tensor<4x4xf32>):
// CHECK-NEXT:        %[[T0:.*]]:2 = "jaxpp.task"(%[[W0]], %[[S0]]) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64}
// CHECK-NEXT:        %[[T1:.*]] = "jaxpp.task"(%[[T0]]#0, %[[W1]], %[[S1]]) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64}
// CHECK-NEXT:        "jaxpp.yield"(%[[T0]]#1, %[[T1]])
// CHECK-NEXT:      }) {jaxpp.num_microbatches = 2 : i64, jaxpp.state_ranks = [0, 1]}
// CHECK-NEXT:      %[[P0:.*]]:3 = "jaxpp.task"(%[[LOOP]]#0, %[[STEP]]) {callee = @post0_r0, jaxpp.kind = "post", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<4x4xf32>, tensor<f32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>)
// CHECK-NEXT:      %[[P1:.*]]:2 = "jaxpp.task"(%[[LOOP]]#1, %[[STEP]]) {callee = @post0_r1, jaxpp.kind = "post", jaxpp.rank = 1 : i64, jaxpp.stage = 0 : i64} : (tensor<4x4xf32>, tensor<f32>) -> (tensor<4x4xf32>, tensor<4x4xf32>)
// CHECK-NEXT:      %[[SUM:.*]] = "jaxpp.task"(%[[P0]]#0, %[[P1]]#0) {callee = @post1_r0, jaxpp.kind = "post", jaxpp.rank = 0 : i64, jaxpp.stage = 1 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT:      %[[P2:.*]]:2 = "jaxpp.task"(%[[LOOP]]#1, %[[SUM]], %[[P1]]#1) {callee = @post2_r1, jaxpp.kind = "post", jaxpp.rank = 1 : i64, jaxpp.stage = 2 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<f32>)
// CHECK-NEXT:      return %[[P0]]#1, %[[P2]]#0, %[[P0]]#2, %[[P2]]#1 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>, tensor<f32>
// CHECK-NEXT:    }

// The stage functions are untouched; the outer functions follow them, in
// task order. (Their ops are matched up to the operands: see
// outline_outer_code_functions.mlir for the jaxpp.rank left on them.)

// CHECK-NEXT:    func.func private @stage0_fwd(
// CHECK-NEXT:      stablehlo.add
// CHECK-NEXT:      return
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage1_fwd(
// CHECK-NEXT:      stablehlo.multiply
// CHECK-NEXT:      stablehlo.add
// CHECK-NEXT:      return
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @pre0_r0() -> tensor<4x4xf32> {
// CHECK-NEXT:      %[[Z:.*]] = stablehlo.constant {{.*}}dense<0.000000e+00> : tensor<4x4xf32>
// CHECK-NEXT:      return %[[Z]] : tensor<4x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @pre0_r1() -> tensor<4x4xf32> {
// CHECK-NEXT:      %[[Z:.*]] = stablehlo.constant {{.*}}dense<0.000000e+00> : tensor<4x4xf32>
// CHECK-NEXT:      return %[[Z]] : tensor<4x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @post0_r0(%[[G:.*]]: tensor<4x4xf32>, %[[N:.*]]: tensor<f32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>) {
// CHECK-NEXT:      %[[SQ:.*]] = stablehlo.multiply %[[G]], %[[G]]
// CHECK-NEXT:      %[[ROOT:.*]] = stablehlo.sqrt %[[N]]
// CHECK-NEXT:      %[[SCALE:.*]] = stablehlo.broadcast_in_dim %[[ROOT]], dims = []
// CHECK-NEXT:      %[[NEW:.*]] = stablehlo.multiply %[[SCALE]], %[[G]]
// CHECK-NEXT:      %[[NEG:.*]] = stablehlo.negate %[[N]]
// CHECK-NEXT:      return %[[SQ]], %[[NEW]], %[[NEG]] : tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @post0_r1(%[[G:.*]]: tensor<4x4xf32>, %[[N:.*]]: tensor<f32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
// CHECK-NEXT:      %[[SQ:.*]] = stablehlo.multiply %[[G]], %[[G]]
// CHECK-NEXT:      %[[ROOT:.*]] = stablehlo.sqrt %[[N]]
// CHECK-NEXT:      %[[SCALE:.*]] = stablehlo.broadcast_in_dim %[[ROOT]], dims = []
// CHECK-NEXT:      return %[[SQ]], %[[SCALE]] : tensor<4x4xf32>, tensor<4x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @post1_r0(%[[A:.*]]: tensor<4x4xf32>, %[[B:.*]]: tensor<4x4xf32>) -> tensor<4x4xf32> {
// CHECK-NEXT:      %[[SUM:.*]] = stablehlo.add %[[A]], %[[B]]
// CHECK-NEXT:      return %[[SUM]] : tensor<4x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @post2_r1(%[[G:.*]]: tensor<4x4xf32>, %[[SUM:.*]]: tensor<4x4xf32>, %[[SCALE:.*]]: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<f32>) {
// CHECK-NEXT:      %[[ZERO:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:      %[[DIV:.*]] = stablehlo.divide %[[G]], %[[SUM]]
// CHECK-NEXT:      %[[NEW:.*]] = stablehlo.multiply %[[SCALE]], %[[DIV]]
// CHECK-NEXT:      %[[TOTAL:.*]] = stablehlo.reduce(%[[NEW]] init: %[[ZERO]]) applies stablehlo.add across dimensions = [0, 1]
// CHECK-NEXT:      return %[[NEW]], %[[TOTAL]] : tensor<4x4xf32>, tensor<f32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @phases_and_argument_only_code attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<4x4xf32>, %arg1: tensor<4x4xf32>, %arg2: tensor<f32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>, tensor<f32>) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<4x4xf32>
    %0:2 = "jaxpp.loop"(%cst, %cst) ({
    ^bb0(%arg3: tensor<i32>, %arg4: tensor<4x4xf32>, %arg5: tensor<4x4xf32>):
      %1:2 = "jaxpp.task"(%arg0, %arg4) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>)
      %2 = "jaxpp.task"(%1#0, %arg1, %arg5) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
      "jaxpp.yield"(%1#1, %2) : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64, jaxpp.state_ranks = [0, 1]} : (tensor<4x4xf32>, tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>)
    %3 = stablehlo.multiply %0#0, %0#0 : tensor<4x4xf32>
    %4 = stablehlo.multiply %0#1, %0#1 : tensor<4x4xf32>
    %5 = stablehlo.add %3, %4 : tensor<4x4xf32>
    %6 = stablehlo.divide %0#1, %5 : tensor<4x4xf32>
    %7 = stablehlo.sqrt %arg2 : tensor<f32>
    %8 = stablehlo.broadcast_in_dim %7, dims = [] : (tensor<f32>) -> tensor<4x4xf32>
    %9 = stablehlo.multiply %8, %0#0 : tensor<4x4xf32>
    %10 = stablehlo.multiply %8, %6 : tensor<4x4xf32>
    %11 = stablehlo.negate %arg2 : tensor<f32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %12 = stablehlo.reduce(%10 init: %cst_0) applies stablehlo.add across dimensions = [0, 1] : (tensor<4x4xf32>, tensor<f32>) -> tensor<f32>
    return %9, %10, %11, %12 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>, tensor<f32>
  }
  func.func private @stage0_fwd(%arg0: tensor<4x4xf32>, %arg1: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
    %0 = stablehlo.add %arg1, %arg0 : tensor<4x4xf32>
    return %arg0, %0 : tensor<4x4xf32>, tensor<4x4xf32>
  }
  func.func private @stage1_fwd(%arg0: tensor<4x4xf32>, %arg1: tensor<4x4xf32>, %arg2: tensor<4x4xf32>) -> tensor<4x4xf32> {
    %0 = stablehlo.multiply %arg0, %arg1 : tensor<4x4xf32>
    %1 = stablehlo.add %arg2, %0 : tensor<4x4xf32>
    return %1 : tensor<4x4xf32>
  }
}
