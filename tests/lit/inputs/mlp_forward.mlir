module @jit__loss attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4x4xf32>, %arg2: tensor<4xf32>, %arg3: tensor<4x4xf32>, %arg4: tensor<4xf32>, %arg5: tensor<4x4xf32>, %arg6: tensor<2x4xf32>, %arg7: tensor<2x4xf32>) -> (tensor<f32> {jax.result_info = "result"}) {
    %0 = stablehlo.dot_general %arg6, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %1 = stablehlo.broadcast_in_dim %arg0, dims = [1] : (tensor<4xf32>) -> tensor<1x4xf32>
    %2 = stablehlo.broadcast_in_dim %1, dims = [0, 1] : (tensor<1x4xf32>) -> tensor<2x4xf32>
    %3 = stablehlo.add %0, %2 : tensor<2x4xf32>
    %4 = stablehlo.tanh %3 : tensor<2x4xf32>
    %5 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %4 : tensor<2x4xf32>
    %6 = stablehlo.dot_general %5, %arg3, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %7 = stablehlo.broadcast_in_dim %arg2, dims = [1] : (tensor<4xf32>) -> tensor<1x4xf32>
    %8 = stablehlo.broadcast_in_dim %7, dims = [0, 1] : (tensor<1x4xf32>) -> tensor<2x4xf32>
    %9 = stablehlo.add %6, %8 : tensor<2x4xf32>
    %10 = stablehlo.tanh %9 : tensor<2x4xf32>
    %11 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %10 : tensor<2x4xf32>
    %12 = stablehlo.dot_general %11, %arg5, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %13 = stablehlo.broadcast_in_dim %arg4, dims = [1] : (tensor<4xf32>) -> tensor<1x4xf32>
    %14 = stablehlo.broadcast_in_dim %13, dims = [0, 1] : (tensor<1x4xf32>) -> tensor<2x4xf32>
    %15 = stablehlo.add %12, %14 : tensor<2x4xf32>
    %16 = stablehlo.tanh %15 : tensor<2x4xf32>
    %17 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %16 : tensor<2x4xf32>
    %18 = stablehlo.subtract %17, %arg7 : tensor<2x4xf32>
    %19 = stablehlo.multiply %18, %18 : tensor<2x4xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %20 = stablehlo.reduce(%19 init: %cst) applies stablehlo.add across dimensions = [0, 1] : (tensor<2x4xf32>, tensor<f32>) -> tensor<f32>
    %cst_0 = stablehlo.constant dense<8.000000e+00> : tensor<f32>
    %21 = stablehlo.divide %20, %cst_0 : tensor<f32>
    return %21 : tensor<f32>
  }
}
