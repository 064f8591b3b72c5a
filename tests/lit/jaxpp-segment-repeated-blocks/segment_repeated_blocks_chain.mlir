// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-assign-segments{chained=true optional=true},jaxpp-segment-repeated-blocks{chained=true optional=false})' | filecheck %s

// The segment slot of partition's pipeline: each segmenter cuts the step only where it
// applies and no segmenter before it did. Without markers, jaxpp-assign-segments leaves
// the step to the repeated blocks; with markers, the markers cut it and
// jaxpp-segment-repeated-blocks leaves it alone.

// CHECK-LABEL: module @unmarked attributes {jaxpp.num_segments = 2 : i64, jaxpp.segment_starts = ["Model/layers_1"], jaxpp.segmenter = "jaxpp-segment-repeated-blocks"}
// CHECK:         stablehlo.tanh %{{.*}} {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:    stablehlo.tanh %{{.*}} {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64}
module @unmarked {
  func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %x : tensor<2x4xf32> loc("jit(step)/jvp(Model)/layers_0/tanh")
    %1 = stablehlo.tanh %0 : tensor<2x4xf32> loc("jit(step)/jvp(Model)/layers_1/tanh")
    return %1 : tensor<2x4xf32>
  }
}

// -----

// CHECK-LABEL: module @marked attributes {jaxpp.num_segments = 1 : i64}
// CHECK:         stablehlo.tanh %{{.*}} {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:    stablehlo.optimization_barrier {jaxpp.kind = "fwd", jaxpp.marker = "fwd", jaxpp.segment = 0 : i64}
// CHECK-NEXT:    stablehlo.tanh %{{.*}} {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64}
module @marked {
  func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %x : tensor<2x4xf32> loc("jit(step)/jvp(Model)/layers_0/tanh")
    %1 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %0 : tensor<2x4xf32>
    %2 = stablehlo.tanh %1 : tensor<2x4xf32> loc("jit(step)/jvp(Model)/layers_1/tanh")
    return %2 : tensor<2x4xf32>
  }
}
