// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-split-accumulators)' | filecheck %s

// A tied weight: its gradient is the sum of a contribution of the backward of
// stage 2 and one of stage 0, accumulated on the accumulator the backward of
// stage 0 updates. Stage 2 gets its own accumulator (a new loop state starting
// from zero, updated in its backward); the two partial sums are added once,
// after the loop.

// CHECK-LABEL: module @tied_weight
// CHECK-NEXT:    func.func @main(%[[ACC0:.*]]: tensor<4x4xf32>, %[[W:.*]]: tensor<4x4xf32>) -> tensor<4x4xf32> {
// CHECK-NEXT:      %[[ZERO:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<4x4xf32>
// CHECK-NEXT:      %[[LOOP:.*]]:2 = "jaxpp.loop"(%[[ACC0]], %[[ZERO]]) ({
// CHECK-NEXT:      ^bb0(%[[I:.*]]: tensor<i32>, %[[S0:.*]]: tensor<4x4xf32>, %[[S1:.*]]: tensor<4x4xf32>):
// CHECK-NEXT:        %[[A:.*]] = stablehlo.sine %[[W]] {jaxpp.kind = "bwd", jaxpp.stage = 2 : i64}
// CHECK-NEXT:        %[[B:.*]] = stablehlo.cosine %[[W]] {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64}
// CHECK-NEXT:        %[[U0:.*]] = stablehlo.add %[[S0]], %[[B]] {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64}
// CHECK-NEXT:        %[[U1:.*]] = stablehlo.add %[[S1]], %[[A]] {jaxpp.kind = "bwd", jaxpp.stage = 2 : i64}
// CHECK-NEXT:        "jaxpp.yield"(%[[U0]], %[[U1]])
// CHECK-NEXT:      }) {jaxpp.num_microbatches = 4 : i64}
// CHECK-NEXT:      %[[SUM:.*]] = stablehlo.add %[[LOOP]]#0, %[[LOOP]]#1 : tensor<4x4xf32>
// CHECK-NEXT:      return %[[SUM]] : tensor<4x4xf32>
// CHECK-NEXT:    }
module @tied_weight attributes {jaxpp.num_stages = 3 : i64} {
  func.func @main(%arg0: tensor<4x4xf32>, %arg1: tensor<4x4xf32>) -> tensor<4x4xf32> {
    %0 = "jaxpp.loop"(%arg0) ({
    ^bb0(%arg2: tensor<i32>, %arg3: tensor<4x4xf32>):
      %1 = stablehlo.sine %arg1 {jaxpp.kind = "bwd", jaxpp.stage = 2 : i64} : tensor<4x4xf32>
      %2 = stablehlo.cosine %arg1 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4x4xf32>
      %3 = stablehlo.add %1, %2 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4x4xf32>
      %4 = stablehlo.add %arg3, %3 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4x4xf32>
      "jaxpp.yield"(%4) : (tensor<4x4xf32>) -> ()
    }) {jaxpp.num_microbatches = 4 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    return %0 : tensor<4x4xf32>
  }
}

// -----

// Three contributions, two from stage 1 (summed left to right there) and one
// from stage 0, where the update runs; the accumulator's start value stays
// with stage 0's partial sum.

// CHECK-LABEL: module @three_contributions
// CHECK:           %[[A:.*]] = stablehlo.sine {{.*}}jaxpp.stage = 1
// CHECK-NEXT:      %[[B:.*]] = stablehlo.cosine {{.*}}jaxpp.stage = 0
// CHECK-NEXT:      %[[C:.*]] = stablehlo.tanh {{.*}}jaxpp.stage = 1
// CHECK-NEXT:      %[[U0:.*]] = stablehlo.add %{{.*}}, %[[B]] {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64}
// CHECK-NEXT:      %[[P1:.*]] = stablehlo.add %{{.*}}, %[[A]] {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64}
// CHECK-NEXT:      %[[U1:.*]] = stablehlo.add %[[P1]], %[[C]] {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64}
// CHECK-NEXT:      "jaxpp.yield"(%[[U0]], %[[U1]])
module @three_contributions attributes {jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "jaxpp.loop"(%arg0) ({
    ^bb0(%arg2: tensor<i32>, %arg3: tensor<4xf32>):
      %1 = stablehlo.sine %arg1 {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : tensor<4xf32>
      %2 = stablehlo.cosine %arg1 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4xf32>
      %3 = stablehlo.tanh %arg1 {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : tensor<4xf32>
      %4 = stablehlo.add %1, %2 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4xf32>
      %5 = stablehlo.add %4, %3 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4xf32>
      %6 = stablehlo.add %arg3, %5 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4xf32>
      "jaxpp.yield"(%6) : (tensor<4xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

// Left alone: the sum of stage 1's and stage 0's contributions is also read by
// the multiply, so it cannot be regrouped; the second accumulator's
// contributions all come from stage 1.

// CHECK-LABEL: module @nothing_to_split
// CHECK-NEXT:    func.func @main
// CHECK-NEXT:      %[[LOOP:.*]]:2 = "jaxpp.loop"(%arg0, %arg0) ({
// CHECK-NEXT:      ^bb0(
// CHECK-NEXT:        stablehlo.sine
// CHECK-NEXT:        stablehlo.cosine
// CHECK-NEXT:        stablehlo.add
// CHECK-NEXT:        stablehlo.add
// CHECK-NEXT:        stablehlo.multiply
// CHECK-NEXT:        stablehlo.add
// CHECK-NEXT:        "jaxpp.yield"
// CHECK-NEXT:      })
// CHECK-NEXT:      return %[[LOOP]]#0, %[[LOOP]]#1
module @nothing_to_split attributes {jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
    %0:2 = "jaxpp.loop"(%arg0, %arg0) ({
    ^bb0(%arg2: tensor<i32>, %arg3: tensor<4xf32>, %arg4: tensor<4xf32>):
      %1 = stablehlo.sine %arg1 {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : tensor<4xf32>
      %2 = stablehlo.cosine %arg1 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4xf32>
      %3 = stablehlo.add %1, %2 {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : tensor<4xf32>
      %4 = stablehlo.add %arg3, %3 {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : tensor<4xf32>
      %5 = stablehlo.multiply %3, %3 {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : tensor<4xf32>
      %6 = stablehlo.add %arg4, %5 {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : tensor<4xf32>
      "jaxpp.yield"(%4, %6) : (tensor<4xf32>, tensor<4xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
    return %0#0, %0#1 : tensor<4xf32>, tensor<4xf32>
  }
}
