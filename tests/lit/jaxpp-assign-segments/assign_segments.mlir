// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-assign-segments)' | filecheck %s

// Three forward markers, three stages: each marker belongs to the stage it
// ends, the ops after the last marker join the last stage.

// CHECK-LABEL: module @forward_chain attributes {jaxpp.num_segments = 3 : i64}
// CHECK-NEXT:    func.func @main(%[[ARG:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[TANH:.*]] = stablehlo.tanh %[[ARG]] {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:      %[[M0:.*]] = stablehlo.custom_call @jaxpp.enter_stage(%[[TANH]]) {{.*}}jaxpp.kind = "fwd", jaxpp.segment = 0 : i64, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}
// CHECK-NEXT:      %[[SIN:.*]] = stablehlo.sine %[[M0]] {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64}
// CHECK-NEXT:      %[[M1:.*]] = stablehlo.custom_call @jaxpp.enter_stage(%[[SIN]]) {{.*}}jaxpp.kind = "fwd", jaxpp.segment = 1 : i64,
// CHECK-NEXT:      %[[COS:.*]] = stablehlo.cosine %[[M1]] {jaxpp.kind = "fwd", jaxpp.segment = 2 : i64}
// CHECK-NEXT:      %[[M2:.*]] = stablehlo.custom_call @jaxpp.enter_stage(%[[COS]]) {{.*}}jaxpp.kind = "fwd", jaxpp.segment = 2 : i64,
// CHECK-NEXT:      %[[EXP:.*]] = stablehlo.exponential %[[M2]] {jaxpp.kind = "fwd", jaxpp.segment = 2 : i64}
// CHECK-NEXT:      return %[[EXP]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @forward_chain {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    %1 = stablehlo.custom_call @jaxpp.enter_stage(%0) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %2 = stablehlo.sine %1 : tensor<2x4xf32>
    %3 = stablehlo.custom_call @jaxpp.enter_stage(%2) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %4 = stablehlo.cosine %3 : tensor<2x4xf32>
    %5 = stablehlo.custom_call @jaxpp.enter_stage(%4) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %6 = stablehlo.exponential %5 : tensor<2x4xf32>
    return %6 : tensor<2x4xf32>
  }
}

// -----

// The shape of value_and_grad over two stages. The loss and the gradient seed
// join the last forward stage, together with the first backward marker; each
// backward marker ends the backward of a stage. 1 - tanh(x)^2 depends on no
// marker: it goes with its earliest user, the backward of stage 0, rather than
// the forward that computes tanh(x).

