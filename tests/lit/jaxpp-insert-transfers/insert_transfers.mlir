// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-insert-transfers)' | filecheck %s

// The forward activation of stage 0 is read by both tasks of rank 1: one
// send/recv pair (channel 0), the send right after its producer, the recv
// right before the first reader, and both readers use the recv. Stage 0's
// backward reads the same value on rank 0 (no transfer); @main's argument is
// read on both ranks (no transfer); @main returns a rank-1 value (no
// transfer).

// CHECK-LABEL: module @transfer_reused_by_two_tasks
// CHECK-NEXT:    func.func @main(%[[X:.*]]: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
// CHECK-NEXT:      %[[F0:.*]] = "jaxpp.task"(%[[X]]) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64}
// CHECK-NEXT:      "jaxpp.send"(%[[F0]]) {jaxpp.channel = 0 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64} : (tensor<2x4xf32>) -> ()
// CHECK-NEXT:      %[[R0:.*]] = "jaxpp.recv"() {jaxpp.channel = 0 : i64, jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64} : () -> tensor<2x4xf32>
// CHECK-NEXT:      %[[F1:.*]] = "jaxpp.task"(%[[R0]]) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64}
// CHECK-NEXT:      %[[B1:.*]] = "jaxpp.task"(%[[F1]], %[[R0]], %[[X]]) {callee = @stage1_bwd, jaxpp.kind = "bwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64}
// CHECK-NEXT:      "jaxpp.send"(%[[B1]]) {jaxpp.channel = 1 : i64, jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64} : (tensor<2x4xf32>) -> ()
// CHECK-NEXT:      %[[R1:.*]] = "jaxpp.recv"() {jaxpp.channel = 1 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64} : () -> tensor<2x4xf32>
// CHECK-NEXT:      %[[B0:.*]] = "jaxpp.task"(%[[R1]], %[[F0]], %[[X]]) {callee = @stage0_bwd, jaxpp.kind = "bwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64}
// CHECK-NEXT:      return %[[F1]], %[[B0]] : tensor<2x4xf32>, tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage0_fwd(%{{.*}}: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      stablehlo.tanh
// CHECK-NEXT:      return
// CHECK-NEXT:    }
module @transfer_reused_by_two_tasks attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
    %0 = "jaxpp.task"(%arg0) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %1 = "jaxpp.task"(%0) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %2 = "jaxpp.task"(%1, %0, %arg0) {callee = @stage1_bwd, jaxpp.kind = "bwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %3 = "jaxpp.task"(%2, %0, %arg0) {callee = @stage0_bwd, jaxpp.kind = "bwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    return %1, %3 : tensor<2x4xf32>, tensor<2x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage1_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.sine %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage1_bwd(%arg0: tensor<2x4xf32>, %arg1: tensor<2x4xf32>, %arg2: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.multiply %arg0, %arg1 : tensor<2x4xf32>
    %1 = stablehlo.add %0, %arg2 : tensor<2x4xf32>
    return %1 : tensor<2x4xf32>
  }
  func.func private @stage0_bwd(%arg0: tensor<2x4xf32>, %arg1: tensor<2x4xf32>, %arg2: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.multiply %arg0, %arg1 : tensor<2x4xf32>
    %1 = stablehlo.add %0, %arg2 : tensor<2x4xf32>
    return %1 : tensor<2x4xf32>
  }
}

// -----

// Stage 0's first result goes to rank 1 and to rank 2 (two channels), its
// second result to rank 1 only. Every send sits right after the producer;
// each recv right before the first task that reads it, in operand order.
// The sends after one producer come out in channel order, so that a transport
// pairing sends and receives in order sees the same order on both sides.

