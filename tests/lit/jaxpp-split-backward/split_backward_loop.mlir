// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-split-backward)' | filecheck %s

// With a microbatch loop the pass splits the ops of the loop body (what
// jaxpp-choose-stages prints after jaxpp-normalize-loop). The accumulations
// of the weight gradients are read only by jaxpp.yield: bwd_w, like the
// weight gradients they add. The input gradient of stage 1 and the backward
// marker it goes through feed stage 0: bwd_i. Stage 0's whole backward feeds
// only its accumulator: bwd_w. The forward, the first backward marker (kind
// fwd) and the constant 0 of @main keep their tags (none for @main's).

// CHECK-LABEL: module @loop_accumulators
// CHECK-NEXT:    func.func @main(%[[W0:.*]]: tensor<4x4xf32>, %[[W1:.*]]: tensor<4x4xf32>, %[[XS:.*]]: tensor<4x2x4xf32>)
// CHECK-NEXT:      %[[ZEROS:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<4x4xf32>
// CHECK-NEXT:      %[[LOOP:.*]]:2 = "jaxpp.loop"(%[[ZEROS]], %[[ZEROS]]) ({
// CHECK-NEXT:      ^bb0(%[[I:.*]]: tensor<i32>, %[[ACC0:.*]]: tensor<4x4xf32>, %[[ACC1:.*]]: tensor<4x4xf32>):
// CHECK-NEXT:        %[[C0:.*]] = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} dense<0> : tensor<i32>
// CHECK-NEXT:        %[[SLICE:.*]] = stablehlo.dynamic_slice %[[XS]], %[[I]], %[[C0]], %[[C0]], sizes = [1, 2, 4] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64}
// CHECK-NEXT:        %[[X:.*]] = stablehlo.reshape %[[SLICE]] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64}
// CHECK-NEXT:        %[[H0:.*]] = stablehlo.dot_general %[[X]], %[[W0]], contracting_dims = [1] x [0] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64}
// CHECK-NEXT:        %[[M0:.*]] = stablehlo.custom_call @jaxpp.enter_stage(%[[H0]]) {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}}
// CHECK-NEXT:        %[[H1:.*]] = stablehlo.dot_general %[[M0]], %[[W1]], contracting_dims = [1] x [0] {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64}
// CHECK-NEXT:        %[[M1:.*]] = stablehlo.custom_call @jaxpp.enter_stage(%[[H1]]) {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}}
// CHECK-NEXT:        %[[SEED:.*]] = stablehlo.custom_call @jaxpp.enter_stage(%[[M1]]) {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64, mhlo.frontend_attributes = {jaxpp.direction = "bwd"}}
// CHECK-NEXT:        %[[DW1:.*]] = stablehlo.dot_general %[[M0]], %[[SEED]], contracting_dims = [0] x [0] {jaxpp.kind = "bwd_w", jaxpp.stage = 1 : i64}
// CHECK-NEXT:        %[[DX1:.*]] = stablehlo.dot_general %[[SEED]], %[[W1]], contracting_dims = [1] x [1] {jaxpp.kind = "bwd_i", jaxpp.stage = 1 : i64}
// CHECK-NEXT:        %[[G0:.*]] = stablehlo.custom_call @jaxpp.enter_stage(%[[DX1]]) {jaxpp.kind = "bwd_i", jaxpp.stage = 1 : i64, mhlo.frontend_attributes = {jaxpp.direction = "bwd"}}
// CHECK-NEXT:        %[[DW0:.*]] = stablehlo.dot_general %[[X]], %[[G0]], contracting_dims = [0] x [0] {jaxpp.kind = "bwd_w", jaxpp.stage = 0 : i64}
// CHECK-NEXT:        %[[NEXT0:.*]] = stablehlo.add %[[ACC0]], %[[DW0]] {jaxpp.kind = "bwd_w", jaxpp.stage = 0 : i64}
// CHECK-NEXT:        %[[NEXT1:.*]] = stablehlo.add %[[ACC1]], %[[DW1]] {jaxpp.kind = "bwd_w", jaxpp.stage = 1 : i64}
// CHECK-NEXT:        "jaxpp.yield"(%[[NEXT0]], %[[NEXT1]])
// CHECK-NEXT:      }) {jaxpp.num_microbatches = 4 : i64}
// CHECK-NEXT:      return %[[LOOP]]#0, %[[LOOP]]#1
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @loop_accumulators attributes {jaxpp.num_stages = 2 : i64, jaxpp.schedule = {kind = "ZeroBubble", num_stages = 2 : i64}} {
  func.func @main(%arg0: tensor<4x4xf32>, %arg1: tensor<4x4xf32>, %arg2: tensor<4x2x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<4x4xf32>
    %0:2 = "jaxpp.loop"(%cst, %cst) ({
    ^bb0(%arg3: tensor<i32>, %arg4: tensor<4x4xf32>, %arg5: tensor<4x4xf32>):
      %c = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} dense<0> : tensor<i32>
      %1 = stablehlo.dynamic_slice %arg2, %arg3, %c, %c, sizes = [1, 2, 4] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<4x2x4xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x4xf32>
      %2 = stablehlo.reshape %1 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<1x2x4xf32>) -> tensor<2x4xf32>
      %3 = stablehlo.dot_general %2, %arg0, contracting_dims = [1] x [0] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
      %4 = stablehlo.custom_call @jaxpp.enter_stage(%3) {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
      %5 = stablehlo.dot_general %4, %arg1, contracting_dims = [1] x [0] {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
      %6 = stablehlo.custom_call @jaxpp.enter_stage(%5) {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
      %7 = stablehlo.custom_call @jaxpp.enter_stage(%6) {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64, mhlo.frontend_attributes = {jaxpp.direction = "bwd"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
      %8 = stablehlo.dot_general %4, %7, contracting_dims = [0] x [0] {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
      %9 = stablehlo.dot_general %7, %arg1, contracting_dims = [1] x [1] {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
      %10 = stablehlo.custom_call @jaxpp.enter_stage(%9) {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64, mhlo.frontend_attributes = {jaxpp.direction = "bwd"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
      %11 = stablehlo.dot_general %2, %10, contracting_dims = [0] x [0] {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
      %12 = stablehlo.add %arg4, %11 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4x4xf32>
      %13 = stablehlo.add %arg5, %8 {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : tensor<4x4xf32>
      "jaxpp.yield"(%12, %13) : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
    }) {jaxpp.num_microbatches = 4 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>)
    return %0#0, %0#1 : tensor<4x4xf32>, tensor<4x4xf32>
  }
}

// -----

// Without a backward (a forward-only step) there is nothing to split and the
// module is unchanged.

// CHECK-LABEL: module @forward_only attributes {jaxpp.num_stages = 2 : i64, jaxpp.schedule = {kind = "ZeroBubble", num_stages = 2 : i64}}
// CHECK-NEXT:    func.func @main(%[[X:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[A:.*]] = stablehlo.tanh %[[X]] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
// CHECK-NEXT:      %[[M0:.*]] = stablehlo.custom_call @jaxpp.enter_stage(%[[A]]) {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:      %[[B:.*]] = stablehlo.sine %[[M0]] {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<2x4xf32>
// CHECK-NEXT:      %[[M1:.*]] = stablehlo.custom_call @jaxpp.enter_stage(%[[B]]) {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:      return %[[M1]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @forward_only attributes {jaxpp.num_stages = 2 : i64, jaxpp.schedule = {kind = "ZeroBubble", num_stages = 2 : i64}} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    %1 = stablehlo.custom_call @jaxpp.enter_stage(%0) {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %2 = stablehlo.sine %1 {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<2x4xf32>
    %3 = stablehlo.custom_call @jaxpp.enter_stage(%2) {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %3 : tensor<2x4xf32>
  }
}
