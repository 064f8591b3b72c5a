// --split-input-file runs each chunk as its own module and joins the outputs with
// '// -----'. The same symbol name may appear in several chunks.

// RUN: jaxpp-opt %s --split-input-file -p canonicalize | filecheck %s
// RUN: not jaxpp-opt %s 2>&1 | filecheck %s --check-prefix=WHOLE

// CHECK-LABEL: func.func @f
// CHECK-NEXT: return %arg0 : i32
// CHECK: // -----
// CHECK-LABEL: func.func @f
// CHECK-NEXT: %[[C:.*]] = arith.constant 3 : i32
// CHECK-NEXT: return %[[C]] : i32
// CHECK: // -----
// CHECK: module {
// CHECK-NEXT: }

// Without --split-input-file the file is one module, where @f is defined twice.
// WHOLE: split-input-file.mlir:26:1: error: redefinition of symbol named 'f'

func.func @f(%a: i32) -> i32 {
  return %a : i32
}

// -----

func.func @f(%a: i32) -> i32 {
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %0 = arith.addi %c1, %c2 : i32
  return %0 : i32
}

// -----

// An empty chunk gives an empty module.
