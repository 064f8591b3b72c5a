// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-segment-split-points{points=layers_1})' | filecheck %s

// value_and_grad of embed -> layers_0 -> layers_1 -> layers_2 -> loss, cut before
// layers_1. Forward: the embedding and layers_0 are segment 0, layers_1 on (and the loss,
// in no module) segment 1. Backward: the gradient seed (in no module) and the backward
// of layers_2 and layers_1 are segment 1's, what follows the last backward op of
// layers_1 (an op of an inlined function, in no module; layers_0; the embedding's
// weight gradient) segment 0's. The constant goes with its earliest user; the
// accumulation after the model's backward follows the gradient it adds (layers_2's,
// segment 1), not its place in the program.

// CHECK-LABEL: module @chain attributes {jaxpp.num_segments = 2 : i64, jaxpp.segment_starts = ["Model/layers_1"], jaxpp.segmenter = "jaxpp-segment-split-points"}
// CHECK-NEXT:    func.func @main(%[[X:.*]]: tensor<2x4xf32>, %[[W:.*]]: tensor<2x4xf32>)
// CHECK-NEXT:      %[[TWO:.*]] = stablehlo.constant {jaxpp.kind = "bwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:      %[[EMB:.*]] = stablehlo.multiply %[[X]], %[[W]] {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:      %[[L0:.*]] = stablehlo.tanh %[[EMB]] {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:      %[[L1:.*]] = stablehlo.tanh %[[L0]] {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64}
// CHECK-NEXT:      %[[L2:.*]] = stablehlo.tanh %[[L1]] {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64}
// CHECK-NEXT:      %[[LOSS:.*]] = stablehlo.multiply %[[L2]], %[[L2]] {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64}
// CHECK-NEXT:      %[[SEED:.*]] = stablehlo.add %[[L2]], %[[L2]] {jaxpp.kind = "bwd", jaxpp.segment = 1 : i64}
// CHECK-NEXT:      %[[B2:.*]] = stablehlo.multiply %[[SEED]], %[[L2]] {jaxpp.kind = "bwd", jaxpp.segment = 1 : i64}
// CHECK-NEXT:      %[[B1:.*]] = stablehlo.multiply %[[B2]], %[[L1]] {jaxpp.kind = "bwd", jaxpp.segment = 1 : i64}
// CHECK-NEXT:      %[[INLINED:.*]] = stablehlo.multiply %[[B1]], %[[TWO]] {jaxpp.kind = "bwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:      %[[B0:.*]] = stablehlo.multiply %[[INLINED]], %[[L0]] {jaxpp.kind = "bwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:      %[[DW:.*]] = stablehlo.multiply %[[B0]], %[[X]] {jaxpp.kind = "bwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:      %[[ACC:.*]] = stablehlo.add %[[B2]], %[[W]] {jaxpp.kind = "bwd", jaxpp.segment = 1 : i64}
// CHECK-NEXT:      return %[[LOSS]], %[[DW]], %[[ACC]]
module @chain {
  func.func @main(%x: tensor<2x4xf32>, %w: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
    %two = stablehlo.constant dense<2.0> : tensor<2x4xf32> loc("jit(step)")
    %0 = stablehlo.multiply %x, %w : tensor<2x4xf32> loc("jit(step)/jvp(Model)/embed/mul")
    %1 = stablehlo.tanh %0 : tensor<2x4xf32> loc("jit(step)/jvp(Model)/layers_0/tanh")
    %2 = stablehlo.tanh %1 : tensor<2x4xf32> loc("jit(step)/jvp(Model)/layers_1/tanh")
    %3 = stablehlo.tanh %2 : tensor<2x4xf32> loc("jit(step)/jvp(Model)/layers_2/tanh")
    %4 = stablehlo.multiply %3, %3 : tensor<2x4xf32> loc("jit(step)/jvp()/integer_pow")
    %5 = stablehlo.add %3, %3 : tensor<2x4xf32> loc("jit(step)/transpose(jvp())/mul")
    %6 = stablehlo.multiply %5, %3 : tensor<2x4xf32> loc("jit(step)/transpose(jvp(Model))/layers_2/mul")
    %7 = stablehlo.multiply %6, %2 : tensor<2x4xf32> loc("jit(step)/transpose(jvp(Model))/layers_1/mul")
    %8 = stablehlo.multiply %7, %two : tensor<2x4xf32> loc("mul")
    %9 = stablehlo.multiply %8, %1 : tensor<2x4xf32> loc("jit(step)/transpose(jvp(Model))/layers_0/mul")
    %10 = stablehlo.multiply %9, %x : tensor<2x4xf32> loc("jit(step)/transpose(jvp(Model))/embed/mul")
    %11 = stablehlo.add %6, %w : tensor<2x4xf32> loc("jit(step)/add")
    return %4, %10, %11 : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
  }
}

// -----

// A remat recomputes layers_1's forward in the backward: its name stack repeats the
// module path under the transposed scope (transpose(jvp(Model))/jvp(Model)/checkpoint/
// rematted_computation/layers_1), read as Model/layers_1's backward (Model/Model/layers_1
// is no module path of the step).

// CHECK-LABEL: module @remat
// CHECK-SAME:    jaxpp.num_segments = 2 : i64, jaxpp.segment_starts = ["Model/layers_1"]
// CHECK:         %[[L0:.*]] = stablehlo.tanh %{{.*}} {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:    %[[L1:.*]] = stablehlo.tanh %[[L0]] {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64}
// CHECK-NEXT:    %[[SEED:.*]] = stablehlo.add %[[L1]], %[[L1]] {jaxpp.kind = "bwd", jaxpp.segment = 1 : i64}
// CHECK-NEXT:    %[[RE:.*]] = stablehlo.tanh %[[L0]] {jaxpp.kind = "bwd", jaxpp.segment = 1 : i64}
// CHECK-NEXT:    %[[B1:.*]] = stablehlo.multiply %[[SEED]], %[[RE]] {jaxpp.kind = "bwd", jaxpp.segment = 1 : i64}
// CHECK-NEXT:    %[[B0:.*]] = stablehlo.multiply %[[B1]], %[[L0]] {jaxpp.kind = "bwd", jaxpp.segment = 0 : i64}
module @remat {
  func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
    %0 = stablehlo.tanh %x : tensor<2x4xf32> loc("jit(step)/jvp(Model)/layers_0/tanh")
    %1 = stablehlo.tanh %0 : tensor<2x4xf32> loc("jit(step)/jvp(Model)/layers_1/tanh")
    %2 = stablehlo.add %1, %1 : tensor<2x4xf32> loc("jit(step)/transpose(jvp())/mul")
    %3 = stablehlo.tanh %0 : tensor<2x4xf32> loc("jit(step)/transpose(jvp(Model))/jvp(Model)/checkpoint/rematted_computation/layers_1/tanh")
    %4 = stablehlo.multiply %2, %3 : tensor<2x4xf32> loc("jit(step)/transpose(jvp(Model))/jvp(Model)/checkpoint/layers_1/mul")
    %5 = stablehlo.multiply %4, %0 : tensor<2x4xf32> loc("jit(step)/transpose(jvp(Model))/layers_0/mul")
    return %1, %5 : tensor<2x4xf32>, tensor<2x4xf32>
  }
}
