// The three ways of writing a pipeline of textual MLIR passes give the same result.

// RUN: jaxpp-opt %s --pass-pipeline='builtin.module(cse,canonicalize)' | filecheck %s
// RUN: jaxpp-opt %s -p 'builtin.module(cse,canonicalize)' | filecheck %s
// RUN: jaxpp-opt %s -p cse,canonicalize | filecheck %s
// RUN: jaxpp-opt %s --cse --canonicalize | filecheck %s
// RUN: jaxpp-opt %s -p 'func.func(cse),canonicalize{max-iterations=4}' | filecheck %s
// RUN: jaxpp-opt %s --cse --canonicalize='max-iterations=4 region-simplify=disabled' | filecheck %s
// RUN: jaxpp-opt %s --no-verify-each -p cse,canonicalize | filecheck %s

// CHECK-LABEL: func.func @duplicates_and_zero
// CHECK-SAME: (%[[A:.*]]: i32)
// CHECK-NEXT: %[[SUM:.*]] = arith.addi %[[A]], %[[A]] : i32
// CHECK-NEXT: %[[PRODUCT:.*]] = arith.muli %[[SUM]], %[[SUM]] : i32
// CHECK-NEXT: return %[[PRODUCT]] : i32
func.func @duplicates_and_zero(%a: i32) -> i32 {
  %zero = arith.constant 0 : i32
  %0 = arith.addi %a, %a : i32
  %1 = arith.addi %a, %a : i32
  %2 = arith.muli %0, %1 : i32
  %3 = arith.addi %2, %zero : i32
  return %3 : i32
}