// CHECK-LABEL: module @value_and_grad attributes {jaxpp.num_segments = 2 : i64}
// CHECK-NEXT:    func.func @main(%[[W0:.*]]: tensor<4x4xf32>, %[[W1:.*]]: tensor<4x4xf32>, %[[X:.*]]: tensor<2x4xf32>)
// CHECK-NEXT:      %[[DOT0:.*]] = stablehlo.dot_general %[[X]], %[[W0]], {{.*}} {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:      %[[TANH:.*]] = stablehlo.tanh %[[DOT0]] {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:      %[[M0:.*]] = stablehlo.custom_call @jaxpp.enter_stage(%[[TANH]]) {{.*}}jaxpp.kind = "fwd", jaxpp.segment = 0 : i64, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}
// CHECK-NEXT:      %[[DOT1:.*]] = stablehlo.dot_general %[[M0]], %[[W1]], {{.*}} {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64}
// CHECK-NEXT:      %[[M1:.*]] = stablehlo.custom_call @jaxpp.enter_stage(%[[DOT1]]) {{.*}}jaxpp.kind = "fwd", jaxpp.segment = 1 : i64, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}
// CHECK-NEXT:      %[[ZERO:.*]] = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64} dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:      %[[SQ:.*]] = stablehlo.multiply %[[M1]], %[[M1]] {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64}
// CHECK-NEXT:      %[[LOSS:.*]] = stablehlo.reduce(%[[SQ]] init: %[[ZERO]]) {{.*}} {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64}
// CHECK-NEXT:      %[[SEED:.*]] = stablehlo.add %[[M1]], %[[M1]] {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64}
// CHECK-NEXT:      %[[B1:.*]] = stablehlo.custom_call @jaxpp.enter_stage(%[[SEED]]) {{.*}}jaxpp.kind = "fwd", jaxpp.segment = 1 : i64, mhlo.frontend_attributes = {jaxpp.direction = "bwd"}
// CHECK-NEXT:      %[[DX1:.*]] = stablehlo.dot_general %[[B1]], %[[W1]], {{.*}} {jaxpp.kind = "bwd", jaxpp.segment = 1 : i64}
// CHECK-NEXT:      %[[DW1:.*]] = stablehlo.dot_general %[[M0]], %[[B1]], {{.*}} {jaxpp.kind = "bwd", jaxpp.segment = 1 : i64}
// CHECK-NEXT:      %[[B0:.*]] = stablehlo.custom_call @jaxpp.enter_stage(%[[DX1]]) {{.*}}jaxpp.kind = "bwd", jaxpp.segment = 1 : i64, mhlo.frontend_attributes = {jaxpp.direction = "bwd"}
// CHECK-NEXT:      %[[ONE:.*]] = stablehlo.constant {jaxpp.kind = "bwd", jaxpp.segment = 0 : i64} dense<1.000000e+00>
// CHECK-NEXT:      %[[TANH2:.*]] = stablehlo.multiply %[[TANH]], %[[TANH]] {jaxpp.kind = "bwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:      %[[DTANH:.*]] = stablehlo.subtract %[[ONE]], %[[TANH2]] {jaxpp.kind = "bwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:      %[[DX0:.*]] = stablehlo.multiply %[[B0]], %[[DTANH]] {jaxpp.kind = "bwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:      %[[DW0:.*]] = stablehlo.dot_general %[[X]], %[[DX0]], {{.*}} {jaxpp.kind = "bwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:      return %[[LOSS]], %[[DW0]], %[[DW1]] : tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @value_and_grad {
  func.func @main(%arg0: tensor<4x4xf32>, %arg1: tensor<4x4xf32>, %arg2: tensor<2x4xf32>) -> (tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>) {
    %0 = stablehlo.dot_general %arg2, %arg0, contracting_dims = [1] x [0] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %1 = stablehlo.tanh %0 : tensor<2x4xf32>
    %2 = stablehlo.custom_call @jaxpp.enter_stage(%1) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %3 = stablehlo.dot_general %2, %arg1, contracting_dims = [1] x [0] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %4 = stablehlo.custom_call @jaxpp.enter_stage(%3) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %5 = stablehlo.multiply %4, %4 : tensor<2x4xf32>
    %6 = stablehlo.reduce(%5 init: %cst) applies stablehlo.add across dimensions = [0, 1] : (tensor<2x4xf32>, tensor<f32>) -> tensor<f32>
    %7 = stablehlo.add %4, %4 : tensor<2x4xf32>
    %8 = stablehlo.custom_call @jaxpp.enter_stage(%7) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "bwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %9 = stablehlo.dot_general %8, %arg1, contracting_dims = [1] x [1] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %10 = stablehlo.dot_general %2, %8, contracting_dims = [0] x [0] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %11 = stablehlo.custom_call @jaxpp.enter_stage(%9) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "bwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %cst_0 = stablehlo.constant dense<1.000000e+00> : tensor<2x4xf32>
    %12 = stablehlo.multiply %1, %1 : tensor<2x4xf32>
    %13 = stablehlo.subtract %cst_0, %12 : tensor<2x4xf32>
    %14 = stablehlo.multiply %11, %13 : tensor<2x4xf32>
    %15 = stablehlo.dot_general %arg2, %14, contracting_dims = [0] x [0] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    return %6, %15, %10 : tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>
  }
}

// -----

// Ops that depend on no marker go with their earliest user: the convert of
// %arg1 is read in stages 1 and 2, so it is computed in stage 1; an op only
// returned, or not used at all, has no user with a stage and goes to stage 0.

