// Without a pipeline, jaxpp-opt parses, verifies and prints the module, from a
// file or from stdin, to stdout or to -o FILE.

// RUN: jaxpp-opt %s | filecheck %s
// RUN: jaxpp-opt < %s | filecheck %s
// RUN: jaxpp-opt - < %s | filecheck %s
// RUN: jaxpp-opt %s -o %t
// RUN: filecheck %s --input-file %t
// RUN: jaxpp-opt %s --emit-bytecode -o %t.mlirbc
// RUN: jaxpp-opt %t.mlirbc | filecheck %s
// RUN: jaxpp-opt %s --mlir-print-op-generic | filecheck %s --check-prefix=GENERIC

// CHECK-LABEL: func.func @identity
// CHECK-SAME: (%[[ARG:.*]]: tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: return %[[ARG]] : tensor<4xf32>
// GENERIC: "func.func"()
// GENERIC: "func.return"
func.func @identity(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// CHECK-LABEL: func.func @unregistered_op
// CHECK-NEXT: %[[R:.*]] = "jaxpp.custom"(%{{.*}}) {stage = 1 : i64} : (i32) -> i32
// CHECK-NEXT: return %[[R]] : i32
func.func @unregistered_op(%x: i32) -> i32 {
  %0 = "jaxpp.custom"(%x) {stage = 1} : (i32) -> i32
  return %0 : i32
}
