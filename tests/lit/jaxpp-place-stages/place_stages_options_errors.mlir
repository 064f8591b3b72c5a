// RUN: not jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-place-stages{placement=0,1})' 2>&1 | filecheck %s --check-prefix=LENGTH
// RUN: not jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-place-stages{mpmd-dim=2 placement=0,1,2})' 2>&1 | filecheck %s --check-prefix=RANGE
// RUN: not jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-place-stages{mpmd-dim=-1})' 2>&1 | filecheck %s --check-prefix=NEGATIVE
// RUN: not jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-place-stages{placement=0,-1,1})' 2>&1 | filecheck %s --check-prefix=NEGATIVE-RANK

// Option values the program cannot use; each run blames the module (line 13).
// Negative values are refused before the input is read, as a wrong command line.

// LENGTH:   place_stages_options_errors.mlir:13:1: error: placement has 2 entries (one rank per stage) but the program has 3 stages
// RANGE:    place_stages_options_errors.mlir:13:1: error: placement rank 2 is outside [0, 2)
// NEGATIVE: jaxpp-opt: error: pass 'jaxpp-place-stages': option 'mpmd-dim' must be at least 0, got -1
// NEGATIVE-RANK: jaxpp-opt: error: pass 'jaxpp-place-stages': option 'placement' entries must be at least 0, got -1
module @three_stages attributes {jaxpp.num_stages = 3 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = "jaxpp.task"(%arg0) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %1 = "jaxpp.task"(%0) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %2 = "jaxpp.task"(%1) {callee = @stage2_fwd, jaxpp.kind = "fwd", jaxpp.stage = 2 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %2 : tensor<2x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    return %arg0 : tensor<2x4xf32>
  }
  func.func private @stage1_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    return %arg0 : tensor<2x4xf32>
  }
  func.func private @stage2_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    return %arg0 : tensor<2x4xf32>
  }
}
