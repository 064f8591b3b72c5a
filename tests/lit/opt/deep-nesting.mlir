// Input nesting deeper than 1000 levels is refused before MLIR's recursive parser
// sees it (it would overflow the C stack): a clean error, exit status 1.

// RUN: %python -c "print('module {' * 5000 + '}' * 5000)" > %t.mlir
// RUN: not jaxpp-opt %t.mlir 2>&1 | filecheck %s --check-prefix=DEEP
// DEEP: jaxpp-opt: error: MLIR text nests deeper than 1000 levels (line 1); refusing to parse it

// Braces inside strings and comments do not count: this file parses.
// RUN: jaxpp-opt %s | filecheck %s
// CHECK: "x.op"() {text = 
"x.op"() {text = "{{[{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{"} : () -> ()