// CHECK-LABEL: module @unmarked_ops_with_earliest_user attributes {jaxpp.num_segments = 3 : i64}
// CHECK-NEXT:    func.func @main(%[[ARG0:.*]]: tensor<2x4xf32>, %[[ARG1:.*]]: tensor<2x4xf16>)
// CHECK-NEXT:      %[[CVT:.*]] = stablehlo.convert %[[ARG1]] {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64}
// CHECK-NEXT:      %[[RET:.*]] = stablehlo.negate %[[ARG0]] {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:      %[[DEAD:.*]] = stablehlo.abs %[[ARG0]] {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:      %[[TANH:.*]] = stablehlo.tanh %[[ARG0]] {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:      %[[M0:.*]] = stablehlo.custom_call @jaxpp.enter_stage(%[[TANH]]) {{.*}}jaxpp.kind = "fwd", jaxpp.segment = 0 : i64,
// CHECK-NEXT:      %[[ADD1:.*]] = stablehlo.add %[[M0]], %[[CVT]] {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64}
// CHECK-NEXT:      %[[M1:.*]] = stablehlo.custom_call @jaxpp.enter_stage(%[[ADD1]]) {{.*}}jaxpp.kind = "fwd", jaxpp.segment = 1 : i64,
// CHECK-NEXT:      %[[ADD2:.*]] = stablehlo.add %[[M1]], %[[CVT]] {jaxpp.kind = "fwd", jaxpp.segment = 2 : i64}
// CHECK-NEXT:      %[[M2:.*]] = stablehlo.custom_call @jaxpp.enter_stage(%[[ADD2]]) {{.*}}jaxpp.kind = "fwd", jaxpp.segment = 2 : i64,
// CHECK-NEXT:      return %[[M2]], %[[RET]] : tensor<2x4xf32>, tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @unmarked_ops_with_earliest_user {
  func.func @main(%arg0: tensor<2x4xf32>, %arg1: tensor<2x4xf16>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
    %0 = stablehlo.convert %arg1 : (tensor<2x4xf16>) -> tensor<2x4xf32>
    %1 = stablehlo.negate %arg0 : tensor<2x4xf32>
    %2 = stablehlo.abs %arg0 : tensor<2x4xf32>
    %3 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    %4 = stablehlo.custom_call @jaxpp.enter_stage(%3) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %5 = stablehlo.add %4, %0 : tensor<2x4xf32>
    %6 = stablehlo.custom_call @jaxpp.enter_stage(%5) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %7 = stablehlo.add %6, %0 : tensor<2x4xf32>
    %8 = stablehlo.custom_call @jaxpp.enter_stage(%7) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %8, %1 : tensor<2x4xf32>, tensor<2x4xf32>
  }
}

// -----

// A skip connection: the stage-0 value %0 is read again in stage 2; it stays
// in stage 0 (its earliest user is the first marker).

// CHECK-LABEL: module @skip_connection_over_stage attributes {jaxpp.num_segments = 3 : i64}
// CHECK-NEXT:    func.func @main(%[[ARG:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[TANH:.*]] = stablehlo.tanh %[[ARG]] {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:      %[[M0:.*]] = stablehlo.custom_call @jaxpp.enter_stage(%[[TANH]]) {{.*}}jaxpp.kind = "fwd", jaxpp.segment = 0 : i64,
// CHECK-NEXT:      %[[SIN:.*]] = stablehlo.sine %[[M0]] {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64}
// CHECK-NEXT:      %[[M1:.*]] = stablehlo.custom_call @jaxpp.enter_stage(%[[SIN]]) {{.*}}jaxpp.kind = "fwd", jaxpp.segment = 1 : i64,
// CHECK-NEXT:      %[[ADD:.*]] = stablehlo.add %[[M1]], %[[TANH]] {jaxpp.kind = "fwd", jaxpp.segment = 2 : i64}
// CHECK-NEXT:      %[[M2:.*]] = stablehlo.custom_call @jaxpp.enter_stage(%[[ADD]]) {{.*}}jaxpp.kind = "fwd", jaxpp.segment = 2 : i64,
// CHECK-NEXT:      return %[[M2]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @skip_connection_over_stage {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    %1 = stablehlo.custom_call @jaxpp.enter_stage(%0) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %2 = stablehlo.sine %1 : tensor<2x4xf32>
    %3 = stablehlo.custom_call @jaxpp.enter_stage(%2) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %4 = stablehlo.add %3, %0 : tensor<2x4xf32>
    %5 = stablehlo.custom_call @jaxpp.enter_stage(%4) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %5 : tensor<2x4xf32>
  }
}

// -----

// One marker over a pytree of two leaves: both results start stage 1.

