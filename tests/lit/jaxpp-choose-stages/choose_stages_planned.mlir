// RUN: jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-choose-stages{schedule={kind = "Std1F1B", num_stages = 2} mpmd-dim=2})' | filecheck %s

// Three segments for a schedule of two stages: the planner merges neighbouring segments.
// Segment 0 holds three 64x64 matrix products, segments 1 and 2 one elementwise op of 8
// elements each: any split that puts segment 0 with another one makes its stage
// slower, so the split is (1, 2), and the module records the planner's estimate of it.

// CHECK-LABEL: module @heavy_first_segment attributes {
// CHECK-SAME:    jaxpp.num_segments = 3 : i64, jaxpp.num_stages = 2 : i64,
// CHECK-SAME:    jaxpp.schedule = {kind = "Std1F1B", num_stages = 2 : i64},
// CHECK-SAME:    jaxpp.stage_estimate = {bubble = {{.*}}, launches = 16 : i64, peak_bytes = [{{.*}}], split = [1, 2], stage_backward_s = [{{.*}}], stage_forward_s = [{{.*}}], step_s = {{.*}}},
// CHECK-SAME:    jaxpp.stage_split = array<i64: 1, 2>}
// CHECK:           stablehlo.dot_general {{.*}} {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64}
// CHECK-NEXT:      stablehlo.dot_general {{.*}} {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64}
// CHECK-NEXT:      stablehlo.dot_general {{.*}} {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64}
// CHECK-NEXT:      stablehlo.sine {{.*}} {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64}
// CHECK-NEXT:      stablehlo.cosine {{.*}} {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64}
// CHECK-NEXT:      stablehlo.negate {{.*}} {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64}
// CHECK-NEXT:      stablehlo.negate {{.*}} {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64}
// CHECK-NEXT:      stablehlo.negate {{.*}} {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64}
module @heavy_first_segment attributes {jaxpp.num_segments = 3 : i64} {
  func.func @main(%w: tensor<64x64xf32>, %x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = "jaxpp.loop"(%x) ({
    ^bb0(%i: tensor<i32>, %acc: tensor<2x4xf32>):
      %1 = stablehlo.dot_general %w, %w, contracting_dims = [1] x [0] {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64} : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
      %2 = stablehlo.dot_general %1, %w, contracting_dims = [1] x [0] {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64} : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
      %3 = stablehlo.dot_general %2, %w, contracting_dims = [1] x [0] {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64} : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
      %4 = stablehlo.sine %acc {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64} : tensor<2x4xf32>
      %5 = stablehlo.cosine %4 {jaxpp.kind = "fwd", jaxpp.segment = 2 : i64} : tensor<2x4xf32>
      %6 = stablehlo.negate %5 {jaxpp.kind = "bwd", jaxpp.segment = 2 : i64} : tensor<2x4xf32>
      %7 = stablehlo.negate %6 {jaxpp.kind = "bwd", jaxpp.segment = 1 : i64} : tensor<2x4xf32>
      %8 = stablehlo.negate %7 {jaxpp.kind = "bwd", jaxpp.segment = 0 : i64} : tensor<2x4xf32>
      "jaxpp.yield"(%8) : (tensor<2x4xf32>) -> ()
    }) {jaxpp.num_microbatches = 4 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}
