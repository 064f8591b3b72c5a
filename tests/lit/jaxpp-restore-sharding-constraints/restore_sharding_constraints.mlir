// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-restore-sharding-constraints)' | filecheck %s
// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-restore-sharding-constraints)' --mlir-print-debuginfo | filecheck %s --check-prefix=LOC

// Every sdy.reshard (what sdy-propagation-pipeline makes of a
// with_sharding_constraint) becomes an sdy.sharding_constraint on the same
// operand with the same sharding, open dimensions and replicated axes
// included, and at the same location; its uses now read the constraint.

// CHECK-LABEL: module @reshards_in_main {
// CHECK-NEXT:    sdy.mesh @mesh = <["stage"=1, "data"=2, "model"=2]>
// CHECK-NEXT:    func.func @main(%[[X:.*]]: tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT:      %[[ROWS:.*]] = sdy.sharding_constraint %[[X]] <@mesh, [{"data", ?}, {}], replicated={"model"}> : tensor<4x8xf32>
// CHECK-NEXT:      %[[TANH:.*]] = stablehlo.tanh %[[ROWS]] : tensor<4x8xf32>
// CHECK-NEXT:      %[[COLS:.*]] = sdy.sharding_constraint %[[TANH]] <@mesh, [{}, {"model"}]> : tensor<4x8xf32>
// CHECK-NEXT:      %[[REPL:.*]] = sdy.sharding_constraint %[[COLS]] <@mesh, [{}, {}]> : tensor<4x8xf32>
// CHECK-NEXT:      return %[[REPL]] : tensor<4x8xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }

// LOC-LABEL: module @reshards_in_main {
// LOC:           sdy.sharding_constraint %{{.*}} <@mesh, [{"data", ?}, {}], replicated={"model"}> : tensor<4x8xf32> loc(#[[ROWS_LOC:loc[0-9]*]])
// LOC:           sdy.sharding_constraint %{{.*}} <@mesh, [{}, {"model"}]> : tensor<4x8xf32> loc(#[[COLS_LOC:loc[0-9]*]])
// LOC-DAG:   #[[ROWS_LOC]] = loc("rows")
// LOC-DAG:   #[[COLS_LOC]] = loc("cols")
module @reshards_in_main {
  sdy.mesh @mesh = <["stage"=1, "data"=2, "model"=2]>
  func.func @main(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = sdy.reshard %arg0 <@mesh, [{"data", ?}, {}], replicated={"model"}> : tensor<4x8xf32> loc("rows")
    %1 = stablehlo.tanh %0 : tensor<4x8xf32>
    %2 = sdy.reshard %1 <@mesh, [{}, {"model"}]> : tensor<4x8xf32> loc("cols")
    %3 = sdy.reshard %2 <@mesh, [{}, {}]> : tensor<4x8xf32>
    return %3 : tensor<4x8xf32>
  }
}

// -----

// Nested reshards are rewritten too (a while body, a function other than
// @main), and a result sharding Shardy wrote on a reshard (`sdy.sharding`)
// stays on the constraint.

// CHECK-LABEL: module @nested_reshards {
// CHECK-NEXT:    sdy.mesh @mesh = <["stage"=1, "data"=2, "model"=2]>
// CHECK-NEXT:    func.func @main(%[[X:.*]]: tensor<4x8xf32>, %[[N:.*]]: tensor<i32>) -> tensor<4x8xf32> {
// CHECK-NEXT:      %[[WHILE:.*]]:2 = stablehlo.while(%[[ITER:.*]] = %[[X]], %[[I:.*]] = %[[N]]) : tensor<4x8xf32>, tensor<i32>
// CHECK-NEXT:      cond {
// CHECK-NEXT:        %[[LT:.*]] = stablehlo.compare LT, %[[I]], %[[N]], SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
// CHECK-NEXT:        stablehlo.return %[[LT]] : tensor<i1>
// CHECK-NEXT:      } do {
// CHECK-NEXT:        %[[ROWS:.*]] = sdy.sharding_constraint %[[ITER]] <@mesh, [{"data"}, {}]> {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data"}, {}]>]>} : tensor<4x8xf32>
// CHECK-NEXT:        %[[CALL:.*]] = func.call @layer(%[[ROWS]]) : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:        stablehlo.return %[[CALL]], %[[I]] : tensor<4x8xf32>, tensor<i32>
// CHECK-NEXT:      }
// CHECK-NEXT:      return %[[WHILE]]#0 : tensor<4x8xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @layer(%[[A:.*]]: tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT:      %[[COLS:.*]] = sdy.sharding_constraint %[[A]] <@mesh, [{}, {"model"}]> : tensor<4x8xf32>
// CHECK-NEXT:      return %[[COLS]] : tensor<4x8xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @nested_reshards {
  sdy.mesh @mesh = <["stage"=1, "data"=2, "model"=2]>
  func.func @main(%arg0: tensor<4x8xf32>, %arg1: tensor<i32>) -> tensor<4x8xf32> {
    %0:2 = stablehlo.while(%iterArg = %arg0, %iterArg_0 = %arg1) : tensor<4x8xf32>, tensor<i32>
    cond {
      %1 = stablehlo.compare LT, %iterArg_0, %arg1, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %1 = sdy.reshard %iterArg <@mesh, [{"data"}, {}]> {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data"}, {}]>]>} : tensor<4x8xf32>
      %2 = func.call @layer(%1) : (tensor<4x8xf32>) -> tensor<4x8xf32>
      stablehlo.return %2, %iterArg_0 : tensor<4x8xf32>, tensor<i32>
    }
    return %0#0 : tensor<4x8xf32>
  }
  func.func private @layer(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = sdy.reshard %arg0 <@mesh, [{}, {"model"}]> : tensor<4x8xf32>
    return %0 : tensor<4x8xf32>
  }
}

// -----

// Without a reshard nothing changes: a constraint already there stays as it is.

// CHECK-LABEL: module @no_reshard {
// CHECK-NEXT:    sdy.mesh @mesh = <["stage"=1, "data"=2, "model"=2]>
// CHECK-NEXT:    func.func @main(%[[X:.*]]: tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}) -> tensor<4x8xf32> {
// CHECK-NEXT:      %[[TANH:.*]] = stablehlo.tanh %[[X]] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data"}, {}]>]>} : tensor<4x8xf32>
// CHECK-NEXT:      %[[COLS:.*]] = sdy.sharding_constraint %[[TANH]] <@mesh, [{}, {"model"}]> : tensor<4x8xf32>
// CHECK-NEXT:      return %[[COLS]] : tensor<4x8xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @no_reshard {
  sdy.mesh @mesh = <["stage"=1, "data"=2, "model"=2]>
  func.func @main(%arg0: tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}) -> tensor<4x8xf32> {
    %0 = stablehlo.tanh %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data"}, {}]>]>} : tensor<4x8xf32>
    %1 = sdy.sharding_constraint %0 <@mesh, [{}, {"model"}]> : tensor<4x8xf32>
    return %1 : tensor<4x8xf32>
  }
}

// -----

// CHECK-LABEL: module @no_mesh {
// CHECK-NEXT:    func.func @main(%[[X:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[TANH:.*]] = stablehlo.tanh %[[X]] : tensor<2x4xf32>
// CHECK-NEXT:      return %[[TANH]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @no_mesh {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}
