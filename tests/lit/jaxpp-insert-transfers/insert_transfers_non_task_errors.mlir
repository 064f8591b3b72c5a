// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-insert-transfers)'

// A task operand produced by an op of @main that is not a jaxpp op (so it has
// no rank) must be rejected with an error located at that op.
// XFAIL: *
// Known bug (jaxpp_mlir/passes/insert_transfers.py calls jaxpp.get_rank on
// the producer of every operand without checking that it is a task): this is
// an internal error (KeyError 'attempt to access a non-existent attribute',
// exit status 3) located at the module. Remove the XFAIL line once it is a
// located error.

module @operand_from_non_task_op attributes {jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{'stablehlo.tanh'}}
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    %1 = "jaxpp.task"(%0) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %1 : tensor<2x4xf32>
  }
  func.func private @stage1_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    return %arg0 : tensor<2x4xf32>
  }
}
