// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-split-backward)'

// expected-error @+1 {{the module has no 'func.func @main' to partition}}
module @no_main attributes {jaxpp.num_stages = 1 : i64} {
  func.func @step(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    return %arg0 : tensor<2x4xf32>
  }
}

// -----

module @op_without_stage attributes {jaxpp.num_stages = 1 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    // expected-error @+1 {{has no stage: run jaxpp-assign-stages first}}
    %1 = stablehlo.sine %0 : tensor<2x4xf32>
    return %1 : tensor<2x4xf32>
  }
}

// -----

// Running the pass twice is refused at the first split op.
module @already_split attributes {jaxpp.num_stages = 1 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    // expected-error @+1 {{the backward is already split}}
    %1 = stablehlo.sine %0 {jaxpp.kind = "bwd_w", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    return %1 : tensor<2x4xf32>
  }
}
