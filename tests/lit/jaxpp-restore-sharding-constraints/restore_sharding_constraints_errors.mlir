// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-restore-sharding-constraints)' | filecheck %s

// The rewrite itself cannot fail: sdy.reshard and sdy.sharding_constraint
// take the same operand and sharding and Shardy verifies them alike, so any
// valid reshard makes a valid constraint (a sharding naming an undefined mesh
// is rejected by that verifier when the input is parsed). What the pass checks
// is its precondition, that Shardy's propagation ran (last case). The other
// cases are the unusual but valid ones it must get through without a
// diagnostic and without touching what is not an sdy.reshard.

// A reshard nobody reads is rewritten, not erased (dead code is not this
// pass's business); a reshard of a scalar keeps its empty sharding.

// CHECK-LABEL: module @unused_and_scalar_reshards {
// CHECK-NEXT:    sdy.mesh @mesh = <["stage"=1, "data"=2, "model"=2]>
// CHECK-NEXT:    func.func @main(%[[X:.*]]: tensor<4x8xf32>, %[[S:.*]]: tensor<f32>) -> tensor<f32> {
// CHECK-NEXT:      %{{.*}} = sdy.sharding_constraint %[[X]] <@mesh, [{"data"}, {"model"}]> : tensor<4x8xf32>
// CHECK-NEXT:      %[[SCALAR:.*]] = sdy.sharding_constraint %[[S]] <@mesh, []> : tensor<f32>
// CHECK-NEXT:      return %[[SCALAR]] : tensor<f32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @unused_and_scalar_reshards {
  sdy.mesh @mesh = <["stage"=1, "data"=2, "model"=2]>
  func.func @main(%arg0: tensor<4x8xf32>, %arg1: tensor<f32>) -> tensor<f32> {
    %0 = sdy.reshard %arg0 <@mesh, [{"data"}, {"model"}]> : tensor<4x8xf32>
    %1 = sdy.reshard %arg1 <@mesh, []> : tensor<f32>
    return %1 : tensor<f32>
  }
}

// -----

// Inside a manual computation over "data", a reshard over the free axis
// "model" is valid, and so is the constraint that replaces it.

// CHECK-LABEL: module @reshard_in_manual_computation {
// CHECK:           sdy.manual_computation(%{{.*}}) in_shardings=[<@mesh, [{"data"}, {}]>] out_shardings=[<@mesh, [{"data"}, {}]>] manual_axes={"data"} (%[[LOCAL:.*]]: tensor<2x8xf32>) {
// CHECK-NEXT:        %[[COLS:.*]] = sdy.sharding_constraint %[[LOCAL]] <@mesh, [{}, {"model"}]> : tensor<2x8xf32>
// CHECK-NEXT:        sdy.return %[[COLS]] : tensor<2x8xf32>
// CHECK-NEXT:      } : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NOT:     sdy.reshard
module @reshard_in_manual_computation {
  sdy.mesh @mesh = <["stage"=1, "data"=2, "model"=2]>
  func.func @main(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"data"}, {}]>] out_shardings=[<@mesh, [{"data"}, {}]>] manual_axes={"data"} (%arg1: tensor<2x8xf32>) {
      %1 = sdy.reshard %arg1 <@mesh, [{}, {"model"}]> : tensor<2x8xf32>
      sdy.return %1 : tensor<2x8xf32>
    } : (tensor<4x8xf32>) -> tensor<4x8xf32>
    return %0 : tensor<4x8xf32>
  }
}

// -----

// What only looks like a reshard stays as it is: GSPMD's @Sharding custom
// call and a custom call that happens to be named sdy.reshard.

// CHECK-LABEL: module @lookalikes {
// CHECK-NEXT:    func.func @main(%[[X:.*]]: tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT:      %[[GSPMD:.*]] = stablehlo.custom_call @Sharding(%[[X]]) {mhlo.sharding = "{devices=[2,1]<=[2]}"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:      %[[CALL:.*]] = stablehlo.custom_call @sdy.reshard(%[[GSPMD]]) : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:      return %[[CALL]] : tensor<4x8xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @lookalikes {
  func.func @main(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = stablehlo.custom_call @Sharding(%arg0) {mhlo.sharding = "{devices=[2,1]<=[2]}"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %1 = stablehlo.custom_call @sdy.reshard(%0) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    return %1 : tensor<4x8xf32>
  }
}

// -----

// Shardy's propagation removes every sdy.sharding_group (what
// jax.experimental.shard_alike lowers to) and turns every
// sdy.sharding_constraint into an sdy.reshard: a group left shows that it has
// not run, so there is nothing to restore yet and the reshards it makes later
// would be left for XLA. The error blames the first group.

module @propagation_not_run {
  sdy.mesh @mesh = <["stage"=1, "data"=2, "model"=2]>
  func.func @main(%arg0: tensor<4x8xf32>, %arg1: tensor<4x8xf32>) -> tensor<4x8xf32> {
    // expected-error @+1 {{jaxpp-restore-sharding-constraints: Shardy's propagation has not run (found sdy.sharding_group, which sdy-propagation-pipeline removes): run sdy-propagation-pipeline first}}
    sdy.sharding_group %arg0 group_id=0 : tensor<4x8xf32>
    sdy.sharding_group %arg1 group_id=0 : tensor<4x8xf32>
    %0 = sdy.sharding_constraint %arg0 <@mesh, [{"data"}, {}]> : tensor<4x8xf32>
    %1 = stablehlo.add %0, %arg1 : tensor<4x8xf32>
    return %1 : tensor<4x8xf32>
  }
}
