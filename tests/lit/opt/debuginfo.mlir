// --mlir-print-debuginfo prints the locations, with the input's file name and lines.

// RUN: jaxpp-opt %s --mlir-print-debuginfo | filecheck %s
// RUN: jaxpp-opt %s --split-input-file --mlir-print-debuginfo | filecheck %s --check-prefix=SPLIT

// CHECK: func.func @located(%arg0: i32 loc("{{.*}}debuginfo.mlir":12:20))
// CHECK: #loc{{[0-9]*}} = loc("{{.*}}debuginfo.mlir":13:8)
// SPLIT: #loc{{[0-9]*}} = loc("{{.*}}debuginfo.mlir":13:8)
// SPLIT: // -----
// SPLIT: #loc{{[0-9]*}} = loc("{{.*}}debuginfo.mlir":20:8)

func.func @located(%a: i32) -> i32 {
  %0 = arith.addi %a, %a : i32
  return %0 : i32
}

// -----

func.func @located_in_second_chunk(%a: i32) -> i32 {
  %0 = arith.addi %a, %a : i32
  return %0 : i32
}
