// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-split-backward)' | filecheck %s

// What jaxpp-choose-stages prints for a two-stage value_and_grad under ZeroBubble. The input
// gradient of stage 1 (and the backward marker it goes through) is what stage
// 0 waits for: bwd_i. The weight gradient of stage 1 and the whole backward
// of stage 0 (which feeds no other stage) are bwd_w. Forward ops and the
// first backward marker (in the forward of stage 1) keep their kind.

// CHECK-LABEL: module @value_and_grad attributes {jaxpp.num_stages = 2 : i64, jaxpp.schedule = {kind = "ZeroBubble", num_stages = 2 : i64}}
// CHECK-NEXT:    func.func @main(
// CHECK-NEXT:      stablehlo.dot_general {{.*}} {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64}
// CHECK-NEXT:      stablehlo.tanh {{.*}} {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64}
// CHECK-NEXT:      stablehlo.custom_call @jaxpp.enter_stage({{.*}}jaxpp.kind = "fwd", jaxpp.stage = 0 : i64, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}
// CHECK-NEXT:      stablehlo.dot_general {{.*}} {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64}
// CHECK-NEXT:      stablehlo.custom_call @jaxpp.enter_stage({{.*}}jaxpp.kind = "fwd", jaxpp.stage = 1 : i64, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}
// CHECK-NEXT:      stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64}
// CHECK-NEXT:      stablehlo.multiply {{.*}} {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64}
// CHECK-NEXT:      stablehlo.reduce{{.*}} {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64}
// CHECK-NEXT:      stablehlo.add {{.*}} {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64}
// CHECK-NEXT:      stablehlo.custom_call @jaxpp.enter_stage({{.*}}jaxpp.kind = "fwd", jaxpp.stage = 1 : i64, mhlo.frontend_attributes = {jaxpp.direction = "bwd"}
// CHECK-NEXT:      %[[DX1:.*]] = stablehlo.dot_general {{.*}} {jaxpp.kind = "bwd_i", jaxpp.stage = 1 : i64}
// CHECK-NEXT:      %[[DW1:.*]] = stablehlo.dot_general {{.*}} {jaxpp.kind = "bwd_w", jaxpp.stage = 1 : i64}
// CHECK-NEXT:      stablehlo.custom_call @jaxpp.enter_stage(%[[DX1]]) {{.*}}jaxpp.kind = "bwd_i", jaxpp.stage = 1 : i64, mhlo.frontend_attributes = {jaxpp.direction = "bwd"}
// CHECK-NEXT:      stablehlo.constant {jaxpp.kind = "bwd_w", jaxpp.stage = 0 : i64}
// CHECK-NEXT:      stablehlo.multiply {{.*}} {jaxpp.kind = "bwd_w", jaxpp.stage = 0 : i64}
// CHECK-NEXT:      stablehlo.subtract {{.*}} {jaxpp.kind = "bwd_w", jaxpp.stage = 0 : i64}
// CHECK-NEXT:      stablehlo.multiply {{.*}} {jaxpp.kind = "bwd_w", jaxpp.stage = 0 : i64}
// CHECK-NEXT:      %[[DW0:.*]] = stablehlo.dot_general {{.*}} {jaxpp.kind = "bwd_w", jaxpp.stage = 0 : i64}
// CHECK-NEXT:      return {{.*}}, %[[DW0]], %[[DW1]] :
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @value_and_grad attributes {jaxpp.num_stages = 2 : i64, jaxpp.schedule = {kind = "ZeroBubble", num_stages = 2 : i64}} {
  func.func @main(%arg0: tensor<4x4xf32>, %arg1: tensor<4x4xf32>, %arg2: tensor<2x4xf32>) -> (tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>) {
    %0 = stablehlo.dot_general %arg2, %arg0, contracting_dims = [1] x [0] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %1 = stablehlo.tanh %0 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    %2 = stablehlo.custom_call @jaxpp.enter_stage(%1) {api_version = 4 : i32, backend_config = {}, jaxpp.kind = "fwd", jaxpp.stage = 0 : i64, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %3 = stablehlo.dot_general %2, %arg1, contracting_dims = [1] x [0] {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %4 = stablehlo.custom_call @jaxpp.enter_stage(%3) {api_version = 4 : i32, backend_config = {}, jaxpp.kind = "fwd", jaxpp.stage = 1 : i64, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %cst = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} dense<0.000000e+00> : tensor<f32>
    %5 = stablehlo.multiply %4, %4 {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<2x4xf32>
    %6 = stablehlo.reduce(%5 init: %cst) applies stablehlo.add across dimensions = [0, 1] {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<2x4xf32>, tensor<f32>) -> tensor<f32>
    %7 = stablehlo.add %4, %4 {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<2x4xf32>
    %8 = stablehlo.custom_call @jaxpp.enter_stage(%7) {api_version = 4 : i32, backend_config = {}, jaxpp.kind = "fwd", jaxpp.stage = 1 : i64, mhlo.frontend_attributes = {jaxpp.direction = "bwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %9 = stablehlo.dot_general %8, %arg1, contracting_dims = [1] x [1] {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %10 = stablehlo.dot_general %2, %8, contracting_dims = [0] x [0] {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %11 = stablehlo.custom_call @jaxpp.enter_stage(%9) {api_version = 4 : i32, backend_config = {}, jaxpp.kind = "bwd", jaxpp.stage = 1 : i64, mhlo.frontend_attributes = {jaxpp.direction = "bwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %cst_0 = stablehlo.constant {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} dense<1.000000e+00> : tensor<2x4xf32>
    %12 = stablehlo.multiply %1, %1 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    %13 = stablehlo.subtract %cst_0, %12 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    %14 = stablehlo.multiply %11, %13 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    %15 = stablehlo.dot_general %arg2, %14, contracting_dims = [0] x [0] {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    return %6, %15, %10 : tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>
  }
}

// -----

// A backward value that both parts read (%2) is computed in bwd_i.

// CHECK-LABEL: module @value_read_by_both_parts attributes {jaxpp.num_stages = 2 : i64, jaxpp.schedule = {kind = "ZeroBubble", num_stages = 2 : i64}}
// CHECK-NEXT:    func.func @main(%[[X:.*]]: tensor<2x4xf32>, %[[W:.*]]: tensor<4x4xf32>)
// CHECK-NEXT:      %[[TANH:.*]] = stablehlo.tanh %[[X]] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64}
// CHECK-NEXT:      %[[SIN:.*]] = stablehlo.sine %[[TANH]] {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64}
// CHECK-NEXT:      %[[G:.*]] = stablehlo.multiply %[[SIN]], %[[SIN]] {jaxpp.kind = "bwd_i", jaxpp.stage = 1 : i64}
// CHECK-NEXT:      %[[DX:.*]] = stablehlo.dot_general %[[G]], %[[W]], {{.*}} {jaxpp.kind = "bwd_i", jaxpp.stage = 1 : i64}
// CHECK-NEXT:      %[[DW:.*]] = stablehlo.dot_general %[[G]], %[[TANH]], {{.*}} {jaxpp.kind = "bwd_w", jaxpp.stage = 1 : i64}
// CHECK-NEXT:      %[[NEW:.*]] = stablehlo.add %[[DW]], %[[W]] {jaxpp.kind = "bwd_w", jaxpp.stage = 1 : i64}
// CHECK-NEXT:      %[[DX0:.*]] = stablehlo.cosine %[[DX]] {jaxpp.kind = "bwd_w", jaxpp.stage = 0 : i64}
// CHECK-NEXT:      return %[[DX0]], %[[NEW]] : tensor<2x4xf32>, tensor<4x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @value_read_by_both_parts attributes {jaxpp.num_stages = 2 : i64, jaxpp.schedule = {kind = "ZeroBubble", num_stages = 2 : i64}} {
  func.func @main(%arg0: tensor<2x4xf32>, %arg1: tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>) {
    %0 = stablehlo.tanh %arg0 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    %1 = stablehlo.sine %0 {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<2x4xf32>
    %2 = stablehlo.multiply %1, %1 {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : tensor<2x4xf32>
    %3 = stablehlo.dot_general %2, %arg1, contracting_dims = [1] x [1] {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %4 = stablehlo.dot_general %2, %0, contracting_dims = [0] x [0] {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %5 = stablehlo.add %4, %arg1 {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : tensor<4x4xf32>
    %6 = stablehlo.cosine %3 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    return %6, %5 : tensor<2x4xf32>, tensor<4x4xf32>
  }
}

// -----

// A schedule that does not split backwards (here Std1F1B), or none (a step without a
// microbatch loop): the module is left as it is.

// CHECK-LABEL: module @schedule_without_split attributes {jaxpp.num_stages = 1 : i64, jaxpp.schedule = {kind = "Std1F1B", num_stages = 1 : i64}}
// CHECK-NEXT:    func.func @main(%[[X:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[F:.*]] = stablehlo.tanh %[[X]] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64}
// CHECK-NEXT:      %[[B:.*]] = stablehlo.negate %[[F]] {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64}
// CHECK-NEXT:      return %[[B]]
module @schedule_without_split attributes {jaxpp.num_stages = 1 : i64, jaxpp.schedule = {kind = "Std1F1B", num_stages = 1 : i64}} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    %1 = stablehlo.negate %0 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    return %1 : tensor<2x4xf32>
  }
}

// -----

// CHECK-LABEL: module @no_schedule attributes {jaxpp.num_stages = 1 : i64}
// CHECK-NEXT:    func.func @main(%[[X:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[F:.*]] = stablehlo.tanh %[[X]] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64}
// CHECK-NEXT:      %[[B:.*]] = stablehlo.negate %[[F]] {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64}
// CHECK-NEXT:      return %[[B]]
module @no_schedule attributes {jaxpp.num_stages = 1 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    %1 = stablehlo.negate %0 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    return %1 : tensor<2x4xf32>
  }
}
