// --print-ir-* print the IR to stderr around passes, with mlir-opt's headers.

// RUN: jaxpp-opt %s -p cse,canonicalize --print-ir-after-all -o %t 2>&1 \
// RUN:   | filecheck %s --check-prefix=AFTER-ALL
// RUN: jaxpp-opt %s -p cse,canonicalize --print-ir-before-all -o %t 2>&1 \
// RUN:   | filecheck %s --check-prefix=BEFORE-ALL
// RUN: jaxpp-opt %s -p cse,canonicalize --print-ir-after=canonicalize -o %t 2>&1 \
// RUN:   | filecheck %s --check-prefix=AFTER-ONE
// RUN: jaxpp-opt %s -p cse,canonicalize --print-ir-before=cse --print-ir-before=canonicalize \
// RUN:   -o %t 2>&1 | filecheck %s --check-prefix=BEFORE-TWO
// RUN: jaxpp-opt %s -p cse,canonicalize --print-ir-after=cse --mlir-print-debuginfo -o %t 2>&1 \
// RUN:   | filecheck %s --check-prefix=DEBUGINFO

// AFTER-ALL-NOT: IR Dump Before
// AFTER-ALL: // -----// IR Dump After cse (cse) //----- //
// AFTER-ALL-NEXT: module {
// AFTER-ALL: arith.addi
// AFTER-ALL-NOT: arith.addi
// AFTER-ALL: // -----// IR Dump After canonicalize (canonicalize) //----- //
// AFTER-ALL-NEXT: module {
// AFTER-ALL-NOT: IR Dump

// BEFORE-ALL-NOT: IR Dump After
// BEFORE-ALL: // -----// IR Dump Before cse (cse) //----- //
// BEFORE-ALL: arith.addi
// BEFORE-ALL: arith.addi
// BEFORE-ALL: // -----// IR Dump Before canonicalize (canonicalize) //----- //
// BEFORE-ALL-NOT: IR Dump After

// AFTER-ONE-NOT: IR Dump After cse
// AFTER-ONE: // -----// IR Dump After canonicalize (canonicalize) //----- //
// AFTER-ONE-NOT: IR Dump

// BEFORE-TWO: // -----// IR Dump Before cse (cse) //----- //
// BEFORE-TWO: // -----// IR Dump Before canonicalize (canonicalize) //----- //

// DEBUGINFO: // -----// IR Dump After cse (cse) //----- //
// DEBUGINFO: loc("{{.*}}print-ir.mlir":{{[0-9]+}}:{{[0-9]+}})

func.func @twice(%a: i32) -> i32 {
  %0 = arith.addi %a, %a : i32
  %1 = arith.addi %a, %a : i32
  %2 = arith.muli %0, %1 : i32
  return %2 : i32
}
