// RUN: jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-check-shardings{mpmd-axis=stage submesh-size=4})' | filecheck %s
// What `jax.shard_map(f, mesh=lowering_mesh, in_specs=P("data"),
// out_specs=P("data"))` lowers to passes unchanged.

// CHECK-LABEL: module @shard_map_over_data {
// CHECK-NEXT:    sdy.mesh @mesh = <["stage"=1, "data"=2, "model"=2]>
// CHECK-NEXT:    func.func @main(%[[X:.*]]: tensor<4x4xf32>) -> tensor<4x4xf32> {
// CHECK-NEXT:      %[[OUT:.*]] = sdy.manual_computation(%[[X]]) in_shardings=[<@mesh, [{"data"}, {}]>] out_shardings=[<@mesh, [{"data"}, {}]>] manual_axes={"stage", "data", "model"} (%[[LOCAL:.*]]: tensor<2x4xf32>) {
// CHECK-NEXT:        %[[TANH:.*]] = stablehlo.tanh %[[LOCAL]] : tensor<2x4xf32>
// CHECK-NEXT:        sdy.return %[[TANH]] : tensor<2x4xf32>
// CHECK-NEXT:      } : (tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT:      return %[[OUT]] : tensor<4x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @shard_map_over_data {
  sdy.mesh @mesh = <["stage"=1, "data"=2, "model"=2]>
  func.func @main(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"data"}, {}]>] out_shardings=[<@mesh, [{"data"}, {}]>] manual_axes={"stage", "data", "model"} (%arg1: tensor<2x4xf32>) {
      %1 = stablehlo.tanh %arg1 : tensor<2x4xf32>
      sdy.return %1 : tensor<2x4xf32>
    } : (tensor<4x4xf32>) -> tensor<4x4xf32>
    return %0 : tensor<4x4xf32>
  }
}
