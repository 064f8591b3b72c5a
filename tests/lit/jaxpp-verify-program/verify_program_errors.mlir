// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-verify-program)'

// expected-error @+1 {{the module has no 'func.func @main' to partition}}
module @no_main {
  func.func @step(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    return %arg0 : tensor<2x4xf32>
  }
}

// -----

module @non_jaxpp_op_in_main attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = "jaxpp.task"(%arg0) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    // expected-error @+1 {{'stablehlo.sine' in the task graph of a partitioned module}}
    %1 = stablehlo.sine %0 : tensor<2x4xf32>
    return %1 : tensor<2x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage1_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.sine %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

// A constant left in the task graph: the error names the model's line that
// reads it, inside the stage function (JAX locates a closed-over array it
// hoists to the top of the step at the .lower() call).
module @constant_left_in_main attributes {jaxpp.num_ranks = 1 : i64, jaxpp.num_stages = 1 : i64} {
  func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{'stablehlo.constant' in the task graph of a partitioned module (tensor<4xf32>, read by 'stablehlo.add' at model.py:7:12 in @stage0_fwd): no pass placed it in a task}}
    %cst = stablehlo.constant dense<[0.0, 1.0, 2.0, 3.0]> : tensor<4xf32>
    %0 = "jaxpp.task"(%arg0, %cst) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<4xf32> loc("model.py":7:12)
    return %0 : tensor<4xf32>
  }
}

// -----

module @task_without_rank attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{'jaxpp.task' has no jaxpp.rank}}
    %0 = "jaxpp.task"(%arg0) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage1_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.sine %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

// The send comes after its recv.
module @recv_without_send attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = "jaxpp.task"(%arg0) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    // expected-error @+1 {{recv on channel 0 has no earlier send}}
    %1 = "jaxpp.recv"() {jaxpp.channel = 0 : i64, jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64} : () -> tensor<2x4xf32>
    %2 = "jaxpp.task"(%1) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    "jaxpp.send"(%0) {jaxpp.channel = 0 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64} : (tensor<2x4xf32>) -> ()
    return %2 : tensor<2x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage1_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.sine %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

module @mismatched_transfer_types attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = "jaxpp.task"(%arg0) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    "jaxpp.send"(%0) {jaxpp.channel = 0 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64} : (tensor<2x4xf32>) -> ()
    // expected-error @+1 {{recv on channel 0 has a different type than its send}}
    %1 = "jaxpp.recv"() {jaxpp.channel = 0 : i64, jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64} : () -> tensor<2x4xf16>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage1_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.sine %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

// Rank 0 sends to rank 1, but the recv is on rank 0.
module @mismatched_transfer_ranks attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = "jaxpp.task"(%arg0) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    "jaxpp.send"(%0) {jaxpp.channel = 0 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64} : (tensor<2x4xf32>) -> ()
    // expected-error @+1 {{recv on channel 0 does not match the ranks of its send}}
    %1 = "jaxpp.recv"() {jaxpp.channel = 0 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64} : () -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage1_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.sine %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

module @channel_received_twice attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = "jaxpp.task"(%arg0) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    "jaxpp.send"(%0) {jaxpp.channel = 0 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64} : (tensor<2x4xf32>) -> ()
    %1 = "jaxpp.recv"() {jaxpp.channel = 0 : i64, jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64} : () -> tensor<2x4xf32>
    // expected-error @+1 {{channel 0 is received twice}}
    %2 = "jaxpp.recv"() {jaxpp.channel = 0 : i64, jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64} : () -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage1_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.sine %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

module @channel_sent_twice attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = "jaxpp.task"(%arg0) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    "jaxpp.send"(%0) {jaxpp.channel = 0 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64} : (tensor<2x4xf32>) -> ()
    // expected-error @+1 {{channel 0 is sent on twice}}
    "jaxpp.send"(%0) {jaxpp.channel = 0 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64} : (tensor<2x4xf32>) -> ()
    %1 = "jaxpp.recv"() {jaxpp.channel = 0 : i64, jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64} : () -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage1_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.sine %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

