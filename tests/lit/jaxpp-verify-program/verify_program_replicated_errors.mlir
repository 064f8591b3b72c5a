// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-verify-program)'

module @copy_from_another_rank attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<i32>) -> tensor<i32> {
    %0 = "jaxpp.task"(%arg0) {callee = @post0_r0, jaxpp.kind = "post", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<i32>) -> tensor<i32>
    %1 = "jaxpp.task"(%arg0) {callee = @post0_r1, jaxpp.kind = "post", jaxpp.rank = 1 : i64, jaxpp.stage = 0 : i64} : (tensor<i32>) -> tensor<i32>
    // expected-error @+1 {{'jaxpp.replicated' operand for rank 1 is not a value held on rank 1}}
    %2 = "jaxpp.replicated"(%0, %0) {jaxpp.ranks = [0, 1]} : (tensor<i32>, tensor<i32>) -> tensor<i32>
    return %2 : tensor<i32>
  }
  func.func private @post0_r0(%arg0: tensor<i32>) -> tensor<i32> {
    %0 = stablehlo.negate %arg0 : tensor<i32>
    return %0 : tensor<i32>
  }
  func.func private @post0_r1(%arg0: tensor<i32>) -> tensor<i32> {
    %0 = stablehlo.negate %arg0 : tensor<i32>
    return %0 : tensor<i32>
  }
}

// -----

module @one_rank_per_operand attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<i32>) -> tensor<i32> {
    %0 = "jaxpp.task"(%arg0) {callee = @post0_r0, jaxpp.kind = "post", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<i32>) -> tensor<i32>
    %1 = "jaxpp.task"(%arg0) {callee = @post0_r1, jaxpp.kind = "post", jaxpp.rank = 1 : i64, jaxpp.stage = 0 : i64} : (tensor<i32>) -> tensor<i32>
    // expected-error @+1 {{'jaxpp.replicated' needs jaxpp.ranks: one distinct rank per operand, at least 2}}
    %2 = "jaxpp.replicated"(%0, %1) {jaxpp.ranks = [0, 0]} : (tensor<i32>, tensor<i32>) -> tensor<i32>
    return %2 : tensor<i32>
  }
  func.func private @post0_r0(%arg0: tensor<i32>) -> tensor<i32> {
    %0 = stablehlo.negate %arg0 : tensor<i32>
    return %0 : tensor<i32>
  }
  func.func private @post0_r1(%arg0: tensor<i32>) -> tensor<i32> {
    %0 = stablehlo.negate %arg0 : tensor<i32>
    return %0 : tensor<i32>
  }
}

// -----

module @read_by_a_task attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<i32>) -> tensor<i32> {
    %0 = "jaxpp.task"(%arg0) {callee = @post0_r0, jaxpp.kind = "post", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<i32>) -> tensor<i32>
    %1 = "jaxpp.task"(%arg0) {callee = @post0_r1, jaxpp.kind = "post", jaxpp.rank = 1 : i64, jaxpp.stage = 0 : i64} : (tensor<i32>) -> tensor<i32>
    // expected-error @+1 {{'jaxpp.replicated' is read by something else than the return}}
    %2 = "jaxpp.replicated"(%0, %1) {jaxpp.ranks = [0, 1]} : (tensor<i32>, tensor<i32>) -> tensor<i32>
    %3 = "jaxpp.task"(%2) {callee = @post0_r0, jaxpp.kind = "post", jaxpp.rank = 0 : i64, jaxpp.stage = 1 : i64} : (tensor<i32>) -> tensor<i32>
    return %3 : tensor<i32>
  }
  func.func private @post0_r0(%arg0: tensor<i32>) -> tensor<i32> {
    %0 = stablehlo.negate %arg0 : tensor<i32>
    return %0 : tensor<i32>
  }
  func.func private @post0_r1(%arg0: tensor<i32>) -> tensor<i32> {
    %0 = stablehlo.negate %arg0 : tensor<i32>
    return %0 : tensor<i32>
  }
}

// -----

module @copies_of_another_type attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<i32>) -> tensor<f32> {
    %0 = "jaxpp.task"(%arg0) {callee = @post0_r0, jaxpp.kind = "post", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<i32>) -> tensor<f32>
    %1 = "jaxpp.task"(%arg0) {callee = @post0_r1, jaxpp.kind = "post", jaxpp.rank = 1 : i64, jaxpp.stage = 0 : i64} : (tensor<i32>) -> tensor<i32>
    // expected-error @+1 {{'jaxpp.replicated' operands differ in type from its result}}
    %2 = "jaxpp.replicated"(%0, %1) {jaxpp.ranks = [0, 1]} : (tensor<f32>, tensor<i32>) -> tensor<f32>
    return %2 : tensor<f32>
  }
  func.func private @post0_r0(%arg0: tensor<i32>) -> tensor<f32> {
    %0 = stablehlo.convert %arg0 : (tensor<i32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
  func.func private @post0_r1(%arg0: tensor<i32>) -> tensor<i32> {
    %0 = stablehlo.negate %arg0 : tensor<i32>
    return %0 : tensor<i32>
  }
}
