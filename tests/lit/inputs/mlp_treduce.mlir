module @jit_step attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4x4xf32>, %arg2: tensor<4xf32>, %arg3: tensor<4x4xf32>, %arg4: tensor<4xf32>, %arg5: tensor<4x4xf32>, %arg6: tensor<2x2x4xf32>, %arg7: tensor<2x2x4xf32>) -> (tensor<4xf32> {jax.result_info = "result[0][0]['b']"}, tensor<4x4xf32> {jax.result_info = "result[0][0]['w']"}, tensor<4xf32> {jax.result_info = "result[0][1]['b']"}, tensor<4x4xf32> {jax.result_info = "result[0][1]['w']"}, tensor<4xf32> {jax.result_info = "result[0][2]['b']"}, tensor<4x4xf32> {jax.result_info = "result[0][2]['w']"}, tensor<f32> {jax.result_info = "result[1]"}) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<4x4xf32>
    %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %3 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<4x4xf32>
    %cst_3 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %4 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %cst_4 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %5 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<4x4xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %cst_5 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %c_6 = stablehlo.constant dense<0> : tensor<i32>
    %6:17 = stablehlo.while(%iterArg = %arg6, %iterArg_13 = %arg7, %iterArg_14 = %arg1, %iterArg_15 = %arg0, %iterArg_16 = %arg3, %iterArg_17 = %arg2, %iterArg_18 = %arg5, %iterArg_19 = %arg4, %iterArg_20 = %c_6, %iterArg_21 = %c, %iterArg_22 = %cst_5, %iterArg_23 = %0, %iterArg_24 = %1, %iterArg_25 = %2, %iterArg_26 = %3, %iterArg_27 = %4, %iterArg_28 = %5) : tensor<2x2x4xf32>, tensor<2x2x4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<i32>, tensor<i32>, tensor<f32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>
    cond {
      %c_29 = stablehlo.constant dense<2> : tensor<i32>
      %25 = stablehlo.compare LT, %iterArg_20, %c_29, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %25 : tensor<i1>
    } do {
      %25:8 = func.call @closed_call(%iterArg, %iterArg_13, %iterArg_14, %iterArg_15, %iterArg_16, %iterArg_17, %iterArg_18, %iterArg_19, %iterArg_21, %iterArg_22, %iterArg_23, %iterArg_24, %iterArg_25, %iterArg_26, %iterArg_27, %iterArg_28) : (tensor<2x2x4xf32>, tensor<2x2x4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<i32>, tensor<f32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>) -> (tensor<i32>, tensor<f32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>)
      %c_29 = stablehlo.constant dense<1> : tensor<i32>
      %26 = stablehlo.add %iterArg_20, %c_29 : tensor<i32>
      stablehlo.return %iterArg, %iterArg_13, %iterArg_14, %iterArg_15, %iterArg_16, %iterArg_17, %iterArg_18, %iterArg_19, %26, %25#0, %25#1, %25#2, %25#3, %25#4, %25#5, %25#6, %25#7 : tensor<2x2x4xf32>, tensor<2x2x4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<i32>, tensor<i32>, tensor<f32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>
    }
    %cst_7 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %7 = stablehlo.broadcast_in_dim %cst_7, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %8 = stablehlo.multiply %7, %6#11 : tensor<4xf32>
    %9 = stablehlo.subtract %arg0, %8 : tensor<4xf32>
    %cst_8 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %10 = stablehlo.broadcast_in_dim %cst_8, dims = [] : (tensor<f32>) -> tensor<4x4xf32>
    %11 = stablehlo.multiply %10, %6#12 : tensor<4x4xf32>
    %12 = stablehlo.subtract %arg1, %11 : tensor<4x4xf32>
    %cst_9 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %13 = stablehlo.broadcast_in_dim %cst_9, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %14 = stablehlo.multiply %13, %6#13 : tensor<4xf32>
    %15 = stablehlo.subtract %arg2, %14 : tensor<4xf32>
    %cst_10 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %16 = stablehlo.broadcast_in_dim %cst_10, dims = [] : (tensor<f32>) -> tensor<4x4xf32>
    %17 = stablehlo.multiply %16, %6#14 : tensor<4x4xf32>
    %18 = stablehlo.subtract %arg3, %17 : tensor<4x4xf32>
    %cst_11 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %19 = stablehlo.broadcast_in_dim %cst_11, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %20 = stablehlo.multiply %19, %6#15 : tensor<4xf32>
    %21 = stablehlo.subtract %arg4, %20 : tensor<4xf32>
    %cst_12 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %22 = stablehlo.broadcast_in_dim %cst_12, dims = [] : (tensor<f32>) -> tensor<4x4xf32>
    %23 = stablehlo.multiply %22, %6#16 : tensor<4x4xf32>
    %24 = stablehlo.subtract %arg5, %23 : tensor<4x4xf32>
    return %9, %12, %15, %18, %21, %24, %6#10 : tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<f32>
  }
  func.func private @closed_call(%arg0: tensor<2x2x4xf32>, %arg1: tensor<2x2x4xf32>, %arg2: tensor<4x4xf32>, %arg3: tensor<4xf32>, %arg4: tensor<4x4xf32>, %arg5: tensor<4xf32>, %arg6: tensor<4x4xf32>, %arg7: tensor<4xf32>, %arg8: tensor<i32>, %arg9: tensor<f32>, %arg10: tensor<4xf32>, %arg11: tensor<4x4xf32>, %arg12: tensor<4xf32>, %arg13: tensor<4x4xf32>, %arg14: tensor<4xf32>, %arg15: tensor<4x4xf32>) -> (tensor<i32>, tensor<f32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>) {
    %c = stablehlo.constant dense<1> : tensor<i32>
    %0 = stablehlo.add %arg8, %c : tensor<i32>
    %1 = stablehlo.optimization_barrier {jaxpp.marker = "loop", jaxpp.num_microbatches = 2 : i64, jaxpp.reductions = "add,add,add,add,add,add,add", jaxpp.stage_markers = "tests/lit/regenerate_inputs.py:48\0Atests/lit/regenerate_inputs.py:48\0Atests/lit/regenerate_inputs.py:48"} %arg8 : tensor<i32>
    %2 = call @dynamic_index_in_dim(%arg0, %1) : (tensor<2x2x4xf32>, tensor<i32>) -> tensor<2x4xf32>
    %3 = call @dynamic_index_in_dim(%arg1, %1) : (tensor<2x2x4xf32>, tensor<i32>) -> tensor<2x4xf32>
    %4 = stablehlo.dot_general %2, %arg2, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %5 = stablehlo.broadcast_in_dim %arg3, dims = [1] : (tensor<4xf32>) -> tensor<1x4xf32>
    %6 = stablehlo.broadcast_in_dim %5, dims = [0, 1] : (tensor<1x4xf32>) -> tensor<2x4xf32>
    %7 = stablehlo.add %4, %6 : tensor<2x4xf32>
    %8 = stablehlo.tanh %7 : tensor<2x4xf32>
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %9 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %10 = stablehlo.subtract %9, %8 : tensor<2x4xf32>
    %11 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %8 : tensor<2x4xf32>
    %12 = stablehlo.dot_general %11, %arg4, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %13 = stablehlo.broadcast_in_dim %arg5, dims = [1] : (tensor<4xf32>) -> tensor<1x4xf32>
    %14 = stablehlo.broadcast_in_dim %13, dims = [0, 1] : (tensor<1x4xf32>) -> tensor<2x4xf32>
    %15 = stablehlo.add %12, %14 : tensor<2x4xf32>
    %16 = stablehlo.tanh %15 : tensor<2x4xf32>
    %cst_0 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %17 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %18 = stablehlo.subtract %17, %16 : tensor<2x4xf32>
    %19 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %16 : tensor<2x4xf32>
    %20 = stablehlo.dot_general %19, %arg6, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %21 = stablehlo.broadcast_in_dim %arg7, dims = [1] : (tensor<4xf32>) -> tensor<1x4xf32>
    %22 = stablehlo.broadcast_in_dim %21, dims = [0, 1] : (tensor<1x4xf32>) -> tensor<2x4xf32>
    %23 = stablehlo.add %20, %22 : tensor<2x4xf32>
    %24 = stablehlo.tanh %23 : tensor<2x4xf32>
    %cst_1 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %25 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %26 = stablehlo.subtract %25, %24 : tensor<2x4xf32>
    %27 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %24 : tensor<2x4xf32>
    %28 = stablehlo.subtract %27, %3 : tensor<2x4xf32>
    %29 = stablehlo.multiply %28, %28 : tensor<2x4xf32>
    %cst_2 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %30 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %31 = stablehlo.multiply %30, %28 : tensor<2x4xf32>
    %cst_3 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %32 = stablehlo.reduce(%29 init: %cst_3) applies stablehlo.add across dimensions = [0, 1] : (tensor<2x4xf32>, tensor<f32>) -> tensor<f32>
    %cst_4 = stablehlo.constant dense<8.000000e+00> : tensor<f32>
    %33 = stablehlo.divide %32, %cst_4 : tensor<f32>
    %cst_5 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %cst_6 = stablehlo.constant dense<8.000000e+00> : tensor<f32>
    %34 = stablehlo.divide %cst_5, %cst_6 : tensor<f32>
    %35 = stablehlo.broadcast_in_dim %34, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %36 = stablehlo.multiply %35, %31 : tensor<2x4xf32>
    %37 = stablehlo.optimization_barrier {jaxpp.marker = "bwd"} %36 : tensor<2x4xf32>
    %38 = stablehlo.multiply %37, %26 : tensor<2x4xf32>
    %39 = stablehlo.multiply %38, %24 : tensor<2x4xf32>
    %40 = stablehlo.add %38, %39 : tensor<2x4xf32>
    %cst_7 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %41 = stablehlo.reduce(%40 init: %cst_7) applies stablehlo.add across dimensions = [0] : (tensor<2x4xf32>, tensor<f32>) -> tensor<4xf32>
    %42 = stablehlo.reshape %41 : (tensor<4xf32>) -> tensor<1x4xf32>
    %cst_8 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %43 = stablehlo.reduce(%42 init: %cst_8) applies stablehlo.add across dimensions = [0] : (tensor<1x4xf32>, tensor<f32>) -> tensor<4xf32>
    %44 = stablehlo.dot_general %40, %19, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %45 = stablehlo.transpose %44, dims = [1, 0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %46 = stablehlo.dot_general %40, %arg6, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %47 = stablehlo.optimization_barrier {jaxpp.marker = "bwd"} %46 : tensor<2x4xf32>
    %48 = stablehlo.multiply %47, %18 : tensor<2x4xf32>
    %49 = stablehlo.multiply %48, %16 : tensor<2x4xf32>
    %50 = stablehlo.add %48, %49 : tensor<2x4xf32>
    %cst_9 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %51 = stablehlo.reduce(%50 init: %cst_9) applies stablehlo.add across dimensions = [0] : (tensor<2x4xf32>, tensor<f32>) -> tensor<4xf32>
    %52 = stablehlo.reshape %51 : (tensor<4xf32>) -> tensor<1x4xf32>
    %cst_10 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %53 = stablehlo.reduce(%52 init: %cst_10) applies stablehlo.add across dimensions = [0] : (tensor<1x4xf32>, tensor<f32>) -> tensor<4xf32>
    %54 = stablehlo.dot_general %50, %11, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %55 = stablehlo.transpose %54, dims = [1, 0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %56 = stablehlo.dot_general %50, %arg4, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %57 = stablehlo.optimization_barrier {jaxpp.marker = "bwd"} %56 : tensor<2x4xf32>
    %58 = stablehlo.multiply %57, %10 : tensor<2x4xf32>
    %59 = stablehlo.multiply %58, %8 : tensor<2x4xf32>
    %60 = stablehlo.add %58, %59 : tensor<2x4xf32>
    %cst_11 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %61 = stablehlo.reduce(%60 init: %cst_11) applies stablehlo.add across dimensions = [0] : (tensor<2x4xf32>, tensor<f32>) -> tensor<4xf32>
    %62 = stablehlo.reshape %61 : (tensor<4xf32>) -> tensor<1x4xf32>
    %cst_12 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %63 = stablehlo.reduce(%62 init: %cst_12) applies stablehlo.add across dimensions = [0] : (tensor<1x4xf32>, tensor<f32>) -> tensor<4xf32>
    %64 = stablehlo.dot_general %60, %2, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %65 = stablehlo.transpose %64, dims = [1, 0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %66 = stablehlo.add %arg9, %33 : tensor<f32>
    %67 = stablehlo.add %arg10, %63 : tensor<4xf32>
    %68 = stablehlo.add %arg11, %65 : tensor<4x4xf32>
    %69 = stablehlo.add %arg12, %53 : tensor<4xf32>
    %70 = stablehlo.add %arg13, %55 : tensor<4x4xf32>
    %71 = stablehlo.add %arg14, %43 : tensor<4xf32>
    %72 = stablehlo.add %arg15, %45 : tensor<4x4xf32>
    return %0, %66, %67, %68, %69, %70, %71, %72 : tensor<i32>, tensor<f32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>
  }
  func.func private @dynamic_index_in_dim(%arg0: tensor<2x2x4xf32>, %arg1: tensor<i32>) -> tensor<2x4xf32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.compare LT, %arg1, %c, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_0 = stablehlo.constant dense<2> : tensor<i32>
    %1 = stablehlo.add %arg1, %c_0 : tensor<i32>
    %2 = stablehlo.select %0, %1, %arg1 : tensor<i1>, tensor<i32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %3 = stablehlo.dynamic_slice %arg0, %2, %c_1, %c_2, sizes = [1, 2, 4] : (tensor<2x2x4xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x4xf32>
    %4 = stablehlo.reshape %3 : (tensor<1x2x4xf32>) -> tensor<2x4xf32>
    return %4 : tensor<2x4xf32>
  }
}
