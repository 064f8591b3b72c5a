module @jit_model attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x4xf32>, %arg1: tensor<4x4xf32>, %arg2: tensor<2x4xf32>) -> (tensor<2x4xf32> {jax.result_info = "result"}) {
    %0 = call @first_stage(%arg0, %arg2) : (tensor<4x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %1 = stablehlo.dot_general %0, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %2 = stablehlo.sine %1 : tensor<2x4xf32>
    %3 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %2 : tensor<2x4xf32>
    return %3 : tensor<2x4xf32>
  }
  func.func private @first_stage(%arg0: tensor<4x4xf32>, %arg1: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.dot_general %arg1, %arg0, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %1 = stablehlo.tanh %0 : tensor<2x4xf32>
    %2 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %1 : tensor<2x4xf32>
    return %2 : tensor<2x4xf32>
  }
}
