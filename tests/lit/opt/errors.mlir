// Errors of the user (command line, input) give one clear message, a non-zero
// exit status and never a Python traceback.

// RUN: not jaxpp-opt %s -p no-such-pass 2>&1 | filecheck %s --check-prefix=UNKNOWN-MLIR
// UNKNOWN-MLIR-NOT: Traceback
// UNKNOWN-MLIR: jaxpp-opt: error: bad pipeline element 'no-such-pass': 'no-such-pass' does not refer to a registered pass or pass pipeline

// RUN: not jaxpp-opt %s -p jaxpp-no-such-pass 2>&1 | filecheck %s --check-prefix=UNKNOWN-JAXPP
// RUN: not jaxpp-opt %s --jaxpp-no-such-pass 2>&1 | filecheck %s --check-prefix=UNKNOWN-JAXPP
// UNKNOWN-JAXPP-NOT: Traceback
// UNKNOWN-JAXPP: jaxpp-opt: error: unknown pass 'jaxpp-no-such-pass' (see jaxpp-opt --list-passes)

// RUN: not jaxpp-opt %s -p 'jaxpp-inline-calls{no-such-option=1}' 2>&1 | filecheck %s --check-prefix=OPTION
// RUN: not jaxpp-opt %s --jaxpp-inline-calls=no-such-option=1 2>&1 | filecheck %s --check-prefix=OPTION
// OPTION-NOT: Traceback
// OPTION: jaxpp-opt: error: pass 'jaxpp-inline-calls' has no option 'no-such-option'

// RUN: not jaxpp-opt %s -p 'jaxpp-inline-calls{max-depth=many}' 2>&1 | filecheck %s --check-prefix=OPTION-VALUE
// OPTION-VALUE-NOT: Traceback
// OPTION-VALUE: jaxpp-opt: error: pass 'jaxpp-inline-calls': option 'max-depth' expects int, got 'many'

// RUN: not jaxpp-opt %s -p 'canonicalize{no-such-option=1}' 2>&1 | filecheck %s --check-prefix=MLIR-OPTION
// MLIR-OPTION-NOT: Traceback
// MLIR-OPTION: jaxpp-opt: error: bad pipeline element 'canonicalize{no-such-option=1}': no such option no-such-option

// RUN: not jaxpp-opt %s -p 'builtin.module(cse' 2>&1 | filecheck %s --check-prefix=SYNTAX
// SYNTAX-NOT: Traceback
// SYNTAX: jaxpp-opt: error:

// RUN: not jaxpp-opt %s -p cse --canonicalize 2>&1 | filecheck %s --check-prefix=MIXED
// MIXED: jaxpp-opt: error: -p/--pass-pipeline cannot be combined with pass flags (--canonicalize)

// RUN: not jaxpp-opt %s --no-such-flag 2>&1 | filecheck %s --check-prefix=FLAG
// FLAG: jaxpp-opt: error: unrecognized arguments: --no-such-flag

// RUN: not jaxpp-opt %s -p cse --print-ir-after=no-such-pass 2>&1 | filecheck %s --check-prefix=PRINT
// PRINT: jaxpp-opt: error: --print-ir-after: unknown pass 'no-such-pass'

// RUN: not jaxpp-opt %S/inputs/malformed.mlir 2>&1 | filecheck %s --check-prefix=MALFORMED
// RUN: not jaxpp-opt < %S/inputs/malformed.mlir 2>&1 | filecheck %s --check-prefix=MALFORMED-STDIN
// MALFORMED-NOT: Traceback
// MALFORMED: {{.*}}inputs/malformed.mlir:3:22: error: expected SSA operand
// MALFORMED-NEXT: {{^  %0 = arith.addi %a, : i32$}}
// MALFORMED-NEXT: {{^                     \^$}}
// MALFORMED-STDIN: <stdin>:3:22: error: expected SSA operand

// RUN: not jaxpp-opt %t.no-such-file.mlir 2>&1 | filecheck %s --check-prefix=MISSING
// MISSING-NOT: Traceback
// MISSING: jaxpp-opt: error: cannot read '{{.*}}no-such-file.mlir': No such file or directory

func.func @f(%a: i32) -> i32 {
  return %a : i32
}
