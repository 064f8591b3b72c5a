// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-verify-program)'

// jaxpp ops missing a required attribute must fail with an error located at
// the op (the pass has no precondition: every violation is a located error).

module @send_without_channel attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{'jaxpp.send' has no jaxpp.channel attribute}}
    "jaxpp.send"(%arg0) {jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64} : (tensor<2x4xf32>) -> ()
    return %arg0 : tensor<2x4xf32>
  }
}

// -----

module @recv_without_peer attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    "jaxpp.send"(%arg0) {jaxpp.channel = 0 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64} : (tensor<2x4xf32>) -> ()
    // expected-error @+1 {{'jaxpp.recv' has no jaxpp.peer attribute}}
    %0 = "jaxpp.recv"() {jaxpp.channel = 0 : i64, jaxpp.rank = 1 : i64} : () -> tensor<2x4xf32>
    return %arg0 : tensor<2x4xf32>
  }
}

// -----

module @task_without_callee attributes {jaxpp.num_ranks = 1 : i64, jaxpp.num_stages = 1 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{'jaxpp.task' has no callee attribute}}
    %0 = "jaxpp.task"(%arg0) {jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}
