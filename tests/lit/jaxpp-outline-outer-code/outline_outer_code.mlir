// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-outline-outer-code)' | filecheck %s

// What jaxpp-place-stages prints for a two-stage treduce step with code
// around the loop. Before the loop: the zero accumulator initializes state on
// ranks 0 and 1 and reads no value, so each rank computes its own; the square
// of %arg1 is read only by the task on rank 1. After the loop: each update
// runs on the rank of its loop state (phase 0); the sum of both updates runs
// on the rank of its first operand, rank 0, one phase later as it reads a
// value of rank 1. The constant 0.1 is copied into both updates.

// CHECK-LABEL: module @pre_and_post_code
// CHECK-NEXT:    func.func @main(%[[W0:.*]]: tensor<4x4xf32>, %[[W1:.*]]: tensor<4x4xf32>, %[[XS:.*]]: tensor<2x2x4xf32>)
// CHECK-NEXT:      %[[PRE0:.*]] = "jaxpp.task"() {callee = @pre0_r0, jaxpp.kind = "pre", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : () -> tensor<4x4xf32>
// CHECK-NEXT:      %[[PRE1:.*]]:2 = "jaxpp.task"(%[[W1]]) {callee = @pre0_r1, jaxpp.kind = "pre", jaxpp.rank = 1 : i64, jaxpp.stage = 0 : i64} : (tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>)
// CHECK-NEXT:      %[[LOOP:.*]]:2 = "jaxpp.loop"(%[[PRE0]], %[[PRE1]]#0) ({
// CHECK-NEXT:      ^bb0(%[[I:.*]]: tensor<i32>, %[[S0:.*]]: tensor<4x4xf32>, %[[S1:.*]]: tensor<4x4xf32>):
// CHECK-NEXT:        %[[T0:.*]]:2 = "jaxpp.task"(%[[I]], %[[XS]], %[[W0]], %[[S0]]) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64}
// CHECK-NEXT:        %[[T1:.*]] = "jaxpp.task"(%[[T0]]#0, %[[PRE1]]#1, %[[S1]]) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64}
// CHECK-NEXT:        "jaxpp.yield"(%[[T0]]#1, %[[T1]])
// CHECK-NEXT:      }) {jaxpp.num_microbatches = 2 : i64, jaxpp.state_ranks = [0, 1]}
// CHECK-NEXT:      %[[POST0:.*]] = "jaxpp.task"(%[[LOOP]]#0, %[[W0]]) {callee = @post0_r0, jaxpp.kind = "post", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64}
// CHECK-NEXT:      %[[POST1:.*]] = "jaxpp.task"(%[[LOOP]]#1, %[[W1]]) {callee = @post0_r1, jaxpp.kind = "post", jaxpp.rank = 1 : i64, jaxpp.stage = 0 : i64}
// CHECK-NEXT:      %[[SUM:.*]] = "jaxpp.task"(%[[POST0]], %[[POST1]]) {callee = @post1_r0, jaxpp.kind = "post", jaxpp.rank = 0 : i64, jaxpp.stage = 1 : i64}
// CHECK-NEXT:      return %[[POST0]], %[[POST1]], %[[SUM]] : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
// CHECK-NEXT:    }
// CHECK-LABEL:   func.func private @pre0_r0() -> tensor<4x4xf32> {
// CHECK-NEXT:      stablehlo.constant
// CHECK-NEXT:      return
// CHECK-LABEL:   func.func private @pre0_r1(%{{.*}}: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
// CHECK-NEXT:      stablehlo.constant
// CHECK-NEXT:      stablehlo.multiply
// CHECK-NEXT:      return
// CHECK-LABEL:   func.func private @post0_r0(%{{.*}}: tensor<4x4xf32>, %{{.*}}: tensor<4x4xf32>) -> tensor<4x4xf32> {
// CHECK-NEXT:      stablehlo.constant dense<1.000000e-01>
// CHECK-NEXT:      stablehlo.multiply
// CHECK-NEXT:      stablehlo.subtract
// CHECK-NEXT:      return
// CHECK-LABEL:   func.func private @post0_r1(%{{.*}}: tensor<4x4xf32>, %{{.*}}: tensor<4x4xf32>) -> tensor<4x4xf32> {
// CHECK-NEXT:      stablehlo.constant dense<1.000000e-01>
// CHECK-NEXT:      stablehlo.multiply
// CHECK-NEXT:      stablehlo.subtract
// CHECK-NEXT:      return
// CHECK-LABEL:   func.func private @post1_r0(%{{.*}}: tensor<4x4xf32>, %{{.*}}: tensor<4x4xf32>) -> tensor<4x4xf32> {
// CHECK-NEXT:      stablehlo.add
// CHECK-NEXT:      return
module @pre_and_post_code attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<4x4xf32>, %arg1: tensor<4x4xf32>, %arg2: tensor<2x2x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<4x4xf32>
    %0 = stablehlo.multiply %arg1, %arg1 : tensor<4x4xf32>
    %1:2 = "jaxpp.loop"(%cst, %cst) ({
    ^bb0(%arg3: tensor<i32>, %arg4: tensor<4x4xf32>, %arg5: tensor<4x4xf32>):
      %5:2 = "jaxpp.task"(%arg3, %arg2, %arg0, %arg4) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<i32>, tensor<2x2x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>)
      %6 = "jaxpp.task"(%5#0, %0, %arg5) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
      "jaxpp.yield"(%5#1, %6) : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64, jaxpp.state_ranks = [0, 1]} : (tensor<4x4xf32>, tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>)
    %cst_0 = stablehlo.constant dense<1.000000e-01> : tensor<4x4xf32>
    %2 = stablehlo.multiply %cst_0, %1#0 : tensor<4x4xf32>
    %3 = stablehlo.subtract %arg0, %2 : tensor<4x4xf32>
    %4 = stablehlo.multiply %cst_0, %1#1 : tensor<4x4xf32>
    %7 = stablehlo.subtract %arg1, %4 : tensor<4x4xf32>
    %8 = stablehlo.add %3, %7 : tensor<4x4xf32>
    return %3, %7, %8 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<i32>, %arg1: tensor<2x2x4xf32>, %arg2: tensor<4x4xf32>, %arg3: tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>) {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.dynamic_slice %arg1, %arg0, %c, %c, sizes = [1, 2, 4] : (tensor<2x2x4xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x4xf32>
    %1 = stablehlo.reshape %0 : (tensor<1x2x4xf32>) -> tensor<2x4xf32>
    %2 = stablehlo.dot_general %1, %arg2, contracting_dims = [1] x [0] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %3 = stablehlo.add %arg3, %arg2 : tensor<4x4xf32>
    return %2, %3 : tensor<2x4xf32>, tensor<4x4xf32>
  }
  func.func private @stage1_fwd(%arg0: tensor<2x4xf32>, %arg1: tensor<4x4xf32>, %arg2: tensor<4x4xf32>) -> tensor<4x4xf32> {
    %0 = stablehlo.dot_general %arg0, %arg0, contracting_dims = [0] x [0] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %1 = stablehlo.multiply %0, %arg1 : tensor<4x4xf32>
    %2 = stablehlo.add %arg2, %1 : tensor<4x4xf32>
    return %2 : tensor<4x4xf32>
  }
}

// -----

// Without a jaxpp.loop there is nothing to do.

// CHECK-LABEL: module @no_loop attributes {jaxpp.num_ranks = 1 : i64, jaxpp.num_stages = 1 : i64}
// CHECK-NEXT:    func.func @main(%[[X:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[T:.*]] = "jaxpp.task"(%[[X]]) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64}
// CHECK-NEXT:      return %[[T]] : tensor<2x4xf32>
// CHECK-NEXT:    }
module @no_loop attributes {jaxpp.num_ranks = 1 : i64, jaxpp.num_stages = 1 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = "jaxpp.task"(%arg0) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

// Code before the loop that reads only arguments, consumed on both ranks: the
// contraction (4096 elements, not linear work) runs once, on rank 0, and
// rank 1 reads its result across ranks (jaxpp-insert-transfers sends it); the
// elementwise negation of it is recomputed on each rank that reads it.

// CHECK-LABEL: module @argument_only_contraction
// CHECK-NEXT:    func.func @main(%[[W:.*]]: tensor<64x64xf32>)
// CHECK-NEXT:      %[[PRE0:.*]]:2 = "jaxpp.task"(%[[W]]) {callee = @pre0_r0, jaxpp.kind = "pre", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<64x64xf32>) -> (tensor<64x64xf32>, tensor<64x64xf32>)
// CHECK-NEXT:      %[[PRE1:.*]] = "jaxpp.task"(%[[PRE0]]#0) {callee = @pre1_r1, jaxpp.kind = "pre", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64} : (tensor<64x64xf32>) -> tensor<64x64xf32>
// CHECK-NEXT:      %[[LOOP:.*]]:2 = "jaxpp.loop"(%[[PRE0]]#1, %[[PRE1]])
// CHECK:         func.func private @pre0_r0(%{{.*}}: tensor<64x64xf32>) -> (tensor<64x64xf32>, tensor<64x64xf32>) {
// CHECK-NEXT:      stablehlo.dot_general
// CHECK-NEXT:      stablehlo.negate
// CHECK-NEXT:      return
// CHECK-LABEL:   func.func private @pre1_r1(%{{.*}}: tensor<64x64xf32>) -> tensor<64x64xf32> {
// CHECK-NEXT:      stablehlo.negate
// CHECK-NEXT:      return
module @argument_only_contraction attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<64x64xf32>) -> (tensor<64x64xf32>, tensor<64x64xf32>) {
    %0 = stablehlo.dot_general %arg0, %arg0, contracting_dims = [1] x [0] : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
    %1 = stablehlo.negate %0 : tensor<64x64xf32>
    %2:2 = "jaxpp.loop"(%1, %1) ({
    ^bb0(%arg1: tensor<i32>, %arg2: tensor<64x64xf32>, %arg3: tensor<64x64xf32>):
      %3 = "jaxpp.task"(%arg2) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<64x64xf32>) -> tensor<64x64xf32>
      %4 = "jaxpp.task"(%arg3) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64} : (tensor<64x64xf32>) -> tensor<64x64xf32>
      "jaxpp.yield"(%3, %4) : (tensor<64x64xf32>, tensor<64x64xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64, jaxpp.state_ranks = [0, 1]} : (tensor<64x64xf32>, tensor<64x64xf32>) -> (tensor<64x64xf32>, tensor<64x64xf32>)
    return %2#0, %2#1 : tensor<64x64xf32>, tensor<64x64xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<64x64xf32>) -> tensor<64x64xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<64x64xf32>
    return %0 : tensor<64x64xf32>
  }
  func.func private @stage1_fwd(%arg0: tensor<64x64xf32>) -> tensor<64x64xf32> {
    %0 = stablehlo.sine %arg0 : tensor<64x64xf32>
    return %0 : tensor<64x64xf32>
  }
}

// -----

// After the loop, p - lr * g with the scalar lr computed on rank 1 (from its
// loop state) and g the state of rank 0: the update runs on rank 0, where g
// lives, and reads only the scalar from rank 1 (the broadcast follows its
// consumer), whatever the operand order.

// CHECK-LABEL: module @update_where_the_gradient_lives
// CHECK-NEXT:    func.func @main(%[[P:.*]]: tensor<64x64xf32>, %[[G0:.*]]: tensor<64x64xf32>, %[[L0:.*]]: tensor<f32>)
// CHECK-NEXT:      %[[LOOP:.*]]:2 = "jaxpp.loop"(%[[G0]], %[[L0]])
// CHECK:           }) {jaxpp.num_microbatches = 2 : i64, jaxpp.state_ranks = [0, 1]}
// CHECK-NEXT:      %[[LR:.*]] = "jaxpp.task"(%[[LOOP]]#1) {callee = @post0_r1, jaxpp.kind = "post", jaxpp.rank = 1 : i64, jaxpp.stage = 0 : i64} : (tensor<f32>) -> tensor<f32>
// CHECK-NEXT:      %[[NEW:.*]]:2 = "jaxpp.task"(%[[LR]], %[[LOOP]]#0, %[[P]]) {callee = @post1_r0, jaxpp.kind = "post", jaxpp.rank = 0 : i64, jaxpp.stage = 1 : i64} : (tensor<f32>, tensor<64x64xf32>, tensor<64x64xf32>) -> (tensor<64x64xf32>, tensor<64x64xf32>)
// CHECK-NEXT:      return %[[NEW]]#0, %[[NEW]]#1 : tensor<64x64xf32>, tensor<64x64xf32>
// CHECK:         func.func private @post1_r0(%{{.*}}: tensor<f32>, %{{.*}}: tensor<64x64xf32>, %{{.*}}: tensor<64x64xf32>) -> (tensor<64x64xf32>, tensor<64x64xf32>) {
// CHECK-NEXT:      stablehlo.broadcast_in_dim
// CHECK-NEXT:      stablehlo.multiply
// CHECK-NEXT:      stablehlo.subtract
// CHECK-NEXT:      stablehlo.multiply
// CHECK-NEXT:      stablehlo.subtract
// CHECK-NEXT:      return
module @update_where_the_gradient_lives attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<64x64xf32>, %arg1: tensor<64x64xf32>, %arg2: tensor<f32>) -> (tensor<64x64xf32>, tensor<64x64xf32>) {
    %0:2 = "jaxpp.loop"(%arg1, %arg2) ({
    ^bb0(%arg3: tensor<i32>, %arg4: tensor<64x64xf32>, %arg5: tensor<f32>):
      %1 = "jaxpp.task"(%arg4) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<64x64xf32>) -> tensor<64x64xf32>
      %2 = "jaxpp.task"(%arg5) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64} : (tensor<f32>) -> tensor<f32>
      "jaxpp.yield"(%1, %2) : (tensor<64x64xf32>, tensor<f32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64, jaxpp.state_ranks = [0, 1]} : (tensor<64x64xf32>, tensor<f32>) -> (tensor<64x64xf32>, tensor<f32>)
    %cst = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %3 = stablehlo.multiply %cst, %0#1 : tensor<f32>
    %4 = stablehlo.broadcast_in_dim %3, dims = [] : (tensor<f32>) -> tensor<64x64xf32>
    %5 = stablehlo.multiply %4, %0#0 : tensor<64x64xf32>
    %6 = stablehlo.subtract %arg0, %5 : tensor<64x64xf32>
    %7 = stablehlo.multiply %0#0, %4 : tensor<64x64xf32>
    %8 = stablehlo.subtract %arg0, %7 : tensor<64x64xf32>
    return %6, %8 : tensor<64x64xf32>, tensor<64x64xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<64x64xf32>) -> tensor<64x64xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<64x64xf32>
    return %0 : tensor<64x64xf32>
  }
  func.func private @stage1_fwd(%arg0: tensor<f32>) -> tensor<f32> {
    %0 = stablehlo.sine %arg0 : tensor<f32>
    return %0 : tensor<f32>
  }
}