// CHECK-LABEL: module @value_sent_to_two_ranks
// CHECK-NEXT:    func.func @main(%[[X:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[F0:.*]]:2 = "jaxpp.task"(%[[X]]) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64}
// CHECK-NEXT:      "jaxpp.send"(%[[F0]]#1) {jaxpp.channel = 0 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64} : (tensor<4xf32>) -> ()
// CHECK-NEXT:      "jaxpp.send"(%[[F0]]#0) {jaxpp.channel = 1 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64} : (tensor<2x4xf32>) -> ()
// CHECK-NEXT:      "jaxpp.send"(%[[F0]]#0) {jaxpp.channel = 3 : i64, jaxpp.peer = 2 : i64, jaxpp.rank = 0 : i64} : (tensor<2x4xf32>) -> ()
// CHECK-NEXT:      %[[R0:.*]] = "jaxpp.recv"() {jaxpp.channel = 0 : i64, jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64} : () -> tensor<4xf32>
// CHECK-NEXT:      %[[R1:.*]] = "jaxpp.recv"() {jaxpp.channel = 1 : i64, jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64} : () -> tensor<2x4xf32>
// CHECK-NEXT:      %[[F1:.*]] = "jaxpp.task"(%[[R0]], %[[R1]]) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64}
// CHECK-NEXT:      "jaxpp.send"(%[[F1]]) {jaxpp.channel = 2 : i64, jaxpp.peer = 2 : i64, jaxpp.rank = 1 : i64} : (tensor<2x4xf32>) -> ()
// CHECK-NEXT:      %[[R2:.*]] = "jaxpp.recv"() {jaxpp.channel = 2 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 2 : i64} : () -> tensor<2x4xf32>
// CHECK-NEXT:      %[[R3:.*]] = "jaxpp.recv"() {jaxpp.channel = 3 : i64, jaxpp.peer = 0 : i64, jaxpp.rank = 2 : i64} : () -> tensor<2x4xf32>
// CHECK-NEXT:      %[[F2:.*]] = "jaxpp.task"(%[[R2]], %[[R3]]) {callee = @stage2_fwd, jaxpp.kind = "fwd", jaxpp.rank = 2 : i64, jaxpp.stage = 2 : i64}
// CHECK-NEXT:      return %[[F2]] : tensor<2x4xf32>
// CHECK-NEXT:    }
module @value_sent_to_two_ranks attributes {jaxpp.num_ranks = 3 : i64, jaxpp.num_stages = 3 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0:2 = "jaxpp.task"(%arg0) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<4xf32>)
    %1 = "jaxpp.task"(%0#1, %0#0) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64} : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %2 = "jaxpp.task"(%1, %0#0) {callee = @stage2_fwd, jaxpp.kind = "fwd", jaxpp.rank = 2 : i64, jaxpp.stage = 2 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    return %2 : tensor<2x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<4xf32>) {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = stablehlo.reduce(%0 init: %cst) applies stablehlo.add across dimensions = [0] : (tensor<2x4xf32>, tensor<f32>) -> tensor<4xf32>
    return %0, %1 : tensor<2x4xf32>, tensor<4xf32>
  }
  func.func private @stage1_fwd(%arg0: tensor<4xf32>, %arg1: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.broadcast_in_dim %arg0, dims = [1] : (tensor<4xf32>) -> tensor<2x4xf32>
    %1 = stablehlo.add %arg1, %0 : tensor<2x4xf32>
    return %1 : tensor<2x4xf32>
  }
  func.func private @stage2_fwd(%arg0: tensor<2x4xf32>, %arg1: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

// Stages 0 and 2 share rank 0: stage 2 reads stage 0's result directly and
// only stage 1's result travels back from rank 1.

// CHECK-LABEL: module @same_rank_needs_no_transfer
// CHECK-NEXT:    func.func @main(%[[X:.*]]: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
// CHECK-NEXT:      %[[F0:.*]] = "jaxpp.task"(%[[X]]) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64}
// CHECK-NEXT:      "jaxpp.send"(%[[F0]]) {jaxpp.channel = 0 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64}
// CHECK-NEXT:      %[[R0:.*]] = "jaxpp.recv"() {jaxpp.channel = 0 : i64, jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64}
// CHECK-NEXT:      %[[F1:.*]] = "jaxpp.task"(%[[R0]], %[[X]]) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64}
// CHECK-NEXT:      "jaxpp.send"(%[[F1]]) {jaxpp.channel = 1 : i64, jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64}
// CHECK-NEXT:      %[[R1:.*]] = "jaxpp.recv"() {jaxpp.channel = 1 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64}
// CHECK-NEXT:      %[[F2:.*]] = "jaxpp.task"(%[[R1]], %[[F0]], %[[X]]) {callee = @stage2_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 2 : i64}
// CHECK-NEXT:      return %[[F1]], %[[F2]] : tensor<2x4xf32>, tensor<2x4xf32>
// CHECK-NEXT:    }
module @same_rank_needs_no_transfer attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 3 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
    %0 = "jaxpp.task"(%arg0) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %1 = "jaxpp.task"(%0, %arg0) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %2 = "jaxpp.task"(%1, %0, %arg0) {callee = @stage2_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 2 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    return %1, %2 : tensor<2x4xf32>, tensor<2x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage1_fwd(%arg0: tensor<2x4xf32>, %arg1: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage2_fwd(%arg0: tensor<2x4xf32>, %arg1: tensor<2x4xf32>, %arg2: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<2x4xf32>
    %1 = stablehlo.add %0, %arg2 : tensor<2x4xf32>
    return %1 : tensor<2x4xf32>
  }
}

// -----

// Around and inside a microbatch loop: the initial value of state 1 (held on
// rank 1) is computed on rank 0 and received before the loop; stage 0's
// activation crosses to rank 1 inside the body, once per microbatch; the final
// state of rank 1 is sent right after the loop to the update on rank 0.

// CHECK-LABEL: module @transfers_around_loop
// CHECK-NEXT:    func.func @main(%[[W:.*]]: tensor<4x4xf32>, %[[XS:.*]]: tensor<2x2x4xf32>)
// CHECK-NEXT:      %[[PRE:.*]] = "jaxpp.task"(%[[W]]) {callee = @pre0_r0, jaxpp.kind = "pre", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64}
// CHECK-NEXT:      "jaxpp.send"(%[[PRE]]) {jaxpp.channel = 0 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64}
// CHECK-NEXT:      %[[R0:.*]] = "jaxpp.recv"() {jaxpp.channel = 0 : i64, jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64}
// CHECK-NEXT:      %[[LOOP:.*]]:2 = "jaxpp.loop"(%[[PRE]], %[[R0]]) ({
// CHECK-NEXT:      ^bb0(%[[I:.*]]: tensor<i32>, %[[S0:.*]]: tensor<4x4xf32>, %[[S1:.*]]: tensor<4x4xf32>):
// CHECK-NEXT:        %[[T0:.*]]:2 = "jaxpp.task"(%[[I]], %[[XS]], %[[S0]]) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64}
// CHECK-NEXT:        "jaxpp.send"(%[[T0]]#0) {jaxpp.channel = 1 : i64, jaxpp.for_task = [0, "fwd"], jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64}
// CHECK-NEXT:        %[[R1:.*]] = "jaxpp.recv"() {jaxpp.channel = 1 : i64, jaxpp.for_task = [1, "fwd"], jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64}
// CHECK-NEXT:        %[[T1:.*]] = "jaxpp.task"(%[[R1]], %[[S1]]) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64}
// CHECK-NEXT:        "jaxpp.yield"(%[[T0]]#1, %[[T1]])
// CHECK-NEXT:      }) {jaxpp.num_microbatches = 2 : i64, jaxpp.state_ranks = [0, 1]}
// CHECK-NEXT:      "jaxpp.send"(%[[LOOP]]#1) {jaxpp.channel = 2 : i64, jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64}
// CHECK-NEXT:      %[[R2:.*]] = "jaxpp.recv"() {jaxpp.channel = 2 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64}
// CHECK-NEXT:      %[[POST:.*]] = "jaxpp.task"(%[[LOOP]]#0, %[[R2]]) {callee = @post1_r0, jaxpp.kind = "post", jaxpp.rank = 0 : i64, jaxpp.stage = 1 : i64}
// CHECK-NEXT:      return %[[POST]], %[[LOOP]]#1 : tensor<4x4xf32>, tensor<4x4xf32>
// CHECK-NEXT:    }
module @transfers_around_loop attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<4x4xf32>, %arg1: tensor<2x2x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
    %0 = "jaxpp.task"(%arg0) {callee = @pre0_r0, jaxpp.kind = "pre", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %1:2 = "jaxpp.loop"(%0, %0) ({
    ^bb0(%arg2: tensor<i32>, %arg3: tensor<4x4xf32>, %arg4: tensor<4x4xf32>):
      %3:2 = "jaxpp.task"(%arg2, %arg1, %arg3) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<i32>, tensor<2x2x4xf32>, tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>)
      %4 = "jaxpp.task"(%3#0, %arg4) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
      "jaxpp.yield"(%3#1, %4) : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64, jaxpp.state_ranks = [0, 1]} : (tensor<4x4xf32>, tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>)
    %2 = "jaxpp.task"(%1#0, %1#1) {callee = @post1_r0, jaxpp.kind = "post", jaxpp.rank = 0 : i64, jaxpp.stage = 1 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    return %2, %1#1 : tensor<4x4xf32>, tensor<4x4xf32>
  }
  func.func private @pre0_r0(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {
    %0 = stablehlo.multiply %arg0, %arg0 : tensor<4x4xf32>
    return %0 : tensor<4x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<i32>, %arg1: tensor<2x2x4xf32>, %arg2: tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>) {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.dynamic_slice %arg1, %arg0, %c, %c, sizes = [1, 2, 4] : (tensor<2x2x4xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x4xf32>
    %1 = stablehlo.reshape %0 : (tensor<1x2x4xf32>) -> tensor<2x4xf32>
    %2 = stablehlo.dot_general %1, %1, contracting_dims = [0] x [0] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %3 = stablehlo.add %arg2, %2 : tensor<4x4xf32>
    return %1, %3 : tensor<2x4xf32>, tensor<4x4xf32>
  }
  func.func private @stage1_fwd(%arg0: tensor<2x4xf32>, %arg1: tensor<4x4xf32>) -> tensor<4x4xf32> {
    %0 = stablehlo.dot_general %arg0, %arg0, contracting_dims = [0] x [0] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %1 = stablehlo.add %arg1, %0 : tensor<4x4xf32>
    return %1 : tensor<4x4xf32>
  }
  func.func private @post1_r0(%arg0: tensor<4x4xf32>, %arg1: tensor<4x4xf32>) -> tensor<4x4xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<4x4xf32>
    return %0 : tensor<4x4xf32>
  }
}
