// A registered jaxpp pass runs in a pipeline or as its own flag, with or
// without options, before or after textual MLIR passes.

// RUN: jaxpp-opt %s -p jaxpp-inline-calls | filecheck %s
// RUN: jaxpp-opt %s -p 'jaxpp-inline-calls{max-depth=4},canonicalize' | filecheck %s
// RUN: jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-inline-calls{max-depth=4})' | filecheck %s
// RUN: jaxpp-opt %s --jaxpp-inline-calls | filecheck %s
// RUN: jaxpp-opt %s --jaxpp-inline-calls='max-depth=4' --canonicalize | filecheck %s
// RUN: jaxpp-opt %s --jaxpp-inline-calls='{max-depth=4}' | filecheck %s
// RUN: jaxpp-opt %s --cse --jaxpp-inline-calls=max-depth=4 --print-ir-after-all -o %t 2>&1 \
// RUN:   | filecheck %s --check-prefix=ORDER

// CHECK-LABEL: func.func @main
// CHECK-NOT: call @square
// CHECK: arith.mulf
// CHECK-NOT: call @square
// CHECK: return
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = func.call @square(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

func.func private @square(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = arith.mulf %x, %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// ORDER: // -----// IR Dump After cse (cse) //----- //
// ORDER: call @square
// ORDER: // -----// IR Dump After jaxpp-inline-calls (jaxpp-inline-calls) //----- //
// ORDER-NOT: call @square
