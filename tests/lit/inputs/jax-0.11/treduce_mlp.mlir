module @jit_step attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x4xf32>, %arg1: tensor<4x4xf32>, %arg2: tensor<4x2x4xf32>, %arg3: tensor<4x2x4xf32>) -> (tensor<4x4xf32> {jax.result_info = "result[0][0]"}, tensor<4x4xf32> {jax.result_info = "result[0][1]"}, tensor<4xf32> {jax.result_info = "result[1]"}) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<4x4xf32>
    %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<4x4xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %3:9 = stablehlo.while(%iterArg = %arg2, %iterArg_5 = %arg3, %iterArg_6 = %arg0, %iterArg_7 = %arg1, %iterArg_8 = %c_2, %iterArg_9 = %c, %iterArg_10 = %0, %iterArg_11 = %1, %iterArg_12 = %2) : tensor<4x2x4xf32>, tensor<4x2x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<i32>, tensor<i32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
    cond {
      %c_13 = stablehlo.constant dense<4> : tensor<i32>
      %10 = stablehlo.compare LT, %iterArg_8, %c_13, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %10 : tensor<i1>
    } do {
      %c_13 = stablehlo.constant dense<1> : tensor<i32>
      %10 = stablehlo.add %iterArg_9, %c_13 : tensor<i32>
      %11 = stablehlo.optimization_barrier {jaxpp.marker = "loop", jaxpp.num_microbatches = 4 : i64, jaxpp.reductions = "concat(0),add,add", jaxpp.stage_markers = "tests/lit/regenerate_inputs.py:117\0Atests/lit/regenerate_inputs.py:117"} %iterArg_9 : tensor<i32>
      %12 = func.call @dynamic_index_in_dim(%iterArg, %11) : (tensor<4x2x4xf32>, tensor<i32>) -> tensor<2x4xf32>
      %13 = func.call @dynamic_index_in_dim(%iterArg_5, %11) : (tensor<4x2x4xf32>, tensor<i32>) -> tensor<2x4xf32>
      %14 = stablehlo.dot_general %12, %iterArg_6, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
      %15 = stablehlo.tanh %14 : tensor<2x4xf32>
      %cst_14 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
      %16 = stablehlo.broadcast_in_dim %cst_14, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
      %17 = stablehlo.add %16, %15 : tensor<2x4xf32>
      %cst_15 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
      %18 = stablehlo.broadcast_in_dim %cst_15, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
      %19 = stablehlo.subtract %18, %15 : tensor<2x4xf32>
      %20 = stablehlo.multiply %17, %19 : tensor<2x4xf32>
      %21 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %15 : tensor<2x4xf32>
      %22 = stablehlo.dot_general %21, %iterArg_7, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
      %23 = stablehlo.tanh %22 : tensor<2x4xf32>
      %cst_16 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
      %24 = stablehlo.broadcast_in_dim %cst_16, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
      %25 = stablehlo.add %24, %23 : tensor<2x4xf32>
      %cst_17 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
      %26 = stablehlo.broadcast_in_dim %cst_17, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
      %27 = stablehlo.subtract %26, %23 : tensor<2x4xf32>
      %28 = stablehlo.multiply %25, %27 : tensor<2x4xf32>
      %29 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %23 : tensor<2x4xf32>
      %30 = stablehlo.subtract %29, %13 : tensor<2x4xf32>
      %31 = stablehlo.multiply %30, %30 : tensor<2x4xf32>
      %cst_18 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
      %32 = stablehlo.broadcast_in_dim %cst_18, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
      %33 = stablehlo.multiply %32, %30 : tensor<2x4xf32>
      %cst_19 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %34 = stablehlo.reduce(%31 init: %cst_19) applies stablehlo.add across dimensions = [0, 1] : (tensor<2x4xf32>, tensor<f32>) -> tensor<f32>
      %cst_20 = stablehlo.constant dense<8.000000e+00> : tensor<f32>
      %35 = stablehlo.divide %34, %cst_20 : tensor<f32>
      %cst_21 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
      %cst_22 = stablehlo.constant dense<8.000000e+00> : tensor<f32>
      %36 = stablehlo.divide %cst_21, %cst_22 : tensor<f32>
      %37 = stablehlo.broadcast_in_dim %36, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
      %38 = stablehlo.multiply %37, %33 : tensor<2x4xf32>
      %39 = stablehlo.optimization_barrier {jaxpp.marker = "bwd"} %38 : tensor<2x4xf32>
      %40 = stablehlo.multiply %39, %28 : tensor<2x4xf32>
      %41 = stablehlo.dot_general %40, %21, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
      %42 = stablehlo.transpose %41, dims = [1, 0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
      %43 = stablehlo.dot_general %40, %iterArg_7, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
      %44 = stablehlo.optimization_barrier {jaxpp.marker = "bwd"} %43 : tensor<2x4xf32>
      %45 = stablehlo.multiply %44, %20 : tensor<2x4xf32>
      %46 = stablehlo.dot_general %45, %12, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
      %47 = stablehlo.transpose %46, dims = [1, 0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
      %48 = func.call @dynamic_update_index_in_dim(%iterArg_10, %35, %11) : (tensor<4xf32>, tensor<f32>, tensor<i32>) -> tensor<4xf32>
      %49 = stablehlo.add %iterArg_11, %47 : tensor<4x4xf32>
      %50 = stablehlo.add %iterArg_12, %42 : tensor<4x4xf32>
      %c_23 = stablehlo.constant dense<1> : tensor<i32>
      %51 = stablehlo.add %iterArg_8, %c_23 : tensor<i32>
      stablehlo.return %iterArg, %iterArg_5, %iterArg_6, %iterArg_7, %51, %10, %48, %49, %50 : tensor<4x2x4xf32>, tensor<4x2x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<i32>, tensor<i32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
    }
    %cst_3 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %4 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<4x4xf32>
    %5 = stablehlo.multiply %4, %3#7 : tensor<4x4xf32>
    %6 = stablehlo.subtract %arg0, %5 : tensor<4x4xf32>
    %cst_4 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %7 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<4x4xf32>
    %8 = stablehlo.multiply %7, %3#8 : tensor<4x4xf32>
    %9 = stablehlo.subtract %arg1, %8 : tensor<4x4xf32>
    return %6, %9, %3#6 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4xf32>
  }
  func.func private @dynamic_index_in_dim(%arg0: tensor<4x2x4xf32>, %arg1: tensor<i32>) -> tensor<2x4xf32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.compare LT, %arg1, %c, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_0 = stablehlo.constant dense<4> : tensor<i32>
    %1 = stablehlo.add %arg1, %c_0 : tensor<i32>
    %2 = stablehlo.select %0, %1, %arg1 : tensor<i1>, tensor<i32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %3 = stablehlo.dynamic_slice %arg0, %2, %c_1, %c_2, sizes = [1, 2, 4] : (tensor<4x2x4xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x4xf32>
    %4 = stablehlo.reshape %3 : (tensor<1x2x4xf32>) -> tensor<2x4xf32>
    return %4 : tensor<2x4xf32>
  }
  func.func private @dynamic_update_index_in_dim(%arg0: tensor<4xf32>, %arg1: tensor<f32>, %arg2: tensor<i32>) -> tensor<4xf32> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [] : (tensor<f32>) -> tensor<1xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.compare LT, %arg2, %c, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %2 = stablehlo.convert %arg2 : tensor<i32>
    %c_0 = stablehlo.constant dense<4> : tensor<i32>
    %3 = stablehlo.add %2, %c_0 : tensor<i32>
    %4 = stablehlo.select %1, %3, %arg2 : tensor<i1>, tensor<i32>
    %5 = stablehlo.dynamic_update_slice %arg0, %0, %4 : (tensor<4xf32>, tensor<1xf32>, tensor<i32>) -> tensor<4xf32>
    return %5 : tensor<4xf32>
  }
}
