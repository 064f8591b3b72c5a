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
      %10:4 = func.call @closed_call(%iterArg, %iterArg_5, %iterArg_6, %iterArg_7, %iterArg_9, %iterArg_10, %iterArg_11, %iterArg_12) : (tensor<4x2x4xf32>, tensor<4x2x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<i32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> (tensor<i32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4x4xf32>)
      %c_13 = stablehlo.constant dense<1> : tensor<i32>
      %11 = stablehlo.add %iterArg_8, %c_13 : tensor<i32>
      stablehlo.return %iterArg, %iterArg_5, %iterArg_6, %iterArg_7, %11, %10#0, %10#1, %10#2, %10#3 : tensor<4x2x4xf32>, tensor<4x2x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<i32>, tensor<i32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
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
  func.func private @closed_call(%arg0: tensor<4x2x4xf32>, %arg1: tensor<4x2x4xf32>, %arg2: tensor<4x4xf32>, %arg3: tensor<4x4xf32>, %arg4: tensor<i32>, %arg5: tensor<4xf32>, %arg6: tensor<4x4xf32>, %arg7: tensor<4x4xf32>) -> (tensor<i32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
    %c = stablehlo.constant dense<1> : tensor<i32>
    %0 = stablehlo.add %arg4, %c : tensor<i32>
    %1 = stablehlo.optimization_barrier {jaxpp.marker = "loop", jaxpp.num_microbatches = 4 : i64, jaxpp.reductions = "concat(0),add,add", jaxpp.stage_markers = "tests/lit/regenerate_inputs.py:117\0Atests/lit/regenerate_inputs.py:117"} %arg4 : tensor<i32>
    %2 = call @dynamic_index_in_dim(%arg0, %1) : (tensor<4x2x4xf32>, tensor<i32>) -> tensor<2x4xf32>
    %3 = call @dynamic_index_in_dim(%arg1, %1) : (tensor<4x2x4xf32>, tensor<i32>) -> tensor<2x4xf32>
    %4 = stablehlo.dot_general %2, %arg2, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %5 = stablehlo.tanh %4 : tensor<2x4xf32>
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %6 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %7 = stablehlo.subtract %6, %5 : tensor<2x4xf32>
    %8 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %5 : tensor<2x4xf32>
    %9 = stablehlo.dot_general %8, %arg3, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %10 = stablehlo.tanh %9 : tensor<2x4xf32>
    %cst_0 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %11 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %12 = stablehlo.subtract %11, %10 : tensor<2x4xf32>
    %13 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %10 : tensor<2x4xf32>
    %14 = stablehlo.subtract %13, %3 : tensor<2x4xf32>
    %15 = stablehlo.multiply %14, %14 : tensor<2x4xf32>
    %cst_1 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %16 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %17 = stablehlo.multiply %16, %14 : tensor<2x4xf32>
    %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %18 = stablehlo.reduce(%15 init: %cst_2) applies stablehlo.add across dimensions = [0, 1] : (tensor<2x4xf32>, tensor<f32>) -> tensor<f32>
    %cst_3 = stablehlo.constant dense<8.000000e+00> : tensor<f32>
    %19 = stablehlo.divide %18, %cst_3 : tensor<f32>
    %cst_4 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %cst_5 = stablehlo.constant dense<8.000000e+00> : tensor<f32>
    %20 = stablehlo.divide %cst_4, %cst_5 : tensor<f32>
    %21 = stablehlo.broadcast_in_dim %20, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %22 = stablehlo.multiply %21, %17 : tensor<2x4xf32>
    %23 = stablehlo.optimization_barrier {jaxpp.marker = "bwd"} %22 : tensor<2x4xf32>
    %24 = stablehlo.multiply %23, %12 : tensor<2x4xf32>
    %25 = stablehlo.multiply %24, %10 : tensor<2x4xf32>
    %26 = stablehlo.add %24, %25 : tensor<2x4xf32>
    %27 = stablehlo.dot_general %26, %8, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %28 = stablehlo.transpose %27, dims = [1, 0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %29 = stablehlo.dot_general %26, %arg3, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %30 = stablehlo.optimization_barrier {jaxpp.marker = "bwd"} %29 : tensor<2x4xf32>
    %31 = stablehlo.multiply %30, %7 : tensor<2x4xf32>
    %32 = stablehlo.multiply %31, %5 : tensor<2x4xf32>
    %33 = stablehlo.add %31, %32 : tensor<2x4xf32>
    %34 = stablehlo.dot_general %33, %2, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %35 = stablehlo.transpose %34, dims = [1, 0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %36 = call @dynamic_update_index_in_dim(%arg5, %19, %1) : (tensor<4xf32>, tensor<f32>, tensor<i32>) -> tensor<4xf32>
    %37 = stablehlo.add %arg6, %35 : tensor<4x4xf32>
    %38 = stablehlo.add %arg7, %28 : tensor<4x4xf32>
    return %0, %36, %37, %38 : tensor<i32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
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
