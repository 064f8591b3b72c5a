// RUN: jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-inline-calls)' | filecheck %s

// A public function is visible outside the module: it is inlined into @main
// but kept (the postcondition only erases private functions).

// CHECK-LABEL: module @public_callee_kept
// CHECK-NEXT:    func.func @main(%[[ARG:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[TANH:.*]] = stablehlo.tanh %[[ARG]] : tensor<2x4xf32>
// CHECK-NEXT:      return %[[TANH]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func @helper(%[[HARG:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[HTANH:.*]] = stablehlo.tanh %[[HARG]] : tensor<2x4xf32>
// CHECK-NEXT:      return %[[HTANH]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @public_callee_kept {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = call @helper(%arg0) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func @helper(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}
