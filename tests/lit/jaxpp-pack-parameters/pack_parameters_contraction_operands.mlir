// RUN: jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-pack-parameters{contraction-operands=false})' | filecheck %s
// RUN: jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-pack-parameters)' | filecheck %s --check-prefix=ALL

// With contraction-operands=false, the weight and the input (both read by a
// dot_general) stay buffers of their own and the two biases share one; by
// default all four share one (the weight's 4 rows, one row for each other).

// CHECK-LABEL: module @weight_and_two_biases
// CHECK-NEXT:    func.func @main(%[[W:[a-z0-9]+]]: tensor<4x4xf32>
// CHECK:           %[[P:.*]] = stablehlo.concatenate {{.*}} -> tensor<2x4xf32>
// CHECK-NEXT:      "jaxpp.loop"
// CHECK:             stablehlo.dot_general %{{.*}}, %[[W]]
// CHECK:             stablehlo.slice %[[P]] [0:1, 0:4]
// CHECK:             stablehlo.slice %[[P]] [1:2, 0:4]

// ALL-LABEL: module @weight_and_two_biases
// ALL:           stablehlo.concatenate %arg0, %{{.*}}, %{{.*}}, %{{.*}}, dim = 0 {{.*}} -> tensor<7x4xf32>
module @weight_and_two_biases attributes {jaxpp.num_stages = 1 : i64} {
  func.func @main(%w: tensor<4x4xf32>, %b1: tensor<4xf32>, %b2: tensor<4xf32>, %xs: tensor<4xf32>, %l0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "jaxpp.loop"(%l0) ({
    ^bb0(%i: tensor<i32>, %acc: tensor<4xf32>):
      %h = stablehlo.dot_general %xs, %w, contracting_dims = [0] x [0] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<4xf32>, tensor<4x4xf32>) -> tensor<4xf32>
      %hb = stablehlo.add %h, %b1 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<4xf32>
      %hbb = stablehlo.multiply %hb, %b2 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<4xf32>
      %n = stablehlo.add %acc, %hbb {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<4xf32>
      "jaxpp.yield"(%n) : (tensor<4xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