module @send_without_recv attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = "jaxpp.task"(%arg0) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    // expected-error @+1 {{send on channel 0 has no matching recv}}
    "jaxpp.send"(%0) {jaxpp.channel = 0 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64} : (tensor<2x4xf32>) -> ()
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage1_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.sine %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

// Stage 1 on rank 1 reads the result of rank 0 without a transfer.
module @operand_on_another_rank attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = "jaxpp.task"(%arg0) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    // expected-error @+1 {{operand defined on rank 0 is used on rank 1 without a transfer}}
    %1 = "jaxpp.task"(%0) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %1 : tensor<2x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage1_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.sine %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

module @send_of_value_from_another_rank attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = "jaxpp.task"(%arg0) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %1 = "jaxpp.task"(%arg0) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    // expected-error @+1 {{operand defined on rank 1 is used on rank 0 without a transfer}}
    "jaxpp.send"(%1) {jaxpp.channel = 0 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64} : (tensor<2x4xf32>) -> ()
    %2 = "jaxpp.recv"() {jaxpp.channel = 0 : i64, jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64} : () -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage1_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.sine %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

module @task_calls_unknown_function attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{task calls unknown function '@stage7_fwd'}}
    %0 = "jaxpp.task"(%arg0) {callee = @stage7_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage1_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.sine %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

module @task_type_mismatch attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{task operand or result types do not match the type of '@stage0_fwd'}}
    %0 = "jaxpp.task"(%arg0) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<2x4xf32>) -> tensor<4x2xf32>
    return %arg0 : tensor<2x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage1_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.sine %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

module @marker_left_in_stage_function attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = "jaxpp.task"(%arg0) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{'stablehlo.custom_call' left inside stage function '@stage0_fwd'}}
    %0 = stablehlo.custom_call @jaxpp.enter_stage(%arg0) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

module @call_left_in_stage_function attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = "jaxpp.task"(%arg0) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{'func.call' left inside stage function '@stage0_fwd'}}
    %0 = func.call @layer(%arg0) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @layer(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    return %arg0 : tensor<2x4xf32>
  }
}

// -----

module @loop_without_state_ranks attributes {jaxpp.num_ranks = 1 : i64, jaxpp.num_stages = 1 : i64} {
  func.func @main(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {
    // expected-error @+1 {{jaxpp.loop needs jaxpp.state_ranks for each state}}
    %0 = "jaxpp.loop"(%arg0) ({
    ^bb0(%arg1: tensor<i32>, %arg2: tensor<4x4xf32>):
      %1 = "jaxpp.task"(%arg2) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
      "jaxpp.yield"(%1) : (tensor<4x4xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    return %0 : tensor<4x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<4x4xf32>
    return %0 : tensor<4x4xf32>
  }
}

// -----

// The state is held on rank 0 but the task that updates it runs on rank 1.
module @loop_state_updated_on_another_rank attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {
    %0 = "jaxpp.loop"(%arg0) ({
    ^bb0(%arg1: tensor<i32>, %arg2: tensor<4x4xf32>):
      %1 = "jaxpp.task"(%arg2) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
      "jaxpp.send"(%1) {jaxpp.channel = 0 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64} : (tensor<4x4xf32>) -> ()
      %2 = "jaxpp.recv"() {jaxpp.channel = 0 : i64, jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64} : () -> tensor<4x4xf32>
      %3 = "jaxpp.task"(%2) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
      // expected-error @+1 {{loop state updated on rank 1 but held on rank 0}}
      "jaxpp.yield"(%3) : (tensor<4x4xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64, jaxpp.state_ranks = [0]} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    return %0 : tensor<4x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<4x4xf32>
    return %0 : tensor<4x4xf32>
  }
  func.func private @stage1_fwd(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {
    %0 = stablehlo.sine %arg0 : tensor<4x4xf32>
    return %0 : tensor<4x4xf32>
  }
}
