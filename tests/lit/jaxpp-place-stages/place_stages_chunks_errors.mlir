// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-place-stages{mpmd-dim=2})'

module @chunk_of_a_missing_stage attributes {jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<4x2xf32>) -> tensor<2x2xf32> {
    // expected-error @+1 {{'jaxpp.chunk' held by stage 2 in a program of 2 stage(s)}}
    %c = "jaxpp.chunk"(%arg0) {jaxpp.rows = 2 : i64, jaxpp.stage = 2 : i64, jaxpp.start = 0 : i64} : (tensor<4x2xf32>) -> tensor<2x2xf32>
    %0 = "jaxpp.task"(%c) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<2x2xf32>) -> tensor<2x2xf32>
    return %0 : tensor<2x2xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<2x2xf32>) -> tensor<2x2xf32> {
    return %arg0 : tensor<2x2xf32>
  }
}
