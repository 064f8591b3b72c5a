// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-verify-program)'

module @chunk_of_a_task_result attributes {jaxpp.num_ranks = 1 : i64, jaxpp.num_stages = 1 : i64} {
  func.func @main(%arg0: tensor<4x3xf32>) -> tensor<2x3xf32> {
    %0 = "jaxpp.task"(%arg0) {callee = @f, jaxpp.kind = "pre", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    // expected-error @+1 {{'jaxpp.chunk' must read one argument of @main}}
    %1 = "jaxpp.chunk"(%0) {jaxpp.rank = 0 : i64, jaxpp.rows = 2 : i64, jaxpp.start = 0 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
    return %1 : tensor<2x3xf32>
  }
  func.func private @f(%arg0: tensor<4x3xf32>) -> tensor<4x3xf32> {
    return %arg0 : tensor<4x3xf32>
  }
}

// -----

module @chunk_without_a_rank attributes {jaxpp.num_ranks = 1 : i64, jaxpp.num_stages = 1 : i64} {
  func.func @main(%arg0: tensor<4x3xf32>) -> tensor<2x3xf32> {
    // expected-error @+1 {{'jaxpp.chunk' has no jaxpp.rank attribute}}
    %0 = "jaxpp.chunk"(%arg0) {jaxpp.rows = 2 : i64, jaxpp.start = 0 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }
}

// -----

module @rows_past_the_end attributes {jaxpp.num_ranks = 1 : i64, jaxpp.num_stages = 1 : i64} {
  func.func @main(%arg0: tensor<4x3xf32>) -> tensor<2x3xf32> {
    // expected-error @+1 {{'jaxpp.chunk' rows [3, 5) are not rows of the argument (tensor<4x3xf32>)}}
    %0 = "jaxpp.chunk"(%arg0) {jaxpp.rank = 0 : i64, jaxpp.rows = 2 : i64, jaxpp.start = 3 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }
}

// -----

module @type_not_of_the_rows attributes {jaxpp.num_ranks = 1 : i64, jaxpp.num_stages = 1 : i64} {
  func.func @main(%arg0: tensor<4x3xf32>) -> tensor<3x3xf32> {
    // expected-error @+1 {{'jaxpp.chunk' result type tensor<3x3xf32> is not rows of tensor<4x3xf32>}}
    %0 = "jaxpp.chunk"(%arg0) {jaxpp.rank = 0 : i64, jaxpp.rows = 2 : i64, jaxpp.start = 0 : i64} : (tensor<4x3xf32>) -> tensor<3x3xf32>
    return %0 : tensor<3x3xf32>
  }
}

// -----

module @overlapping_chunks attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<4x3xf32>) -> (tensor<3x3xf32>, tensor<2x3xf32>) {
    %0 = "jaxpp.chunk"(%arg0) {jaxpp.rank = 0 : i64, jaxpp.rows = 3 : i64, jaxpp.start = 0 : i64} : (tensor<4x3xf32>) -> tensor<3x3xf32>
    // expected-error @+1 {{'jaxpp.chunk' rows [2, 4) overlap rows [0, 3) of another chunk of the same argument (at}}
    %1 = "jaxpp.chunk"(%arg0) {jaxpp.rank = 1 : i64, jaxpp.rows = 2 : i64, jaxpp.start = 2 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
    return %0, %1 : tensor<3x3xf32>, tensor<2x3xf32>
  }
}

// -----

module @chunk_read_on_another_rank attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<4x3xf32>) -> tensor<2x3xf32> {
    %0 = "jaxpp.chunk"(%arg0) {jaxpp.rank = 0 : i64, jaxpp.rows = 2 : i64, jaxpp.start = 0 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
    // expected-error @+1 {{operand defined on rank 0 is used on rank 1 without a transfer}}
    %1 = "jaxpp.task"(%0) {callee = @f, jaxpp.kind = "post", jaxpp.rank = 1 : i64, jaxpp.stage = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return %1 : tensor<2x3xf32>
  }
  func.func private @f(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
    return %arg0 : tensor<2x3xf32>
  }
}

// -----

module @assemble_of_an_argument attributes {jaxpp.num_ranks = 1 : i64, jaxpp.num_stages = 1 : i64} {
  func.func @main(%arg0: tensor<2x3xf32>, %arg1: tensor<2x3xf32>) -> tensor<4x3xf32> {
    // expected-error @+1 {{'jaxpp.assemble' operand tensor<2x3xf32> is not a value held on a rank}}
    %0 = "jaxpp.assemble"(%arg0, %arg1) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
    return %0 : tensor<4x3xf32>
  }
}

// -----

module @assemble_missing_rows attributes {jaxpp.num_ranks = 1 : i64, jaxpp.num_stages = 1 : i64} {
  func.func @main(%arg0: tensor<4x3xf32>) -> tensor<5x3xf32> {
    %0 = "jaxpp.chunk"(%arg0) {jaxpp.rank = 0 : i64, jaxpp.rows = 2 : i64, jaxpp.start = 0 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
    %1 = "jaxpp.chunk"(%arg0) {jaxpp.rank = 0 : i64, jaxpp.rows = 2 : i64, jaxpp.start = 2 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
    // expected-error @+1 {{'jaxpp.assemble' operands hold 4 rows but its result tensor<5x3xf32> has 5}}
    %2 = "jaxpp.assemble"(%0, %1) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<5x3xf32>
    return %2 : tensor<5x3xf32>
  }
}

// -----

module @assemble_read_by_a_task attributes {jaxpp.num_ranks = 1 : i64, jaxpp.num_stages = 1 : i64} {
  func.func @main(%arg0: tensor<4x3xf32>) -> tensor<4x3xf32> {
    %0 = "jaxpp.chunk"(%arg0) {jaxpp.rank = 0 : i64, jaxpp.rows = 2 : i64, jaxpp.start = 0 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
    %1 = "jaxpp.chunk"(%arg0) {jaxpp.rank = 0 : i64, jaxpp.rows = 2 : i64, jaxpp.start = 2 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
    // expected-error @+1 {{'jaxpp.assemble' is read by something else than the return}}
    %2 = "jaxpp.assemble"(%0, %1) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
    %3 = "jaxpp.task"(%2) {callee = @f, jaxpp.kind = "post", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    return %3 : tensor<4x3xf32>
  }
  func.func private @f(%arg0: tensor<4x3xf32>) -> tensor<4x3xf32> {
    return %arg0 : tensor<4x3xf32>
  }
}
