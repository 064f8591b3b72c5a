// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-verify-markers)' 2>&1 | filecheck --check-prefixes=CHECK,SEPARATE %s
// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-verify-markers{merge-parallel=true})' 2>&1 | filecheck --check-prefixes=CHECK,MERGE %s

// With merge-parallel, the warning (stderr) comes first: see @parallel_markers below.
// SEPARATE-NOT: warning
// MERGE: verify_markers.mlir:39:{{[0-9]+}}: warning: this stage marker and the one(s) at {{.*}}:41:{{[0-9]+}} do not depend on each other, so they end the same stage (0) and count as one

// Two stages, each forward marker paired with its backward marker: nothing changes.

// CHECK-LABEL: module @consistent
// CHECK:         %[[M0:.*]] = stablehlo.custom_call @jaxpp.enter_stage(%{{.*}}) {mhlo.frontend_attributes = {jaxpp.direction = "fwd"}}
// CHECK:         %[[M1:.*]] = stablehlo.custom_call @jaxpp.enter_stage(%{{.*}}) {mhlo.frontend_attributes = {jaxpp.direction = "fwd"}}
// CHECK:         %[[B1:.*]] = stablehlo.custom_call @jaxpp.enter_stage(%{{.*}}) {mhlo.frontend_attributes = {jaxpp.direction = "bwd"}}
// CHECK:         %[[B0:.*]] = stablehlo.custom_call @jaxpp.enter_stage(%{{.*}}) {mhlo.frontend_attributes = {jaxpp.direction = "bwd"}}
module @consistent {
  func.func @main(%arg0: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    %1 = stablehlo.custom_call @jaxpp.enter_stage(%0) {mhlo.frontend_attributes = {jaxpp.direction = "fwd"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %2 = stablehlo.sine %1 : tensor<2x4xf32>
    %3 = stablehlo.custom_call @jaxpp.enter_stage(%2) {mhlo.frontend_attributes = {jaxpp.direction = "fwd"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %4 = stablehlo.cosine %3 : tensor<2x4xf32>
    %5 = stablehlo.custom_call @jaxpp.enter_stage(%4) {mhlo.frontend_attributes = {jaxpp.direction = "bwd"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %6 = stablehlo.multiply %5, %2 : tensor<2x4xf32>
    %7 = stablehlo.custom_call @jaxpp.enter_stage(%6) {mhlo.frontend_attributes = {jaxpp.direction = "bwd"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %8 = stablehlo.multiply %7, %0 : tensor<2x4xf32>
    return %4, %8 : tensor<2x4xf32>, tensor<2x4xf32>
  }
}

// -----

// Two markers on parallel branches end a stage each (as in JaxPP); with merge-parallel they
// end the same stage: legal, with a warning.

// CHECK-LABEL: module @parallel_markers
module @parallel_markers {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    %1 = stablehlo.custom_call @jaxpp.enter_stage(%0) {mhlo.frontend_attributes = {jaxpp.direction = "fwd"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %2 = stablehlo.sine %arg0 : tensor<2x4xf32>
    %3 = stablehlo.custom_call @jaxpp.enter_stage(%2) {mhlo.frontend_attributes = {jaxpp.direction = "fwd"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %4 = stablehlo.add %1, %3 : tensor<2x4xf32>
    return %4 : tensor<2x4xf32>
  }
}
