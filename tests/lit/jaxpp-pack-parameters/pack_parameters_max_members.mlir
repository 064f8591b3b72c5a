// RUN: jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-pack-parameters{max-members=2})' | filecheck %s
// RUN: not jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-pack-parameters{max-members=1})' 2>&1 | filecheck %s --check-prefix=TOO-FEW

// With max-members=2, the first two of stage 0's three parameters share one
// 2x4 buffer; the third, alone in the next group, is read as it is.

// CHECK-LABEL: module @three_parameters
// CHECK-NEXT:    func.func @main(%[[A:[a-z0-9]+]]: tensor<4xf32>, %[[B:[a-z0-9]+]]: tensor<4xf32>, %[[C:[a-z0-9]+]]: tensor<4xf32>
// CHECK:           %[[P:.*]] = stablehlo.concatenate {{.*}} -> tensor<2x4xf32>
// CHECK-NEXT:      "jaxpp.loop"
// CHECK:             stablehlo.slice %[[P]] [0:1, 0:4]
// CHECK:             stablehlo.slice %[[P]] [1:2, 0:4]
// CHECK:             stablehlo.multiply %{{.*}}, %[[C]]
// TOO-FEW: pass 'jaxpp-pack-parameters': option 'max-members' must be at least 2, got 1
module @three_parameters attributes {jaxpp.num_stages = 1 : i64} {
  func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<4xf32>, %l0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "jaxpp.loop"(%l0) ({
    ^bb0(%i: tensor<i32>, %acc: tensor<4xf32>):
      %ab = stablehlo.add %a, %b {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<4xf32>
      %abc = stablehlo.multiply %ab, %c {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<4xf32>
      %n = stablehlo.add %acc, %abc {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<4xf32>
      "jaxpp.yield"(%n) : (tensor<4xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
