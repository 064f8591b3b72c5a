// RUN: jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-pack-accumulators{max-members=2})' | filecheck %s
// RUN: not jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-pack-accumulators{max-members=1})' 2>&1 | filecheck %s --check-prefix=TOO-FEW

// With max-members=2, the first two of stage 0's three accumulators share one
// 2x4 buffer; the third, alone in the next group, stays as it is.

// CHECK-LABEL: module @three_accumulators
// CHECK:           %[[INIT:.*]] = stablehlo.concatenate {{.*}} -> tensor<2x4xf32>
// CHECK-NEXT:      "jaxpp.loop"(%arg0, %[[INIT]])
// CHECK-NEXT:      ^bb0(%{{.*}}: tensor<i32>, %[[C:.*]]: tensor<4xf32>, %[[PACKED:.*]]: tensor<2x4xf32>):
// CHECK:             %[[NC:.*]] = stablehlo.add %[[C]], %{{.*}} : tensor<4xf32>
// CHECK:             %[[U:.*]] = stablehlo.add %[[PACKED]], %{{.*}} : tensor<2x4xf32>
// CHECK-NEXT:        "jaxpp.yield"(%[[NC]], %[[U]])

// TOO-FEW: pass 'jaxpp-pack-accumulators': option 'max-members' must be at least 2, got 1

module @three_accumulators attributes {jaxpp.num_stages = 1 : i64} {
  func.func @main(%arg0: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
    %0:3 = "jaxpp.loop"(%arg0, %arg0, %arg0) ({
    ^bb0(%i: tensor<i32>, %a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<4xf32>):
      %s = stablehlo.sine %arg0 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4xf32>
      %na = stablehlo.add %a, %s {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4xf32>
      %nb = stablehlo.add %b, %s {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4xf32>
      %nc = stablehlo.add %c, %s {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4xf32>
      "jaxpp.yield"(%na, %nb, %nc) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
    return %0#0, %0#1, %0#2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }
}
