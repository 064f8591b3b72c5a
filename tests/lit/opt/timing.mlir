// --timing (alias --mlir-timing) prints, to stderr, the wall time of every pass run, in
// order, then the total, like mlir-opt's -mlir-timing; the output IR is unchanged.

// RUN: jaxpp-opt %s --pass-pipeline='builtin.module(canonicalize,cse)' --timing 2>&1 >/dev/null | filecheck %s
// RUN: jaxpp-opt %s --pass-pipeline='builtin.module(canonicalize,cse)' --mlir-timing 2>&1 >/dev/null | filecheck %s
// RUN: jaxpp-opt %s --pass-pipeline='builtin.module(canonicalize,cse)' --timing 2>/dev/null | filecheck %s --check-prefix=IR
// RUN: jaxpp-opt %s --pass-pipeline='builtin.module(canonicalize)' 2>&1 | filecheck %s --check-prefix=OFF

// CHECK: ... Execution time report ...
// CHECK: Total Execution Time: {{[0-9]+\.[0-9]+}} seconds
// CHECK: ----Wall Time----  ----Name----
// CHECK-NEXT: {{[0-9]+\.[0-9]+}} ({{ *[0-9]+\.[0-9]}}%)  canonicalize
// CHECK-NEXT: {{[0-9]+\.[0-9]+}} ({{ *[0-9]+\.[0-9]}}%)  cse
// CHECK-NEXT: {{[0-9]+\.[0-9]+}} (100.0%)  Total

// IR-LABEL: func.func @add
// IR-NOT: Execution time report

// OFF-NOT: Execution time report

func.func @add(%a: i32) -> i32 {
  %0 = arith.addi %a, %a : i32
  return %0 : i32
}
