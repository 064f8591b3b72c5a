// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-check-shardings{mpmd-axis=stage submesh-size=4})'

// The in_shardings/out_shardings of an sdy.manual_computation (what
// `jax.shard_map(..., in_specs=P("stage", "data"))` lowers to on the lowering
// mesh) are checked too. manual_axes may list "stage" (JAX makes every mesh
// axis manual by default); that names no sharding and is accepted.

module @manual_computation_in_shardings_name_mpmd_axis {
  sdy.mesh @mesh = <["stage"=1, "data"=2, "model"=2]>
  func.func @main(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {
    // expected-error @+1 {{the sharding of 'sdy.manual_computation' names the mpmd axis 'stage'}}
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"stage"}, {"data"}]>] out_shardings=[<@mesh, [{}, {"data"}]>] manual_axes={"stage", "data", "model"} (%arg1: tensor<4x2xf32>) {
      %1 = stablehlo.tanh %arg1 : tensor<4x2xf32>
      sdy.return %1 : tensor<4x2xf32>
    } : (tensor<4x4xf32>) -> tensor<4x4xf32>
    return %0 : tensor<4x4xf32>
  }
}

// -----

module @manual_computation_out_shardings_name_mpmd_axis {
  sdy.mesh @mesh = <["stage"=1, "data"=2, "model"=2]>
  func.func @main(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {
    // expected-error @+1 {{the sharding of 'sdy.manual_computation' names the mpmd axis 'stage'}}
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{}, {"data"}]>] out_shardings=[<@mesh, [{"stage"}, {"data"}]>] manual_axes={"stage", "data", "model"} (%arg1: tensor<4x2xf32>) {
      %1 = stablehlo.tanh %arg1 : tensor<4x2xf32>
      sdy.return %1 : tensor<4x2xf32>
    } : (tensor<4x4xf32>) -> tensor<4x4xf32>
    return %0 : tensor<4x4xf32>
  }
}
