// RUN: not jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-place-stages{mpmd-dim=-1})' 2>&1 | filecheck %s --check-prefix=NEGATIVE

// A negative rank count is refused before the input is read, as a wrong command line.

// NEGATIVE: jaxpp-opt: error: pass 'jaxpp-place-stages': option 'mpmd-dim' must be at least 0, got -1
module @three_stages attributes {jaxpp.num_stages = 3 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = "jaxpp.task"(%arg0) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    return %arg0 : tensor<2x4xf32>
  }
}
