// RUN: jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-outline-outer-code)' | filecheck %s

// The functions outlined from the code around the loop are plain StableHLO,
// like stage functions: no jaxpp attribute is left on their ops.

// CHECK-LABEL: func.func private @stage0_fwd(
// CHECK-NOT:     jaxpp.
// CHECK-LABEL: func.func private @pre0_r0() -> tensor<4x4xf32> {
// CHECK-NEXT:    %[[ZERO:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<4x4xf32>
// CHECK-NEXT:    return %[[ZERO]] : tensor<4x4xf32>
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func private @pre0_r1(%[[A:.*]]: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
// CHECK-NEXT:    %[[ZERO:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<4x4xf32>
// CHECK-NEXT:    %[[SQ:.*]] = stablehlo.multiply %[[A]], %[[A]] : tensor<4x4xf32>
// CHECK-NEXT:    return %[[ZERO]], %[[SQ]] : tensor<4x4xf32>, tensor<4x4xf32>
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func private @post0_r0(%[[G:.*]]: tensor<4x4xf32>, %[[W:.*]]: tensor<4x4xf32>) -> tensor<4x4xf32> {
// CHECK-NEXT:    %[[LR:.*]] = stablehlo.constant dense<1.000000e-01> : tensor<4x4xf32>
// CHECK-NEXT:    %[[STEP:.*]] = stablehlo.multiply %[[LR]], %[[G]] : tensor<4x4xf32>
// CHECK-NEXT:    %[[NEW:.*]] = stablehlo.subtract %[[W]], %[[STEP]] : tensor<4x4xf32>
// CHECK-NEXT:    return %[[NEW]] : tensor<4x4xf32>
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func private @post0_r1(%[[G:.*]]: tensor<4x4xf32>, %[[W:.*]]: tensor<4x4xf32>) -> tensor<4x4xf32> {
// CHECK-NEXT:    %[[LR:.*]] = stablehlo.constant dense<1.000000e-01> : tensor<4x4xf32>
// CHECK-NEXT:    %[[STEP:.*]] = stablehlo.multiply %[[LR]], %[[G]] : tensor<4x4xf32>
// CHECK-NEXT:    %[[NEW:.*]] = stablehlo.subtract %[[W]], %[[STEP]] : tensor<4x4xf32>
// CHECK-NEXT:    return %[[NEW]] : tensor<4x4xf32>
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func private @post1_r0(%[[A:.*]]: tensor<4x4xf32>, %[[B:.*]]: tensor<4x4xf32>) -> tensor<4x4xf32> {
// CHECK-NEXT:    %[[SUM:.*]] = stablehlo.add %[[A]], %[[B]] : tensor<4x4xf32>
// CHECK-NEXT:    return %[[SUM]] : tensor<4x4xf32>
// CHECK-NEXT:  }
// CHECK-NEXT: }
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
