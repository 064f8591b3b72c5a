// RUN: jaxpp-opt %s --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-segment-repeated-blocks,jaxpp-segment-repeated-blocks)'

// Running the pass twice is refused at the module, which the first run gave its
// jaxpp.num_segments.

// expected-error @+1 {{jaxpp-segment-repeated-blocks: the segments are already assigned (found jaxpp.num_segments): run jaxpp-segment-repeated-blocks only once}}
module @segmented_twice {
  func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %x : tensor<2x4xf32> loc("jit(step)/jvp(Model)/layers_0/tanh")
    %1 = stablehlo.tanh %0 : tensor<2x4xf32> loc("jit(step)/jvp(Model)/layers_1/tanh")
    return %1 : tensor<2x4xf32>
  }
}
