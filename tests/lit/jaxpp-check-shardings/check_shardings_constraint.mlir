// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-check-shardings{mpmd-axis=stage submesh-size=4})' | filecheck %s

// A with_sharding_constraint naming the mpmd axis (size 1 in the lowering mesh), as
// JaxPP accepts it: the axis is dropped, the other axes, open dimensions and
// replicated axes stay.

// CHECK-LABEL: module @constraint_names_mpmd_axis
// CHECK:         sdy.sharding_constraint %arg0 <@mesh, [{"data", ?}, {"model"}]>
// CHECK:         sdy.sharding_constraint %{{.*}} <@mesh, [{}, {}], replicated={"model"}>
// CHECK-NOT:     "stage"
module @constraint_names_mpmd_axis {
  sdy.mesh @mesh = <["stage"=1, "data"=2, "model"=2]>
  func.func @main(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = sdy.sharding_constraint %arg0 <@mesh, [{"stage", "data", ?}, {"model"}]> : tensor<4x8xf32>
    %1 = sdy.sharding_constraint %0 <@mesh, [{"stage"}, {}], replicated={"model"}> : tensor<4x8xf32>
    return %1 : tensor<4x8xf32>
  }
}

// -----

// With a mesh whose mpmd axis has size 2 the step is refused before any constraint
// is touched (see check_shardings_errors.mlir); one that does not name the axis is
// left as it is.

// CHECK-LABEL: module @constraint_without_mpmd_axis
// CHECK:         sdy.sharding_constraint %arg0 <@mesh, [{"data"}, {}]>
module @constraint_without_mpmd_axis {
  sdy.mesh @mesh = <["stage"=1, "data"=2, "model"=2]>
  func.func @main(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = sdy.sharding_constraint %arg0 <@mesh, [{"data"}, {}]> : tensor<4x8xf32>
    return %0 : tensor<4x8xf32>
  }
}
