// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-segment-split-points{points=layers_2,layers_1})'
// RUN: not jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-segment-split-points{points=layers_1,layers_1/Dense_0})' 2>&1 | filecheck %s --check-prefix=SAME
// RUN: not jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-segment-split-points{points=layers_1#2})' 2>&1 | filecheck %s --check-prefix=CALL
// RUN: not jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-segment-split-points)' 2>&1 | filecheck %s --check-prefix=NONE
// RUN: not jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-segment-split-points{points=layers_1},jaxpp-segment-split-points{points=layers_1})' 2>&1 | filecheck %s --check-prefix=TWICE

// SAME: split points 'Model/layers_1' and 'Model/layers_1/Dense_0' start at the same op
// CALL: split point 'layers_1#2' names no call of module Model/layers_1: it runs once
// NONE: jaxpp-segment-split-points needs split points: points=layers_4,layers_8 (module paths)
// TWICE: jaxpp-segment-split-points: the segments are already assigned (found jaxpp.num_segments): run jaxpp-segment-split-points only once

module @out_of_order {
  // expected-error @+1 {{split point 'Model/layers_1' runs before 'Model/layers_2': list the split points in the order the model runs them}}
  func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %x : tensor<2x4xf32> loc("jit(step)/jvp(Model)/layers_0/tanh")
    %1 = stablehlo.tanh %0 : tensor<2x4xf32> loc("jit(step)/jvp(Model)/layers_1/Dense_0/tanh")
    %2 = stablehlo.tanh %1 : tensor<2x4xf32> loc("jit(step)/jvp(Model)/layers_2/tanh")
    return %2 : tensor<2x4xf32>
  }
}
