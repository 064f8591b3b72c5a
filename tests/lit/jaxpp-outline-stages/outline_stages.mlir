// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-outline-stages)' | filecheck %s

// Inputs are what jaxpp-assign-stages (and jaxpp-split-backward for the last
// case) print for these modules.

// Markers are erased; each stage becomes a private function called by one
// jaxpp.task, in stage order, whose arguments are the values it reads from
// outside and whose results are the values read after it.

// CHECK-LABEL: module @forward_chain attributes {jaxpp.num_stages = 2 : i64}
// CHECK-NEXT:    func.func @main(%[[X:.*]]: tensor<2x4xf32>, %[[W:.*]]: tensor<4x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[T0:.*]] = "jaxpp.task"(%[[X]], %[[W]]) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:      %[[T1:.*]] = "jaxpp.task"(%[[T0]]) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:      return %[[T1]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage0_fwd(%[[S0X:.*]]: tensor<2x4xf32>, %[[S0W:.*]]: tensor<4x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[DOT:.*]] = stablehlo.dot_general %[[S0X]], %[[S0W]], contracting_dims = [1] x [0] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:      return %[[DOT]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage1_fwd(%[[S1X:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[TANH:.*]] = stablehlo.tanh %[[S1X]] : tensor<2x4xf32>
// CHECK-NEXT:      return %[[TANH]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @forward_chain attributes {jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>, %arg1: tensor<4x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %1 = stablehlo.custom_call @jaxpp.enter_stage(%0) {api_version = 4 : i32, backend_config = {}, jaxpp.kind = "fwd", jaxpp.stage = 0 : i64, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %2 = stablehlo.tanh %1 {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<2x4xf32>
    %3 = stablehlo.custom_call @jaxpp.enter_stage(%2) {api_version = 4 : i32, backend_config = {}, jaxpp.kind = "fwd", jaxpp.stage = 1 : i64, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %3 : tensor<2x4xf32>
  }
}

// -----

// The constant 2.0 and its broadcast are read by both stages: each stage
// function gets its own copy and nothing is passed for them. The constant 0.5
// is returned by @main: it is computed once, in the stage it was assigned to.

