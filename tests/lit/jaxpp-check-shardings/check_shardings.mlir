// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-check-shardings{mpmd-axis=stage submesh-size=4})' | filecheck %s
// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-check-shardings)' | filecheck %s

// The check only reads the IR: a step lowered on the lowering mesh of a
// (stage=2, data=2, model=2) MpmdMesh (stage=1, 4 devices, the submesh size)
// whose shardings name "data" and "model" only passes unchanged, as does a
// step without a mesh. Without options (the default: no mpmd axis, any
// submesh size) nothing is checked and the output is the same.

// CHECK-LABEL: module @data_and_model_shardings {
// CHECK-NEXT:    sdy.mesh @mesh = <["stage"=1, "data"=2, "model"=2]>
// CHECK-NEXT:    func.func @main(%[[X:.*]]: tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}, %[[W:.*]]: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}) -> (tensor<4x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {"model"}]>}) {
// CHECK-NEXT:      %[[DOT:.*]] = stablehlo.dot_general %[[X]], %[[W]], contracting_dims = [1] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data"}, {"model"}]>]>} : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT:      %[[ROWS:.*]] = sdy.sharding_constraint %[[DOT]] <@mesh, [{"data", ?}, {?}], replicated={"model"}> : tensor<4x16xf32>
// CHECK-NEXT:      %[[TANH:.*]] = stablehlo.tanh %[[ROWS]] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data"}, {"model"}]>]>} : tensor<4x16xf32>
// CHECK-NEXT:      return %[[TANH]] : tensor<4x16xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @data_and_model_shardings {
  sdy.mesh @mesh = <["stage"=1, "data"=2, "model"=2]>
  func.func @main(%arg0: tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}, %arg1: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}) -> (tensor<4x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {"model"}]>}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data"}, {"model"}]>]>} : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %1 = sdy.sharding_constraint %0 <@mesh, [{"data", ?}, {?}], replicated={"model"}> : tensor<4x16xf32>
    %2 = stablehlo.tanh %1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data"}, {"model"}]>]>} : tensor<4x16xf32>
    return %2 : tensor<4x16xf32>
  }
}

// -----

// A mesh without the mpmd axis is a lowering mesh too (the axis counts as
// size 1); a sharding over a sub-axis of "data" names "data" only.

// CHECK-LABEL: module @mesh_without_mpmd_axis {
// CHECK-NEXT:    sdy.mesh @mesh = <["data"=4]>
// CHECK-NEXT:    func.func @main(%[[X:.*]]: tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data":(1)2}, {}]>}) -> tensor<4x8xf32> {
// CHECK-NEXT:      return %[[X]] : tensor<4x8xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @mesh_without_mpmd_axis {
  sdy.mesh @mesh = <["data"=4]>
  func.func @main(%arg0: tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data":(1)2}, {}]>}) -> tensor<4x8xf32> {
    return %arg0 : tensor<4x8xf32>
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
