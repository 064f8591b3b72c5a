// RUN: jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-check-attributes)' | filecheck %s

// Every jaxpp attribute of a marked step, in both marker forms, with values of its
// kind: the module passes unchanged.

// CHECK-LABEL: module @known_attributes attributes {jaxpp.calls_inlined, jaxpp.num_segments = 2 : i64}
// CHECK:         stablehlo.optimization_barrier {jaxpp.marker = "loop", jaxpp.num_microbatches = 4 : i64, jaxpp.reductions = "add,concat(0)", jaxpp.schedule = {kind = "GPipe"}, jaxpp.stage_markers = "model.py:3"}
// CHECK:         stablehlo.optimization_barrier {jaxpp.kind = "fwd", jaxpp.marker = "fwd", jaxpp.segment = 0 : i64, jaxpp.stage_name = "embed"}
// CHECK:         stablehlo.custom_call @jaxpp.enter_stage(%{{.*}}) {mhlo.frontend_attributes = {jaxpp.direction = "bwd", jaxpp.stage_name = "embed"}}
module @known_attributes attributes {jaxpp.calls_inlined, jaxpp.num_segments = 2 : i64} {
  func.func @main(%arg0: tensor<i32>, %arg1: tensor<2x4xf32>) -> (tensor<i32>, tensor<2x4xf32>) {
    %0 = stablehlo.optimization_barrier {jaxpp.marker = "loop", jaxpp.num_microbatches = 4 : i64, jaxpp.reductions = "add,concat(0)", jaxpp.schedule = {kind = "GPipe"}, jaxpp.stage_markers = "model.py:3"} %arg0 : tensor<i32>
    %1 = stablehlo.optimization_barrier {jaxpp.kind = "fwd", jaxpp.marker = "fwd", jaxpp.segment = 0 : i64, jaxpp.stage_name = "embed"} %arg1 : tensor<2x4xf32>
    %2 = stablehlo.custom_call @jaxpp.enter_stage(%1) {mhlo.frontend_attributes = {jaxpp.direction = "bwd", jaxpp.stage_name = "embed"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0, %2 : tensor<i32>, tensor<2x4xf32>
  }
}
