// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-segment-repeated-blocks)'

// A numbered module with one number is no family.
module @no_repeated_blocks {
  // expected-error @+1 {{no stage markers found, and no repeated blocks to split the step at (looked for modules numbered like layers_0..layers_N or h/0..h/N, or called several times, in the ops' locations): mark the end of every stage with jaxpp_mlir.pipeline_enter_stage, or pass split_points=(...) naming the modules where stages start}}
  func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %x : tensor<2x4xf32> loc("jit(step)/jvp(Model)/layers_0/tanh")
    %1 = stablehlo.sine %0 : tensor<2x4xf32> loc("jit(step)/jvp(Model)/head/sin")
    return %1 : tensor<2x4xf32>
  }
}

// -----

// flax nnx modules push no name scope: nothing to read.
module @no_module_names {
  // expected-error @+1 {{no stage markers found, and no repeated blocks to split the step at}}
  func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %x : tensor<2x4xf32> loc("jit(step)/jvp()/tanh")
    %1 = stablehlo.sine %0 : tensor<2x4xf32> loc("jit(step)/jvp()/sin")
    return %1 : tensor<2x4xf32>
  }
}

// -----

// Alone, a step with stage markers is refused: the markers say where stages end
// (in the segment slot's chain, jaxpp-assign-segments segments it first).
module @marked {
  // expected-error @+1 {{the step has stage markers: jaxpp-assign-segments cuts it at them (jaxpp-segment-repeated-blocks cuts a step without markers)}}
  func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %x : tensor<2x4xf32> loc("jit(step)/jvp(Model)/layers_0/tanh")
    %1 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %0 : tensor<2x4xf32>
    %2 = stablehlo.tanh %1 : tensor<2x4xf32> loc("jit(step)/jvp(Model)/layers_1/tanh")
    return %2 : tensor<2x4xf32>
  }
}
