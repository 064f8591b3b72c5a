// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-verify-markers{num-stages=2})'
// RUN: jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-verify-markers{num-stages=1})' | filecheck %s
// RUN: jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-verify-markers{mpmd-dim=2})' 2>&1 | filecheck %s --check-prefix=WARN
// RUN: jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-verify-markers{mpmd-dim=1})' 2>&1 | filecheck %s --check-prefix=QUIET

// One marker, a layer after it. With two stages asked for, the marker count
// contradicts the schedule: JaxPP's old placement (a marker at the start of
// stage 1, none after its layer) is refused. With one stage asked for, the
// layer is the last stage's (an LM head after the last marker): it passes. With
// no stage count known, the step gets one stage: on a mesh of two ranks (one of
// them idle) it passes with a warning, on one rank silently.
// CHECK-LABEL: module @old_placement
// CHECK: stablehlo.dot_general
// WARN: warning: a layer ('stablehlo.dot_general' at {{.*}}) follows the last stage marker: it runs in the last stage (0), as in JaxPP, and 1 of the mesh's 2 ranks gets no stage
// QUIET-NOT: warning
// QUIET: module @old_placement
module @old_placement {
  func.func @main(%arg0: tensor<2x4xf32>, %arg1: tensor<4x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    // expected-error @+1 {{the last stage's marker is missing: the schedule has 2 stages but the step 1 markers, and a layer ('stablehlo.dot_general' at}}
    %1 = stablehlo.custom_call @jaxpp.enter_stage(%0) {mhlo.frontend_attributes = {jaxpp.direction = "fwd"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %2 = stablehlo.dot_general %1, %arg1, contracting_dims = [1] x [0] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    return %2 : tensor<2x4xf32>
  }
}