// CHECK-LABEL: module @marker_with_two_leaves attributes {jaxpp.num_segments = 2 : i64}
// CHECK-NEXT:    func.func @main(%[[ARG0:.*]]: tensor<2x4xf32>, %[[ARG1:.*]]: tensor<4xf32>)
// CHECK-NEXT:      %[[TANH:.*]] = stablehlo.tanh %[[ARG0]] {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:      %[[M0:.*]]:2 = stablehlo.custom_call @jaxpp.enter_stage(%[[TANH]], %[[ARG1]]) {{.*}}jaxpp.kind = "fwd", jaxpp.segment = 0 : i64,
// CHECK-NEXT:      %[[BCAST:.*]] = stablehlo.broadcast_in_dim %[[M0]]#1, dims = [1] {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64}
// CHECK-NEXT:      %[[ADD:.*]] = stablehlo.add %[[M0]]#0, %[[BCAST]] {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64}
// CHECK-NEXT:      %[[M1:.*]] = stablehlo.custom_call @jaxpp.enter_stage(%[[ADD]]) {{.*}}jaxpp.kind = "fwd", jaxpp.segment = 1 : i64,
// CHECK-NEXT:      return %[[M1]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @marker_with_two_leaves {
  func.func @main(%arg0: tensor<2x4xf32>, %arg1: tensor<4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    %1:2 = stablehlo.custom_call @jaxpp.enter_stage(%0, %arg1) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, operand_tuple_indices = []>, #stablehlo.output_operand_alias<output_tuple_indices = [1], operand_index = 1, operand_tuple_indices = []>]} : (tensor<2x4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<4xf32>)
    %2 = stablehlo.broadcast_in_dim %1#1, dims = [1] : (tensor<4xf32>) -> tensor<2x4xf32>
    %3 = stablehlo.add %1#0, %2 : tensor<2x4xf32>
    %4 = stablehlo.custom_call @jaxpp.enter_stage(%3) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %4 : tensor<2x4xf32>
  }
}

// -----

// jax.grad of a 2-stage model whose last stage is linear: JAX dropped the
// forward marker of stage 1 (only the loss read it), the two backward markers
// still count two stages. The gradient seed joins the last stage.

// CHECK-LABEL: module @grad_without_last_forward_marker attributes {jaxpp.num_segments = 2 : i64}
// CHECK-NEXT:    func.func @main(%[[W1:.*]]: tensor<4x4xf32>, %[[X:.*]]: tensor<2x4xf32>)
// CHECK-NEXT:      %[[TANH:.*]] = stablehlo.tanh %[[X]] {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:      %[[M0:.*]] = stablehlo.custom_call @jaxpp.enter_stage(%[[TANH]]) {{.*}}jaxpp.kind = "fwd", jaxpp.segment = 0 : i64, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}
// CHECK-NEXT:      %[[SEED:.*]] = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64} dense<1.250000e-01>
// CHECK-NEXT:      %[[B1:.*]] = stablehlo.custom_call @jaxpp.enter_stage(%[[SEED]]) {{.*}}jaxpp.kind = "fwd", jaxpp.segment = 1 : i64, mhlo.frontend_attributes = {jaxpp.direction = "bwd"}
// CHECK-NEXT:      %[[DW1:.*]] = stablehlo.dot_general %[[M0]], %[[B1]], {{.*}} {jaxpp.kind = "bwd", jaxpp.segment = 1 : i64}
// CHECK-NEXT:      %[[DX1:.*]] = stablehlo.dot_general %[[B1]], %[[W1]], {{.*}} {jaxpp.kind = "bwd", jaxpp.segment = 1 : i64}
// CHECK-NEXT:      %[[B0:.*]] = stablehlo.custom_call @jaxpp.enter_stage(%[[DX1]]) {{.*}}jaxpp.kind = "bwd", jaxpp.segment = 1 : i64, mhlo.frontend_attributes = {jaxpp.direction = "bwd"}
// CHECK-NEXT:      %[[DX0:.*]] = stablehlo.multiply %[[B0]], %[[TANH]] {jaxpp.kind = "bwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:      return %[[DW1]], %[[DX0]] : tensor<4x4xf32>, tensor<2x4xf32>
// CHECK-NEXT:    }
module @grad_without_last_forward_marker {
  func.func @main(%arg0: tensor<4x4xf32>, %arg1: tensor<2x4xf32>) -> (tensor<4x4xf32>, tensor<2x4xf32>) {
    %0 = stablehlo.tanh %arg1 : tensor<2x4xf32>
    %1 = stablehlo.custom_call @jaxpp.enter_stage(%0) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %2 = stablehlo.constant dense<1.250000e-01> : tensor<2x4xf32>
    %3 = stablehlo.custom_call @jaxpp.enter_stage(%2) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "bwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %4 = stablehlo.dot_general %1, %3, contracting_dims = [0] x [0] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %5 = stablehlo.dot_general %3, %arg0, contracting_dims = [1] x [1] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %6 = stablehlo.custom_call @jaxpp.enter_stage(%5) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "bwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %7 = stablehlo.multiply %6, %0 : tensor<2x4xf32>
    return %4, %7 : tensor<4x4xf32>, tensor<2x4xf32>
  }
}
