// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-materialize-replica-groups)'

module @sub_axis {
  sdy.mesh @mesh = <["expert"=4]>
  func.func @main(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {
    // expected-error @+1 {{replica groups over a sub-axis of 'expert' are not supported}}
    %0 = "stablehlo.all_to_all"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, concat_dimension = 1 : i64, replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "expert", sub_axis_info = (1)2>]>, split_count = 2 : i64, split_dimension = 0 : i64}> : (tensor<4x8xf32>) -> tensor<2x16xf32>
    %1 = stablehlo.reshape %0 : (tensor<2x16xf32>) -> tensor<4x8xf32>
    return %1 : tensor<4x8xf32>
  }
}

// -----

module @unknown_axis {
  sdy.mesh @mesh = <["data"=2, "expert"=2]>
  sdy.mesh @other = <["model"=2]>
  func.func @main(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {
    // expected-error @+1 {{the replica groups name axis 'model', which the mesh lacks (['data', 'expert'])}}
    %0 = "stablehlo.all_to_all"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, concat_dimension = 1 : i64, replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "model">]>, split_count = 2 : i64, split_dimension = 0 : i64}> : (tensor<4x8xf32>) -> tensor<2x16xf32>
    %1 = stablehlo.reshape %0 : (tensor<2x16xf32>) -> tensor<4x8xf32>
    return %1 : tensor<4x8xf32>
  }
}
