// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-segment-split-points{points=layers_1})'

module @unknown_point {
  // expected-error @+1 {{split point 'layers_1' names no module of the step: the repeated blocks found are Model/blocks_0, Model/blocks_1}}
  func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %x : tensor<2x4xf32> loc("jit(step)/jvp(Model)/blocks_0/tanh")
    %1 = stablehlo.tanh %0 : tensor<2x4xf32> loc("jit(step)/jvp(Model)/blocks_1/tanh")
    return %1 : tensor<2x4xf32>
  }
}

// -----

// Module paths only backward code names are no blocks.
module @no_module_paths {
  // expected-error @+1 {{split point 'layers_1' names no module of the step: no repeated blocks were found (module paths come from the ops' locations: flax and haiku module names, jax.named_scope)}}
  func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %x : tensor<2x4xf32> loc("jit(step)/jvp()/tanh")
    %1 = stablehlo.tanh %0 : tensor<2x4xf32> loc("jit(step)/transpose(jvp(Model))/layers_1/tanh")
    return %1 : tensor<2x4xf32>
  }
}

// -----

module @same_depth_twice {
  // expected-error @+1 {{split point 'layers_1' is ambiguous: it names Model/encoder/layers_1, Model/decoder/layers_1}}
  func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %x : tensor<2x4xf32> loc("jit(step)/jvp(Model)/encoder/layers_0/tanh")
    %1 = stablehlo.tanh %0 : tensor<2x4xf32> loc("jit(step)/jvp(Model)/encoder/layers_1/tanh")
    %2 = stablehlo.tanh %1 : tensor<2x4xf32> loc("jit(step)/jvp(Model)/decoder/layers_0/tanh")
    %3 = stablehlo.tanh %2 : tensor<2x4xf32> loc("jit(step)/jvp(Model)/decoder/layers_1/tanh")
    return %3 : tensor<2x4xf32>
  }
}

// -----

// A module that runs several times (jax.named_scope around each block's call, no
// numbers): one call is named with #k.
module @called_twice {
  // expected-error @+1 {{split point 'layers_1' is ambiguous: module Model/layers_1 runs 2 times; name one call: Model/layers_1#0, Model/layers_1#1}}
  func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %x : tensor<2x4xf32> loc("jit(step)/jvp(Model)/embed/tanh")
    %1 = stablehlo.tanh %0 : tensor<2x4xf32> loc("jit(step)/jvp(Model)/layers_1/tanh")
    %2 = stablehlo.tanh %1 : tensor<2x4xf32> loc("jit(step)/jvp(Model)/norm/tanh")
    %3 = stablehlo.tanh %2 : tensor<2x4xf32> loc("jit(step)/jvp(Model)/layers_1/tanh")
    return %3 : tensor<2x4xf32>
  }
}

// -----

module @nothing_before {
  // expected-error @+1 {{split point 'Model/layers_1' is where the step's first module starts: nothing would run before it (split points name where stages 1, 2, ... start, not stage 0)}}
  func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %x : tensor<2x4xf32> loc("jit(step)/jvp(Model)/layers_1/tanh")
    %1 = stablehlo.tanh %0 : tensor<2x4xf32> loc("jit(step)/jvp(Model)/layers_2/tanh")
    return %1 : tensor<2x4xf32>
  }
}
