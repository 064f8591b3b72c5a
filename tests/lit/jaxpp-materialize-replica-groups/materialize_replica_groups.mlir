// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-materialize-replica-groups)' | filecheck %s

// An all_to_all over axis "expert" of a 2x2 mesh: the devices differing only in
// "expert" (row-major ids 0..3) form a group.

// CHECK-LABEL: module @all_to_all_over_one_axis
// CHECK:         "stablehlo.all_to_all"
// CHECK-SAME:      replica_groups = dense<{{\[}}[0, 1], [2, 3]]> : tensor<2x2xi64>
module @all_to_all_over_one_axis {
  sdy.mesh @mesh = <["data"=2, "expert"=2]>
  func.func @main(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = "stablehlo.all_to_all"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, concat_dimension = 1 : i64, replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "expert">]>, split_count = 2 : i64, split_dimension = 0 : i64}> : (tensor<4x8xf32>) -> tensor<2x16xf32>
    %1 = stablehlo.reshape %0 : (tensor<2x16xf32>) -> tensor<4x8xf32>
    return %1 : tensor<4x8xf32>
  }
}

// -----

// Grouped over "data" (the first axis): devices 0, 2 and 1, 3. A mesh's explicit
// device order gives the ids.

// CHECK-LABEL: module @groups_over_the_first_axis_with_device_ids
// CHECK:         "stablehlo.all_to_all"
// CHECK-SAME:      replica_groups = dense<{{\[}}[3, 1], [2, 0]]> : tensor<2x2xi64>
module @groups_over_the_first_axis_with_device_ids {
  sdy.mesh @mesh = <["data"=2, "expert"=2], device_ids=[3, 2, 1, 0]>
  func.func @main(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = "stablehlo.all_to_all"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, concat_dimension = 1 : i64, replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "data">]>, split_count = 2 : i64, split_dimension = 0 : i64}> : (tensor<4x8xf32>) -> tensor<2x16xf32>
    %1 = stablehlo.reshape %0 : (tensor<2x16xf32>) -> tensor<4x8xf32>
    return %1 : tensor<4x8xf32>
  }
}

// -----

// Dense groups (what JAX wrote before 0.11) are left as they are.

// CHECK-LABEL: module @dense_groups_unchanged
// CHECK:         replica_groups = dense<{{\[}}[0, 1]]> : tensor<1x2xi64>
module @dense_groups_unchanged {
  func.func @main(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = "stablehlo.all_to_all"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, concat_dimension = 1 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, split_count = 2 : i64, split_dimension = 0 : i64}> : (tensor<4x8xf32>) -> tensor<2x16xf32>
    %1 = stablehlo.reshape %0 : (tensor<2x16xf32>) -> tensor<4x8xf32>
    return %1 : tensor<4x8xf32>
  }
}
