// RUN: jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-outline-stages)' | filecheck %s

// mark_stage_end(x, name="embed") names stage 0: its function carries the name
// (jaxpp.stage_name); stage 1's marker has no name, so neither has its function.

// CHECK-LABEL: module @named_stages
// CHECK:         func.func private @stage0_fwd({{.*}} attributes {jaxpp.stage_name = "embed"} {
// CHECK:         func.func private @stage1_fwd(%{{.*}}: tensor<2x4xf32>) -> tensor<2x4xf32> {{[{]$}}
module @named_stages attributes {jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>, %arg1: tensor<4x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %1 = stablehlo.custom_call @jaxpp.enter_stage(%0) {api_version = 4 : i32, backend_config = {}, jaxpp.kind = "fwd", jaxpp.stage = 0 : i64, mhlo.frontend_attributes = {jaxpp.direction = "fwd", jaxpp.stage_name = "embed"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %2 = stablehlo.tanh %1 {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<2x4xf32>
    %3 = stablehlo.custom_call @jaxpp.enter_stage(%2) {api_version = 4 : i32, backend_config = {}, jaxpp.kind = "fwd", jaxpp.stage = 1 : i64, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %3 : tensor<2x4xf32>
  }
}
