// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-outline-stages)'

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
    // expected-error @+1 {{'stablehlo.sine' has no stage assignment: run jaxpp-assign-stages first}}
    %1 = stablehlo.sine %0 : tensor<2x4xf32>
    return %1 : tensor<2x4xf32>
  }
}

// -----

// expected-error @+1 {{module has no jaxpp.num_stages attribute}}
module @no_num_stages {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}
