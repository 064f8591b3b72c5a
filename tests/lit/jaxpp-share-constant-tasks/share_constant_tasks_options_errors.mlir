// RUN: not jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-share-constant-tasks{max-bytes=-1})' 2>&1 | filecheck %s --check-prefix=NEGATIVE
// RUN: not jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-share-constant-tasks{max-bytes=lots})' 2>&1 | filecheck %s --check-prefix=NOT-INT

// The option is checked before the input is read, as a wrong command line.

// NEGATIVE: jaxpp-opt: error: pass 'jaxpp-share-constant-tasks': option 'max-bytes' must be at least 0, got -1
// NOT-INT: jaxpp-opt: error: pass 'jaxpp-share-constant-tasks': option 'max-bytes' expects int, got 'lots'
module {
  func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    return %arg0 : tensor<4xf32>
  }
}
