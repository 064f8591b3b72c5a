// --verify-diagnostics fails (exit status 1) on a missing, an unexpected, a
// misplaced or a wrong-kind diagnostic, and says which, in mlir-opt's words.

// RUN: not jaxpp-opt %S/inputs/verify-mismatch.mlir --split-input-file --verify-diagnostics 2>&1 \
// RUN:   | filecheck %s

// CHECK-NOT: Traceback
// CHECK: verify-mismatch.mlir:12:6: error: expected error "this error is never emitted" was not produced
// CHECK: verify-mismatch.mlir:20:3: error: unexpected error: 'func.return' op has 0 operands, but enclosing function (@unexpected) returns 1
// CHECK-NEXT: {{^  return$}}
// CHECK-NEXT: {{^  \^$}}
// CHECK: verify-mismatch.mlir:27:3: error: unexpected error: 'func.return' op has 0 operands
// CHECK: verify-mismatch.mlir:26:6: error: expected error "has 0 operands" was not produced
// CHECK: verify-mismatch.mlir:33:6: error: 'error' diagnostic emitted when expecting a 'warning'
// CHECK: verify-mismatch.mlir:33:6: error: expected warning "has 0 operands" was not produced
// CHECK-NOT: Traceback
