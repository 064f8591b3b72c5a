// RUN: jaxpp-opt %s --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-inline-calls,jaxpp-inline-calls)'

// Running the pass twice is refused at the module, which the first run gave
// its jaxpp.calls_inlined (a module without calls too: the attribute, not the
// absence of calls, says that the pass ran).

// expected-error @+1 {{jaxpp-inline-calls: the calls are already inlined (found jaxpp.calls_inlined): run jaxpp-inline-calls only once}}
module @inlined_twice {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = call @layer(%arg0) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @layer(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}
