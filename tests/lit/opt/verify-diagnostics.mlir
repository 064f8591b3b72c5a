// --verify-diagnostics checks the diagnostics against the expected-* comments;
// every form of designator, in chunks of a split file (lines are the file's).

// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics | filecheck %s
// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics -p cse,canonicalize | filecheck %s

// The chunks that fail print nothing; the others print their module.
// CHECK-LABEL: func.func @no_diagnostic
// CHECK: // -----
// CHECK-NEXT: // -----
// CHECK-NEXT: // -----
// CHECK-NEXT: // -----
// CHECK-NEXT: // -----
// CHECK-NEXT: // -----
// CHECK-NEXT: // -----
// CHECK-NEXT: // -----
// CHECK-NEXT: // -----
// CHECK-NEXT: // -----
// CHECK-LABEL: func.func @last_chunk_is_fine

func.func @no_diagnostic() {
  return
}

// -----

func.func @next_line() -> i32 {
  // expected-error @+1 {{'func.return' op has 0 operands, but enclosing function (@next_line) returns 1}}
  return
}

// -----

func.func @same_line() -> i32 {
  return  // expected-error {{has 0 operands}}
}

// -----

func.func @previous_line() -> i32 {
  return
  // expected-error @-1 {{has 0 operands}}
}

// -----

func.func @above() -> i32 {
  return
  // expected-error @above {{has 0 operands}}
}

// -----

func.func @below() -> i32 {
  // expected-error @below {{has 0 operands}}
  return
}

// -----

func.func @regex() -> i32 {
  // expected-error-re @+1 {{enclosing function (@{{[a-z_]+}}) returns {{[0-9]+}}}}
  return
}

// -----

// A parse error, as opposed to a verifier error.
func.func @parse_error(%a: i32) -> i32 {
  // expected-error @+1 {{use of undeclared SSA value name}}
  return %undefined : i32
}

// -----

func.func @two_lines_down() -> i32 {
  // expected-error @+2 {{has 0 operands}}

  return
}

// -----

// expected-error @below {{custom op 'func.not_an_op' is unknown}}
func.not_an_op

// -----

func.func @last_chunk_is_fine(%a: i32) -> i32 {
  return %a : i32
}
