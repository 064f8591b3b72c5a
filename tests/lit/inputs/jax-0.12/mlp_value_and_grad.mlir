module @jit_step attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4x4xf32>, %arg2: tensor<4xf32>, %arg3: tensor<4x4xf32>, %arg4: tensor<4xf32>, %arg5: tensor<4x4xf32>, %arg6: tensor<2x4xf32>, %arg7: tensor<2x4xf32>) -> (tensor<4xf32> {jax.result_info = "result[0][0]['b']"}, tensor<4x4xf32> {jax.result_info = "result[0][0]['w']"}, tensor<4xf32> {jax.result_info = "result[0][1]['b']"}, tensor<4x4xf32> {jax.result_info = "result[0][1]['w']"}, tensor<4xf32> {jax.result_info = "result[0][2]['b']"}, tensor<4x4xf32> {jax.result_info = "result[0][2]['w']"}, tensor<f32> {jax.result_info = "result[1]"}) {
    %0 = stablehlo.dot_general %arg6, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %1 = stablehlo.broadcast_in_dim %arg0, dims = [1] : (tensor<4xf32>) -> tensor<1x4xf32>
    %2 = stablehlo.broadcast_in_dim %1, dims = [0, 1] : (tensor<1x4xf32>) -> tensor<2x4xf32>
    %3 = stablehlo.add %0, %2 : tensor<2x4xf32>
    %4 = stablehlo.tanh %3 : tensor<2x4xf32>
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %5 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %6 = stablehlo.add %5, %4 : tensor<2x4xf32>
    %cst_0 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %7 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %8 = stablehlo.subtract %7, %4 : tensor<2x4xf32>
    %9 = stablehlo.multiply %6, %8 : tensor<2x4xf32>
    %10 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %4 : tensor<2x4xf32>
    %11 = stablehlo.dot_general %10, %arg3, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %12 = stablehlo.broadcast_in_dim %arg2, dims = [1] : (tensor<4xf32>) -> tensor<1x4xf32>
    %13 = stablehlo.broadcast_in_dim %12, dims = [0, 1] : (tensor<1x4xf32>) -> tensor<2x4xf32>
    %14 = stablehlo.add %11, %13 : tensor<2x4xf32>
    %15 = stablehlo.tanh %14 : tensor<2x4xf32>
    %cst_1 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %16 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %17 = stablehlo.add %16, %15 : tensor<2x4xf32>
    %cst_2 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %18 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %19 = stablehlo.subtract %18, %15 : tensor<2x4xf32>
    %20 = stablehlo.multiply %17, %19 : tensor<2x4xf32>
    %21 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %15 : tensor<2x4xf32>
    %22 = stablehlo.dot_general %21, %arg5, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %23 = stablehlo.broadcast_in_dim %arg4, dims = [1] : (tensor<4xf32>) -> tensor<1x4xf32>
    %24 = stablehlo.broadcast_in_dim %23, dims = [0, 1] : (tensor<1x4xf32>) -> tensor<2x4xf32>
    %25 = stablehlo.add %22, %24 : tensor<2x4xf32>
    %26 = stablehlo.tanh %25 : tensor<2x4xf32>
    %cst_3 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %27 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %28 = stablehlo.add %27, %26 : tensor<2x4xf32>
    %cst_4 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %29 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %30 = stablehlo.subtract %29, %26 : tensor<2x4xf32>
    %31 = stablehlo.multiply %28, %30 : tensor<2x4xf32>
    %32 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %26 : tensor<2x4xf32>
    %33 = stablehlo.subtract %32, %arg7 : tensor<2x4xf32>
    %34 = stablehlo.multiply %33, %33 : tensor<2x4xf32>
    %cst_5 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %35 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %36 = stablehlo.multiply %35, %33 : tensor<2x4xf32>
    %cst_6 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %37 = stablehlo.reduce(%34 init: %cst_6) applies stablehlo.add across dimensions = [0, 1] : (tensor<2x4xf32>, tensor<f32>) -> tensor<f32>
    %cst_7 = stablehlo.constant dense<8.000000e+00> : tensor<f32>
    %38 = stablehlo.divide %37, %cst_7 : tensor<f32>
    %cst_8 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %cst_9 = stablehlo.constant dense<8.000000e+00> : tensor<f32>
    %39 = stablehlo.divide %cst_8, %cst_9 : tensor<f32>
    %40 = stablehlo.broadcast_in_dim %39, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %41 = stablehlo.multiply %40, %36 : tensor<2x4xf32>
    %42 = stablehlo.optimization_barrier {jaxpp.marker = "bwd"} %41 : tensor<2x4xf32>
    %43 = stablehlo.multiply %42, %31 : tensor<2x4xf32>
    %cst_10 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %44 = stablehlo.reduce(%43 init: %cst_10) applies stablehlo.add across dimensions = [0] : (tensor<2x4xf32>, tensor<f32>) -> tensor<4xf32>
    %45 = stablehlo.reshape %44 : (tensor<4xf32>) -> tensor<1x4xf32>
    %cst_11 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %46 = stablehlo.reduce(%45 init: %cst_11) applies stablehlo.add across dimensions = [0] : (tensor<1x4xf32>, tensor<f32>) -> tensor<4xf32>
    %47 = stablehlo.dot_general %43, %21, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %48 = stablehlo.transpose %47, dims = [1, 0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %49 = stablehlo.dot_general %43, %arg5, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %50 = stablehlo.optimization_barrier {jaxpp.marker = "bwd"} %49 : tensor<2x4xf32>
    %51 = stablehlo.multiply %50, %20 : tensor<2x4xf32>
    %cst_12 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %52 = stablehlo.reduce(%51 init: %cst_12) applies stablehlo.add across dimensions = [0] : (tensor<2x4xf32>, tensor<f32>) -> tensor<4xf32>
    %53 = stablehlo.reshape %52 : (tensor<4xf32>) -> tensor<1x4xf32>
    %cst_13 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %54 = stablehlo.reduce(%53 init: %cst_13) applies stablehlo.add across dimensions = [0] : (tensor<1x4xf32>, tensor<f32>) -> tensor<4xf32>
    %55 = stablehlo.dot_general %51, %10, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %56 = stablehlo.transpose %55, dims = [1, 0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %57 = stablehlo.dot_general %51, %arg3, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %58 = stablehlo.optimization_barrier {jaxpp.marker = "bwd"} %57 : tensor<2x4xf32>
    %59 = stablehlo.multiply %58, %9 : tensor<2x4xf32>
    %cst_14 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %60 = stablehlo.reduce(%59 init: %cst_14) applies stablehlo.add across dimensions = [0] : (tensor<2x4xf32>, tensor<f32>) -> tensor<4xf32>
    %61 = stablehlo.reshape %60 : (tensor<4xf32>) -> tensor<1x4xf32>
    %cst_15 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %62 = stablehlo.reduce(%61 init: %cst_15) applies stablehlo.add across dimensions = [0] : (tensor<1x4xf32>, tensor<f32>) -> tensor<4xf32>
    %63 = stablehlo.dot_general %59, %arg6, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %64 = stablehlo.transpose %63, dims = [1, 0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %cst_16 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %65 = stablehlo.broadcast_in_dim %cst_16, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %66 = stablehlo.multiply %65, %62 : tensor<4xf32>
    %67 = stablehlo.subtract %arg0, %66 : tensor<4xf32>
    %cst_17 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %68 = stablehlo.broadcast_in_dim %cst_17, dims = [] : (tensor<f32>) -> tensor<4x4xf32>
    %69 = stablehlo.multiply %68, %64 : tensor<4x4xf32>
    %70 = stablehlo.subtract %arg1, %69 : tensor<4x4xf32>
    %cst_18 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %71 = stablehlo.broadcast_in_dim %cst_18, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %72 = stablehlo.multiply %71, %54 : tensor<4xf32>
    %73 = stablehlo.subtract %arg2, %72 : tensor<4xf32>
    %cst_19 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %74 = stablehlo.broadcast_in_dim %cst_19, dims = [] : (tensor<f32>) -> tensor<4x4xf32>
    %75 = stablehlo.multiply %74, %56 : tensor<4x4xf32>
    %76 = stablehlo.subtract %arg3, %75 : tensor<4x4xf32>
    %cst_20 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %77 = stablehlo.broadcast_in_dim %cst_20, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %78 = stablehlo.multiply %77, %46 : tensor<4xf32>
    %79 = stablehlo.subtract %arg4, %78 : tensor<4xf32>
    %cst_21 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %80 = stablehlo.broadcast_in_dim %cst_21, dims = [] : (tensor<f32>) -> tensor<4x4xf32>
    %81 = stablehlo.multiply %80, %48 : tensor<4x4xf32>
    %82 = stablehlo.subtract %arg5, %81 : tensor<4x4xf32>
    return %67, %70, %73, %76, %79, %82, %38 : tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<f32>
  }
}
