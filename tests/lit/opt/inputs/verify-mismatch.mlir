// Input of verify-diagnostics-mismatch.mlir: every chunk but the first has a
// mismatch between its expected-* comments and what is emitted.

func.func @all_expected() -> i32 {
  // expected-error @+1 {{has 0 operands}}
  return
}

// -----

func.func @missing() -> i32 {
  // expected-error @+1 {{this error is never emitted}}
  %0 = arith.constant 0 : i32
  return %0 : i32
}

// -----

func.func @unexpected() -> i32 {
  return
}

// -----

func.func @wrong_line() -> i32 {
  // expected-error @+2 {{has 0 operands}}
  return
}

// -----

func.func @wrong_kind() -> i32 {
  // expected-warning @+1 {{has 0 operands}}
  return
}
