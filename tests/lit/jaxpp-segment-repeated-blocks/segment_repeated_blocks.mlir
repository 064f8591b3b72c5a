// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-segment-repeated-blocks)' | filecheck %s

// A microbatch loop over embed -> layers_0..layers_2 -> head -> loss, no markers: one
// segment per block. The embedding joins layers_0's segment, the head and the loss
// layers_2's, in the forward and the backward; the numbered modules inside each block
// (Dense_0) are no blocks of their own (the outermost family is). The accumulation of
// the embedding's gradient follows that gradient (segment 0's backward).

// CHECK-LABEL: module @loop_of_layers
// CHECK-SAME:    jaxpp.num_segments = 3 : i64, jaxpp.segment_starts = ["Model/layers_1", "Model/layers_2"], jaxpp.segmenter = "jaxpp-segment-repeated-blocks"
// CHECK:         ^bb0(%[[I:.*]]: tensor<i32>, %[[ACC:.*]]: tensor<2x4xf32>):
// CHECK-NEXT:      %[[EMB:.*]] = stablehlo.multiply %[[W:.*]], %[[W]] {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:      %[[L0:.*]] = stablehlo.tanh %[[EMB]] {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:      %[[L1:.*]] = stablehlo.tanh %[[L0]] {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64}
// CHECK-NEXT:      %[[L1D:.*]] = stablehlo.sine %[[L1]] {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64}
// CHECK-NEXT:      %[[L2:.*]] = stablehlo.tanh %[[L1D]] {jaxpp.kind = "fwd", jaxpp.segment = 2 : i64}
// CHECK-NEXT:      %[[HEAD:.*]] = stablehlo.cosine %[[L2]] {jaxpp.kind = "fwd", jaxpp.segment = 2 : i64}
// CHECK-NEXT:      %[[SEED:.*]] = stablehlo.add %[[HEAD]], %[[HEAD]] {jaxpp.kind = "bwd", jaxpp.segment = 2 : i64}
// CHECK-NEXT:      %[[BH:.*]] = stablehlo.multiply %[[SEED]], %[[L2]] {jaxpp.kind = "bwd", jaxpp.segment = 2 : i64}
// CHECK-NEXT:      %[[B2:.*]] = stablehlo.multiply %[[BH]], %[[L1D]] {jaxpp.kind = "bwd", jaxpp.segment = 2 : i64}
// CHECK-NEXT:      %[[B1:.*]] = stablehlo.multiply %[[B2]], %[[L1]] {jaxpp.kind = "bwd", jaxpp.segment = 1 : i64}
// CHECK-NEXT:      %[[B0:.*]] = stablehlo.multiply %[[B1]], %[[L0]] {jaxpp.kind = "bwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:      %[[DW:.*]] = stablehlo.multiply %[[B0]], %[[W]] {jaxpp.kind = "bwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:      %[[NEW:.*]] = stablehlo.add %[[ACC]], %[[DW]] {jaxpp.kind = "bwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:      "jaxpp.yield"(%[[NEW]])
module @loop_of_layers {
  func.func @main(%w: tensor<2x4xf32>, %acc0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = "jaxpp.loop"(%acc0) ({
    ^bb0(%i: tensor<i32>, %acc: tensor<2x4xf32>):
      %1 = stablehlo.multiply %w, %w : tensor<2x4xf32> loc("jit(step)/while/body/eval_jaxpr/jvp(Model)/embed/mul")
      %2 = stablehlo.tanh %1 : tensor<2x4xf32> loc("jit(step)/while/body/eval_jaxpr/jvp(Model)/layers_0/Dense_0/tanh")
      %3 = stablehlo.tanh %2 : tensor<2x4xf32> loc("jit(step)/while/body/eval_jaxpr/jvp(Model)/layers_1/Dense_0/tanh")
      %4 = stablehlo.sine %3 : tensor<2x4xf32> loc("jit(step)/while/body/eval_jaxpr/jvp(Model)/layers_1/Dense_1/sin")
      %5 = stablehlo.tanh %4 : tensor<2x4xf32> loc("jit(step)/while/body/eval_jaxpr/jvp(Model)/layers_2/Dense_0/tanh")
      %6 = stablehlo.cosine %5 : tensor<2x4xf32> loc("jit(step)/while/body/eval_jaxpr/jvp(Model)/head/cos")
      %7 = stablehlo.add %6, %6 : tensor<2x4xf32> loc("jit(step)/while/body/eval_jaxpr/transpose(jvp())/mul")
      %8 = stablehlo.multiply %7, %5 : tensor<2x4xf32> loc("jit(step)/while/body/eval_jaxpr/transpose(jvp(Model))/head/mul")
      %9 = stablehlo.multiply %8, %4 : tensor<2x4xf32> loc("jit(step)/while/body/eval_jaxpr/transpose(jvp(Model))/layers_2/Dense_0/mul")
      %10 = stablehlo.multiply %9, %3 : tensor<2x4xf32> loc("jit(step)/while/body/eval_jaxpr/transpose(jvp(Model))/layers_1/Dense_0/mul")
      %11 = stablehlo.multiply %10, %2 : tensor<2x4xf32> loc("jit(step)/while/body/eval_jaxpr/transpose(jvp(Model))/layers_0/Dense_0/mul")
      %12 = stablehlo.multiply %11, %w : tensor<2x4xf32> loc("jit(step)/while/body/eval_jaxpr/transpose(jvp(Model))/embed/mul")
      %13 = stablehlo.add %acc, %12 : tensor<2x4xf32> loc("jit(step)/while/body/add")
      "jaxpp.yield"(%13) : (tensor<2x4xf32>) -> ()
    }) {jaxpp.num_microbatches = 4 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

// An encoder's and a decoder's blocks (two families at the same depth): all four, in
// program order.

// CHECK-LABEL: module @encoder_decoder
// CHECK-SAME:    jaxpp.num_segments = 4 : i64, jaxpp.segment_starts = ["Model/encoder/h/1", "Model/decoder/h/0", "Model/decoder/h/1"]
module @encoder_decoder {
  func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %x : tensor<2x4xf32> loc("jit(step)/jvp(Model)/encoder/h/0/tanh")
    %1 = stablehlo.tanh %0 : tensor<2x4xf32> loc("jit(step)/jvp(Model)/encoder/h/1/tanh")
    %2 = stablehlo.tanh %1 : tensor<2x4xf32> loc("jit(step)/jvp(Model)/decoder/h/0/tanh")
    %3 = stablehlo.tanh %2 : tensor<2x4xf32> loc("jit(step)/jvp(Model)/decoder/h/1/tanh")
    return %3 : tensor<2x4xf32>
  }
}

// -----

// Blocks with no numbers, each a call of one jax.named_scope (mamba2-jax's
// "mamba2_mixer"): one segment per call. The norm that runs between them, one call
// more, is the lighter of the two modules that run several times.

// CHECK-LABEL: module @named_scope_calls
// CHECK-SAME:    jaxpp.num_segments = 2 : i64, jaxpp.segment_starts = ["lm/mixer#1"]
// CHECK:         stablehlo.tanh %{{.*}} {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:    stablehlo.sine %{{.*}} {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:    stablehlo.cosine %{{.*}} {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:    stablehlo.tanh %{{.*}} {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:    stablehlo.sine %{{.*}} {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64}
// CHECK-NEXT:    stablehlo.cosine %{{.*}} {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64}
// CHECK-NEXT:    stablehlo.tanh %{{.*}} {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64}
// CHECK-NEXT:    stablehlo.multiply %{{.*}} {jaxpp.kind = "bwd", jaxpp.segment = 1 : i64}
// CHECK-NEXT:    stablehlo.multiply %{{.*}} {jaxpp.kind = "bwd", jaxpp.segment = 1 : i64}
// CHECK-NEXT:    stablehlo.multiply %{{.*}} {jaxpp.kind = "bwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:    stablehlo.multiply %{{.*}} {jaxpp.kind = "bwd", jaxpp.segment = 0 : i64}
module @named_scope_calls {
  func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %x : tensor<2x4xf32> loc("jit(step)/jvp(lm)/norm/tanh")
    %1 = stablehlo.sine %0 : tensor<2x4xf32> loc("jit(step)/jvp(lm)/mixer/sin")
    %2 = stablehlo.cosine %1 : tensor<2x4xf32> loc("jit(step)/jvp(lm)/mixer/cos")
    %3 = stablehlo.tanh %2 : tensor<2x4xf32> loc("jit(step)/jvp(lm)/norm/tanh")
    %4 = stablehlo.sine %3 : tensor<2x4xf32> loc("jit(step)/jvp(lm)/mixer/sin")
    %5 = stablehlo.cosine %4 : tensor<2x4xf32> loc("jit(step)/jvp(lm)/mixer/cos")
    %6 = stablehlo.tanh %5 : tensor<2x4xf32> loc("jit(step)/jvp(lm)/norm/tanh")
    %7 = stablehlo.multiply %6, %5 : tensor<2x4xf32> loc("jit(step)/transpose(jvp(lm))/norm/mul")
    %8 = stablehlo.multiply %7, %4 : tensor<2x4xf32> loc("jit(step)/transpose(jvp(lm))/mixer/mul")
    %9 = stablehlo.multiply %8, %3 : tensor<2x4xf32> loc("jit(step)/transpose(jvp(lm))/norm/mul")
    %10 = stablehlo.multiply %9, %1 : tensor<2x4xf32> loc("jit(step)/transpose(jvp(lm))/mixer/mul")
    return %10 : tensor<2x4xf32>
  }
}
