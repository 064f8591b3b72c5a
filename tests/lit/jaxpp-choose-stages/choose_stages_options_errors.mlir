// RUN: not jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-choose-stages{stage-split=2,0,1})' 2>&1 | filecheck %s --check-prefix=EMPTY-STAGE
// RUN: not jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-choose-stages{schedule={kind = "GPipe" extra}})' 2>&1 | filecheck %s --check-prefix=BAD-RECORD
// RUN: not jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-choose-stages{schedule=Wavy})' 2>&1 | filecheck %s --check-prefix=BAD-NAME

// A stage of no segment is refused before the input is read, as a wrong command line.
// EMPTY-STAGE: option 'stage-split' entries must be at least 1, got 0

// A schedule option that is no attribute, or names no built-in schedule, is refused
// with the text it could not read.
// BAD-RECORD: error: {{.*}}option 'schedule': '{kind = "GPipe" extra}' is not an MLIR attribute
// BAD-NAME: error: 'Wavy' is not a built-in schedule name (known: GPipe, Std1F1B,

module @some_stages attributes {jaxpp.num_segments = 3 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64} : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}
