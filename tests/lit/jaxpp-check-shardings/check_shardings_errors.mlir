// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-check-shardings{mpmd-axis=stage submesh-size=4})'

// The step must be lowered on the lowering mesh of a (stage=2, data=2,
// model=2) MpmdMesh: "stage" of size 1, 4 devices in all (one submesh). A
// mesh that breaks this is blamed where the step first shards a value over it
// (an argument or result: at the line that lowered the step, where JAX locates
// @main's return; else an op), else at the sdy.mesh op; a sharding that names
// "stage" at the op that carries it, or for an argument or result of the step
// at the line that lowered it, naming the argument or result.

module @mpmd_axis_of_size_two {
  // expected-error @+1 {{the step was lowered on a mesh whose mpmd axis 'stage' has size 2: lower it on mpmd_mesh.lowering_mesh(), where that axis has size 1}}
  sdy.mesh @mesh = <["stage"=2, "data"=2, "model"=2]>
  func.func @main(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {
    return %arg0 : tensor<4x8xf32>
  }
}

// -----

module @mpmd_axis_of_size_two_used_by_an_argument {
  sdy.mesh @mesh = <["stage"=2, "data"=2, "model"=2]>
  func.func @main(%arg0: tensor<4x8xf32>, %arg1: tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}) -> tensor<4x8xf32> {
    // expected-error @+1 {{the step was lowered on a mesh whose mpmd axis 'stage' has size 2 (argument 1 is sharded over it): lower it on mpmd_mesh.lowering_mesh()}}
    return %arg0 : tensor<4x8xf32>
  }
}

// -----

module @mesh_larger_than_the_submesh_used_by_an_op {
  sdy.mesh @mesh = <["stage"=1, "data"=4, "model"=2]>
  func.func @main(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {
    // expected-error @+1 {{the step's mesh has 8 devices ('stablehlo.tanh' is sharded over it) but each submesh has 4}}
    %0 = stablehlo.tanh %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data"}, {}]>]>} : tensor<4x8xf32>
    return %0 : tensor<4x8xf32>
  }
}

// -----

module @mesh_larger_than_the_submesh {
  // expected-error @+1 {{the step's mesh has 8 devices but each submesh has 4: lower it on mpmd_mesh.lowering_mesh()}}
  sdy.mesh @mesh = <["stage"=1, "data"=4, "model"=2]>
  func.func @main(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {
    return %arg0 : tensor<4x8xf32>
  }
}

// -----

module @mesh_smaller_than_the_submesh {
  // expected-error @+1 {{the step's mesh has 2 devices but each submesh has 4: lower it on mpmd_mesh.lowering_mesh()}}
  sdy.mesh @mesh = <["stage"=1, "data"=2]>
  func.func @main(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {
    return %arg0 : tensor<4x8xf32>
  }
}

// -----

module @argument_sharding_names_mpmd_axis {
  sdy.mesh @mesh = <["stage"=1, "data"=2, "model"=2]>
  func.func @main(%arg0: tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"stage"}, {"model"}]>}) -> tensor<4x8xf32> {
    // expected-error @+1 {{the sharding of argument 0 names the mpmd axis 'stage': shard the step's arguments and results over the other mesh axes only (the mpmd axis separates the stages)}}
    return %arg0 : tensor<4x8xf32>
  }
}

// -----

module @result_sharding_names_mpmd_axis {
  sdy.mesh @mesh = <["stage"=1, "data"=2, "model"=2]>
  func.func @main(%arg0: tensor<4x8xf32>) -> (tensor<4x8xf32> {jax.result_info = "result[0]", sdy.sharding = #sdy.sharding<@mesh, [{"data", "stage"}, {}]>}) {
    // expected-error @+1 {{the sharding of result 0 ('result[0]') names the mpmd axis 'stage'}}
    return %arg0 : tensor<4x8xf32>
  }
}

// -----

module @op_sharding_names_mpmd_axis {
  sdy.mesh @mesh = <["stage"=1, "data"=2, "model"=2]>
  func.func @main(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = stablehlo.tanh %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data"}, {}]>]>} : tensor<4x8xf32>
    // expected-error @+1 {{the sharding of 'stablehlo.sine' names the mpmd axis 'stage': inside a stage, shard over the other mesh axes only (the mpmd axis separates the stages)}}
    %1 = stablehlo.sine %0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data"}, {"stage"}]>]>} : tensor<4x8xf32>
    return %1 : tensor<4x8xf32>
  }
}

// -----

// The walk reaches ops nested in regions (here a while body).
module @nested_op_sharding_names_mpmd_axis {
  sdy.mesh @mesh = <["stage"=1, "data"=2, "model"=2]>
  func.func @main(%arg0: tensor<4x8xf32>, %arg1: tensor<i32>) -> tensor<4x8xf32> {
    %0:2 = stablehlo.while(%iterArg = %arg0, %iterArg_0 = %arg1) : tensor<4x8xf32>, tensor<i32>
    cond {
      %1 = stablehlo.compare LT, %iterArg_0, %arg1, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      // expected-error @+1 {{the sharding of 'stablehlo.tanh' names the mpmd axis 'stage'}}
      %1 = stablehlo.tanh %iterArg {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"stage"}]>]>} : tensor<4x8xf32>
      stablehlo.return %1, %iterArg_0 : tensor<4x8xf32>, tensor<i32>
    }
    return %0#0 : tensor<4x8xf32>
  }
}

// -----

// Shardy's own sdy.reshard carries its sharding as `sharding`: refused (only a
// with_sharding_constraint has the mpmd axis dropped).
module @reshard_names_mpmd_axis {
  sdy.mesh @mesh = <["stage"=1, "data"=2, "model"=2]>
  func.func @main(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {
    // expected-error @+1 {{the sharding of 'sdy.reshard' names the mpmd axis 'stage'}}
    %0 = sdy.reshard %arg0 <@mesh, [{}, {"stage"}]> : tensor<4x8xf32>
    return %0 : tensor<4x8xf32>
  }
}