// CHECK-LABEL: module @constants_copied_into_each_stage
// CHECK-NEXT:    func.func @main(%[[X:.*]]: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<f32>) {
// CHECK-NEXT:      %[[T0:.*]]:2 = "jaxpp.task"(%[[X]]) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<2x4xf32>) -> (tensor<f32>, tensor<2x4xf32>)
// CHECK-NEXT:      %[[T1:.*]] = "jaxpp.task"(%[[T0]]#1) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:      return %[[T1]], %[[T0]]#0 : tensor<2x4xf32>, tensor<f32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage0_fwd(%[[S0X:.*]]: tensor<2x4xf32>) -> (tensor<f32>, tensor<2x4xf32>) {
// CHECK-NEXT:      %[[TWO0:.*]] = stablehlo.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT:      %[[BTWO0:.*]] = stablehlo.broadcast_in_dim %[[TWO0]], dims = [] : (tensor<f32>) -> tensor<2x4xf32>
// CHECK-NEXT:      %[[HALF:.*]] = stablehlo.constant dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT:      %[[MUL:.*]] = stablehlo.multiply %[[S0X]], %[[BTWO0]] : tensor<2x4xf32>
// CHECK-NEXT:      return %[[HALF]], %[[MUL]] : tensor<f32>, tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage1_fwd(%[[S1X:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[TWO1:.*]] = stablehlo.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT:      %[[BTWO1:.*]] = stablehlo.broadcast_in_dim %[[TWO1]], dims = [] : (tensor<f32>) -> tensor<2x4xf32>
// CHECK-NEXT:      %[[ADD:.*]] = stablehlo.add %[[S1X]], %[[BTWO1]] : tensor<2x4xf32>
// CHECK-NEXT:      return %[[ADD]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @constants_copied_into_each_stage attributes {jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<f32>) {
    %cst = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} dense<2.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<f32>) -> tensor<2x4xf32>
    %cst_0 = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} dense<5.000000e-01> : tensor<f32>
    %1 = stablehlo.multiply %arg0, %0 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    %2 = stablehlo.custom_call @jaxpp.enter_stage(%1) {api_version = 4 : i32, backend_config = {}, jaxpp.kind = "fwd", jaxpp.stage = 0 : i64, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %3 = stablehlo.add %2, %0 {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<2x4xf32>
    %4 = stablehlo.custom_call @jaxpp.enter_stage(%3) {api_version = 4 : i32, backend_config = {}, jaxpp.kind = "fwd", jaxpp.stage = 1 : i64, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %4, %cst_0 : tensor<2x4xf32>, tensor<f32>
  }
}

// -----

// Both leaves of a two-leaf marker cross from stage 0 to stage 1 (two
// results, two arguments); the sine of %arg0 goes with its user, in stage 1,
// and @main returns its argument %arg1 directly.

// CHECK-LABEL: module @several_values_cross_one_boundary
// CHECK-NEXT:    func.func @main(%[[X:.*]]: tensor<2x4xf32>, %[[W:.*]]: tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>) {
// CHECK-NEXT:      %[[T0:.*]]:2 = "jaxpp.task"(%[[X]], %[[W]]) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>)
// CHECK-NEXT:      %[[T1:.*]] = "jaxpp.task"(%[[X]], %[[T0]]#0, %[[T0]]#1) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:      return %[[T1]], %[[W]] : tensor<2x4xf32>, tensor<4x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage0_fwd(%[[S0X:.*]]: tensor<2x4xf32>, %[[S0W:.*]]: tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>) {
// CHECK-NEXT:      %[[TANH:.*]] = stablehlo.tanh %[[S0X]] : tensor<2x4xf32>
// CHECK-NEXT:      %[[COS:.*]] = stablehlo.cosine %[[S0W]] : tensor<4x4xf32>
// CHECK-NEXT:      return %[[TANH]], %[[COS]] : tensor<2x4xf32>, tensor<4x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage1_fwd(%[[S1X:.*]]: tensor<2x4xf32>, %[[S1A:.*]]: tensor<2x4xf32>, %[[S1B:.*]]: tensor<4x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[SIN:.*]] = stablehlo.sine %[[S1X]] : tensor<2x4xf32>
// CHECK-NEXT:      %[[DOT:.*]] = stablehlo.dot_general %[[S1A]], %[[S1B]], contracting_dims = [1] x [0]
// CHECK-NEXT:      %[[ADD:.*]] = stablehlo.add %[[DOT]], %[[SIN]] : tensor<2x4xf32>
// CHECK-NEXT:      return %[[ADD]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @several_values_cross_one_boundary attributes {jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>, %arg1: tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>) {
    %0 = stablehlo.tanh %arg0 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    %1 = stablehlo.sine %arg0 {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<2x4xf32>
    %2 = stablehlo.cosine %arg1 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<4x4xf32>
    %3:2 = stablehlo.custom_call @jaxpp.enter_stage(%0, %2) {api_version = 4 : i32, backend_config = {}, jaxpp.kind = "fwd", jaxpp.stage = 0 : i64, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, operand_tuple_indices = []>, #stablehlo.output_operand_alias<output_tuple_indices = [1], operand_index = 1, operand_tuple_indices = []>]} : (tensor<2x4xf32>, tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>)
    %4 = stablehlo.dot_general %3#0, %3#1, contracting_dims = [1] x [0] {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %5 = stablehlo.add %4, %1 {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<2x4xf32>
    %6 = stablehlo.custom_call @jaxpp.enter_stage(%5) {api_version = 4 : i32, backend_config = {}, jaxpp.kind = "fwd", jaxpp.stage = 1 : i64, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %6, %arg1 : tensor<2x4xf32>, tensor<4x4xf32>
  }
}

// -----

// Forward and backward: tasks in the order stage0_fwd, stage1_fwd,
// stage1_bwd, stage0_bwd. The forward activation of stage 0 is
// read by three tasks; each function returns only what others read.

// CHECK-LABEL: module @value_and_grad attributes {jaxpp.num_stages = 2 : i64}
// CHECK-NEXT:    func.func @main(%[[W0:.*]]: tensor<4x4xf32>, %[[W1:.*]]: tensor<4x4xf32>, %[[X:.*]]: tensor<2x4xf32>) -> (tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>) {
// CHECK-NEXT:      %[[T0:.*]] = "jaxpp.task"(%[[X]], %[[W0]]) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:      %[[T1:.*]]:2 = "jaxpp.task"(%[[T0]], %[[W1]]) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> (tensor<f32>, tensor<2x4xf32>)
// CHECK-NEXT:      %[[B1:.*]]:2 = "jaxpp.task"(%[[T1]]#1, %[[W1]], %[[T0]]) {callee = @stage1_bwd, jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>)
// CHECK-NEXT:      %[[B0:.*]] = "jaxpp.task"(%[[T0]], %[[B1]]#0, %[[X]]) {callee = @stage0_bwd, jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT:      return %[[T1]]#0, %[[B0]], %[[B1]]#1 : tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage0_fwd(%[[A0:.*]]: tensor<2x4xf32>, %[[A1:.*]]: tensor<4x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[DOT0:.*]] = stablehlo.dot_general %[[A0]], %[[A1]], contracting_dims = [1] x [0]
// CHECK-NEXT:      %[[TANH:.*]] = stablehlo.tanh %[[DOT0]] : tensor<2x4xf32>
// CHECK-NEXT:      return %[[TANH]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage1_fwd(%[[A0:.*]]: tensor<2x4xf32>, %[[A1:.*]]: tensor<4x4xf32>) -> (tensor<f32>, tensor<2x4xf32>) {
// CHECK-NEXT:      %[[ZERO:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:      %[[DOT1:.*]] = stablehlo.dot_general %[[A0]], %[[A1]], contracting_dims = [1] x [0]
// CHECK-NEXT:      %[[SQ:.*]] = stablehlo.multiply %[[DOT1]], %[[DOT1]] : tensor<2x4xf32>
// CHECK-NEXT:      %[[LOSS:.*]] = stablehlo.reduce(%[[SQ]] init: %[[ZERO]]) applies stablehlo.add across dimensions = [0, 1]
// CHECK-NEXT:      %[[SEED:.*]] = stablehlo.add %[[DOT1]], %[[DOT1]] : tensor<2x4xf32>
// CHECK-NEXT:      return %[[LOSS]], %[[SEED]] : tensor<f32>, tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage1_bwd(%[[A0:.*]]: tensor<2x4xf32>, %[[A1:.*]]: tensor<4x4xf32>, %[[A2:.*]]: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>) {
// CHECK-NEXT:      %[[DX:.*]] = stablehlo.dot_general %[[A0]], %[[A1]], contracting_dims = [1] x [1]
// CHECK-NEXT:      %[[DW1:.*]] = stablehlo.dot_general %[[A2]], %[[A0]], contracting_dims = [0] x [0]
// CHECK-NEXT:      return %[[DX]], %[[DW1]] : tensor<2x4xf32>, tensor<4x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage0_bwd(%[[A0:.*]]: tensor<2x4xf32>, %[[A1:.*]]: tensor<2x4xf32>, %[[A2:.*]]: tensor<2x4xf32>) -> tensor<4x4xf32> {
// CHECK-NEXT:      %[[ONE:.*]] = stablehlo.constant dense<1.000000e+00> : tensor<2x4xf32>
// CHECK-NEXT:      %[[SQ0:.*]] = stablehlo.multiply %[[A0]], %[[A0]] : tensor<2x4xf32>
// CHECK-NEXT:      %[[DTANH:.*]] = stablehlo.subtract %[[ONE]], %[[SQ0]] : tensor<2x4xf32>
// CHECK-NEXT:      %[[G:.*]] = stablehlo.multiply %[[A1]], %[[DTANH]] : tensor<2x4xf32>
// CHECK-NEXT:      %[[DW0:.*]] = stablehlo.dot_general %[[A2]], %[[G]], contracting_dims = [0] x [0]
// CHECK-NEXT:      return %[[DW0]] : tensor<4x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @value_and_grad attributes {jaxpp.num_stages = 2 : i64} {
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

// A skip connection: stage 2 reads the result of stage 0 directly.

// CHECK-LABEL: module @skip_connection_over_stage attributes {jaxpp.num_stages = 3 : i64}
// CHECK-NEXT:    func.func @main(%[[X:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[T0:.*]] = "jaxpp.task"(%[[X]]) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.stage = 0 : i64}
// CHECK-NEXT:      %[[T1:.*]] = "jaxpp.task"(%[[T0]]) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.stage = 1 : i64}
// CHECK-NEXT:      %[[T2:.*]] = "jaxpp.task"(%[[T1]], %[[T0]]) {callee = @stage2_fwd, jaxpp.kind = "fwd", jaxpp.stage = 2 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:      return %[[T2]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage0_fwd(%[[A0:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[TANH:.*]] = stablehlo.tanh %[[A0]] : tensor<2x4xf32>
// CHECK-NEXT:      return %[[TANH]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage1_fwd(%[[A0:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[SIN:.*]] = stablehlo.sine %[[A0]] : tensor<2x4xf32>
// CHECK-NEXT:      return %[[SIN]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage2_fwd(%[[A0:.*]]: tensor<2x4xf32>, %[[A1:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[ADD:.*]] = stablehlo.add %[[A0]], %[[A1]] : tensor<2x4xf32>
// CHECK-NEXT:      return %[[ADD]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @skip_connection_over_stage attributes {jaxpp.num_stages = 3 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    %1 = stablehlo.custom_call @jaxpp.enter_stage(%0) {api_version = 4 : i32, backend_config = {}, jaxpp.kind = "fwd", jaxpp.stage = 0 : i64, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %2 = stablehlo.sine %1 {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<2x4xf32>
    %3 = stablehlo.custom_call @jaxpp.enter_stage(%2) {api_version = 4 : i32, backend_config = {}, jaxpp.kind = "fwd", jaxpp.stage = 1 : i64, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %4 = stablehlo.add %3, %0 {jaxpp.kind = "fwd", jaxpp.stage = 2 : i64} : tensor<2x4xf32>
    %5 = stablehlo.custom_call @jaxpp.enter_stage(%4) {api_version = 4 : i32, backend_config = {}, jaxpp.kind = "fwd", jaxpp.stage = 2 : i64, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %5 : tensor<2x4xf32>
  }
}

// -----

// A split backward (jaxpp-split-backward): each stage's bwd_i and bwd_w get
// their own function, bwd_i first; the value both read is computed in bwd_i
// and passed on.

// CHECK-LABEL: module @split_backward
// CHECK-NEXT:    func.func @main(%[[X:.*]]: tensor<2x4xf32>, %[[W:.*]]: tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>) {
// CHECK-NEXT:      %[[F0:.*]] = "jaxpp.task"(%[[X]]) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.stage = 0 : i64}
// CHECK-NEXT:      %[[F1:.*]] = "jaxpp.task"(%[[F0]]) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.stage = 1 : i64}
// CHECK-NEXT:      %[[I1:.*]]:2 = "jaxpp.task"(%[[F1]], %[[W]]) {callee = @stage1_bwd_i, jaxpp.kind = "bwd_i", jaxpp.stage = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>)
// CHECK-NEXT:      %[[W1:.*]] = "jaxpp.task"(%[[I1]]#0, %[[F0]], %[[W]]) {callee = @stage1_bwd_w, jaxpp.kind = "bwd_w", jaxpp.stage = 1 : i64}
// CHECK-NEXT:      %[[W0:.*]] = "jaxpp.task"(%[[I1]]#1) {callee = @stage0_bwd_w, jaxpp.kind = "bwd_w", jaxpp.stage = 0 : i64}
// CHECK-NEXT:      return %[[W0]], %[[W1]] : tensor<2x4xf32>, tensor<4x4xf32>
// CHECK-NEXT:    }
// CHECK:         func.func private @stage1_bwd_i(%[[A0:.*]]: tensor<2x4xf32>, %[[A1:.*]]: tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
// CHECK-NEXT:      %[[G:.*]] = stablehlo.multiply %[[A0]], %[[A0]] : tensor<2x4xf32>
// CHECK-NEXT:      %[[DX:.*]] = stablehlo.dot_general %[[G]], %[[A1]], contracting_dims = [1] x [1]
// CHECK-NEXT:      return %[[G]], %[[DX]] : tensor<2x4xf32>, tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage1_bwd_w(%[[A0:.*]]: tensor<2x4xf32>, %[[A1:.*]]: tensor<2x4xf32>, %[[A2:.*]]: tensor<4x4xf32>) -> tensor<4x4xf32> {
// CHECK-NEXT:      %[[DW:.*]] = stablehlo.dot_general %[[A0]], %[[A1]], contracting_dims = [0] x [0]
// CHECK-NEXT:      %[[NEW:.*]] = stablehlo.add %[[DW]], %[[A2]] : tensor<4x4xf32>
// CHECK-NEXT:      return %[[NEW]] : tensor<4x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage0_bwd_w(%[[A0:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[COS:.*]] = stablehlo.cosine %[[A0]] : tensor<2x4xf32>
// CHECK-NEXT:      return %[[COS]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @split_backward attributes {jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>, %arg1: tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>) {
    %0 = stablehlo.tanh %arg0 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    %1 = stablehlo.sine %0 {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<2x4xf32>
    %2 = stablehlo.multiply %1, %1 {jaxpp.kind = "bwd_i", jaxpp.stage = 1 : i64} : tensor<2x4xf32>
    %3 = stablehlo.dot_general %2, %arg1, contracting_dims = [1] x [1] {jaxpp.kind = "bwd_i", jaxpp.stage = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %4 = stablehlo.dot_general %2, %0, contracting_dims = [0] x [0] {jaxpp.kind = "bwd_w", jaxpp.stage = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %5 = stablehlo.add %4, %arg1 {jaxpp.kind = "bwd_w", jaxpp.stage = 1 : i64} : tensor<4x4xf32>
    %6 = stablehlo.cosine %3 {jaxpp.kind = "bwd_w", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    return %6, %5 : tensor<2x4xf32>, tensor<4x4xf32>
  }
}
