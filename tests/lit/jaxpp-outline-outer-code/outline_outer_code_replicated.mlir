// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-outline-outer-code)' | filecheck %s
// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-outline-outer-code{replicate-max-bytes=0})' | filecheck %s --check-prefix=OFF

// An optimizer's step count: count + 1 reads only an argument and is read
// after the loop on both ranks, so each rank computes its own copy; the
// result of @main is the jaxpp.replicated of both copies (rank 0's and rank
// 1's post task each return theirs). With JAXPP_MLIR_REPLICATE_MAX_BYTES=0 the return
// reads rank 0's copy alone and rank 1's task keeps its copy to itself.

// CHECK-LABEL: module @count_read_on_both_ranks
// CHECK:           }) {jaxpp.num_microbatches = 2 : i64, jaxpp.state_ranks = [0, 1]}
// CHECK-NEXT:      %[[POST0:.*]]:2 = "jaxpp.task"(%[[COUNT:.*]], %{{.*}}) {callee = @post0_r0, jaxpp.kind = "post", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<i32>, tensor<4xf32>) -> (tensor<i32>, tensor<4xf32>)
// CHECK-NEXT:      %[[POST1:.*]]:2 = "jaxpp.task"(%[[COUNT]], %{{.*}}) {callee = @post0_r1, jaxpp.kind = "post", jaxpp.rank = 1 : i64, jaxpp.stage = 0 : i64} : (tensor<i32>, tensor<4xf32>) -> (tensor<i32>, tensor<4xf32>)
// CHECK-NEXT:      %[[NEW:.*]] = "jaxpp.replicated"(%[[POST0]]#0, %[[POST1]]#0) {jaxpp.ranks = [0, 1]} : (tensor<i32>, tensor<i32>) -> tensor<i32>
// CHECK-NEXT:      return %[[POST0]]#1, %[[POST1]]#1, %[[NEW]] : tensor<4xf32>, tensor<4xf32>, tensor<i32>
// CHECK-LABEL:   func.func private @post0_r0(
// CHECK-NEXT:      stablehlo.constant dense<1>
// CHECK-NEXT:      %[[ADD0:.*]] = stablehlo.add
// CHECK:           return %[[ADD0]], %{{.*}} : tensor<i32>, tensor<4xf32>
// CHECK-LABEL:   func.func private @post0_r1(
// CHECK-NEXT:      stablehlo.constant dense<1>
// CHECK-NEXT:      %[[ADD1:.*]] = stablehlo.add
// CHECK:           return %[[ADD1]], %{{.*}} : tensor<i32>, tensor<4xf32>

// OFF-LABEL: module @count_read_on_both_ranks
// OFF:           }) {jaxpp.num_microbatches = 2 : i64, jaxpp.state_ranks = [0, 1]}
// OFF-NEXT:      %[[POST0:.*]]:2 = "jaxpp.task"({{.*}}) {callee = @post0_r0, {{.*}}} : (tensor<i32>, tensor<4xf32>) -> (tensor<i32>, tensor<4xf32>)
// OFF-NEXT:      %[[POST1:.*]] = "jaxpp.task"({{.*}}) {callee = @post0_r1, {{.*}}} : (tensor<i32>, tensor<4xf32>) -> tensor<4xf32>
// OFF-NEXT:      return %[[POST0]]#1, %[[POST1]], %[[POST0]]#0 : tensor<4xf32>, tensor<4xf32>, tensor<i32>
// OFF-NOT:       jaxpp.replicated
module @count_read_on_both_ranks attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<i32>, %arg1: tensor<4xf32>, %arg2: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<i32>) {
    %0:2 = "jaxpp.loop"(%arg1, %arg2) ({
    ^bb0(%arg3: tensor<i32>, %arg4: tensor<4xf32>, %arg5: tensor<4xf32>):
      %1 = "jaxpp.task"(%arg4) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
      %2 = "jaxpp.task"(%arg5) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
      "jaxpp.yield"(%1, %2) : (tensor<4xf32>, tensor<4xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64, jaxpp.state_ranks = [0, 1]} : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
    %c = stablehlo.constant dense<1> : tensor<i32>
    %3 = stablehlo.add %arg0, %c : tensor<i32>
    %4 = stablehlo.convert %3 : (tensor<i32>) -> tensor<f32>
    %5 = stablehlo.broadcast_in_dim %4, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %6 = stablehlo.multiply %0#0, %5 : tensor<4xf32>
    %7 = stablehlo.multiply %0#1, %5 : tensor<4xf32>
    return %6, %7, %3 : tensor<4xf32>, tensor<4xf32>, tensor<i32>
  }
  func.func private @stage0_fwd(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
  func.func private @stage1_fwd(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.sine %arg0 : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

// A value over the byte limit (512 float32 = 2048 bytes > 1024, the default):
// its elementwise op is still recomputed on both ranks that read it, but the
// return reads rank 0's copy only.

// CHECK-LABEL: module @large_value_read_on_both_ranks
// CHECK:           }) {jaxpp.num_microbatches = 2 : i64, jaxpp.state_ranks = [0, 1]}
// CHECK-NEXT:      %[[POST0:.*]]:2 = "jaxpp.task"({{.*}}) {callee = @post0_r0, {{.*}}} : (tensor<512xf32>, tensor<512xf32>) -> (tensor<512xf32>, tensor<512xf32>)
// CHECK-NEXT:      %[[POST1:.*]] = "jaxpp.task"({{.*}}) {callee = @post0_r1, {{.*}}} : (tensor<512xf32>, tensor<512xf32>) -> tensor<512xf32>
// CHECK-NEXT:      return %[[POST0]]#1, %[[POST1]], %[[POST0]]#0 : tensor<512xf32>, tensor<512xf32>, tensor<512xf32>
// CHECK-NOT:       jaxpp.replicated
module @large_value_read_on_both_ranks attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<512xf32>, %arg1: tensor<512xf32>, %arg2: tensor<512xf32>) -> (tensor<512xf32>, tensor<512xf32>, tensor<512xf32>) {
    %0:2 = "jaxpp.loop"(%arg1, %arg2) ({
    ^bb0(%arg3: tensor<i32>, %arg4: tensor<512xf32>, %arg5: tensor<512xf32>):
      %1 = "jaxpp.task"(%arg4) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64} : (tensor<512xf32>) -> tensor<512xf32>
      %2 = "jaxpp.task"(%arg5) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64} : (tensor<512xf32>) -> tensor<512xf32>
      "jaxpp.yield"(%1, %2) : (tensor<512xf32>, tensor<512xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64, jaxpp.state_ranks = [0, 1]} : (tensor<512xf32>, tensor<512xf32>) -> (tensor<512xf32>, tensor<512xf32>)
    %3 = stablehlo.negate %arg0 : tensor<512xf32>
    %6 = stablehlo.multiply %0#0, %3 : tensor<512xf32>
    %7 = stablehlo.multiply %0#1, %3 : tensor<512xf32>
    return %6, %7, %3 : tensor<512xf32>, tensor<512xf32>, tensor<512xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<512xf32>) -> tensor<512xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<512xf32>
    return %0 : tensor<512xf32>
  }
  func.func private @stage1_fwd(%arg0: tensor<512xf32>) -> tensor<512xf32> {
    %0 = stablehlo.sine %arg0 : tensor<512xf32>
    return %0 : tensor<512xf32>
  }
}
