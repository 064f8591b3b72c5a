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
      %c_29 = stablehlo.constant dense<1> : tensor<i32>
      %25 = stablehlo.add %iterArg_21, %c_29 : tensor<i32>
      %26 = stablehlo.optimization_barrier {jaxpp.marker = "loop", jaxpp.num_microbatches = 2 : i64, jaxpp.reductions = "add,add,add,add,add,add,add", jaxpp.stage_markers = "tests/lit/regenerate_inputs.py:48\0Atests/lit/regenerate_inputs.py:48\0Atests/lit/regenerate_inputs.py:48"} %iterArg_21 : tensor<i32>
      %27 = func.call @dynamic_index_in_dim(%iterArg, %26) : (tensor<2x2x4xf32>, tensor<i32>) -> tensor<2x4xf32>
      %28 = func.call @dynamic_index_in_dim(%iterArg_13, %26) : (tensor<2x2x4xf32>, tensor<i32>) -> tensor<2x4xf32>
      %29 = stablehlo.dot_general %27, %iterArg_14, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
      %30 = stablehlo.broadcast_in_dim %iterArg_15, dims = [1] : (tensor<4xf32>) -> tensor<1x4xf32>
      %31 = stablehlo.broadcast_in_dim %30, dims = [0, 1] : (tensor<1x4xf32>) -> tensor<2x4xf32>
      %32 = stablehlo.add %29, %31 : tensor<2x4xf32>
      %33 = stablehlo.tanh %32 : tensor<2x4xf32>
      %cst_30 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
      %34 = stablehlo.broadcast_in_dim %cst_30, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
      %35 = stablehlo.add %34, %33 : tensor<2x4xf32>
      %cst_31 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
      %36 = stablehlo.broadcast_in_dim %cst_31, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
      %37 = stablehlo.subtract %36, %33 : tensor<2x4xf32>
      %38 = stablehlo.multiply %35, %37 : tensor<2x4xf32>
      %39 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %33 : tensor<2x4xf32>
      %40 = stablehlo.dot_general %39, %iterArg_16, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
      %41 = stablehlo.broadcast_in_dim %iterArg_17, dims = [1] : (tensor<4xf32>) -> tensor<1x4xf32>
      %42 = stablehlo.broadcast_in_dim %41, dims = [0, 1] : (tensor<1x4xf32>) -> tensor<2x4xf32>
      %43 = stablehlo.add %40, %42 : tensor<2x4xf32>
      %44 = stablehlo.tanh %43 : tensor<2x4xf32>
      %cst_32 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
      %45 = stablehlo.broadcast_in_dim %cst_32, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
      %46 = stablehlo.add %45, %44 : tensor<2x4xf32>
      %cst_33 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
      %47 = stablehlo.broadcast_in_dim %cst_33, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
      %48 = stablehlo.subtract %47, %44 : tensor<2x4xf32>
      %49 = stablehlo.multiply %46, %48 : tensor<2x4xf32>
      %50 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %44 : tensor<2x4xf32>
      %51 = stablehlo.dot_general %50, %iterArg_18, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
      %52 = stablehlo.broadcast_in_dim %iterArg_19, dims = [1] : (tensor<4xf32>) -> tensor<1x4xf32>
      %53 = stablehlo.broadcast_in_dim %52, dims = [0, 1] : (tensor<1x4xf32>) -> tensor<2x4xf32>
      %54 = stablehlo.add %51, %53 : tensor<2x4xf32>
      %55 = stablehlo.tanh %54 : tensor<2x4xf32>
      %cst_34 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
      %56 = stablehlo.broadcast_in_dim %cst_34, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
      %57 = stablehlo.add %56, %55 : tensor<2x4xf32>
      %cst_35 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
      %58 = stablehlo.broadcast_in_dim %cst_35, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
      %59 = stablehlo.subtract %58, %55 : tensor<2x4xf32>
      %60 = stablehlo.multiply %57, %59 : tensor<2x4xf32>
      %61 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %55 : tensor<2x4xf32>
      %62 = stablehlo.subtract %61, %28 : tensor<2x4xf32>
      %63 = stablehlo.multiply %62, %62 : tensor<2x4xf32>
      %cst_36 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
      %64 = stablehlo.broadcast_in_dim %cst_36, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
      %65 = stablehlo.multiply %64, %62 : tensor<2x4xf32>
      %cst_37 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %66 = stablehlo.reduce(%63 init: %cst_37) applies stablehlo.add across dimensions = [0, 1] : (tensor<2x4xf32>, tensor<f32>) -> tensor<f32>
      %cst_38 = stablehlo.constant dense<8.000000e+00> : tensor<f32>
      %67 = stablehlo.divide %66, %cst_38 : tensor<f32>
      %cst_39 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
      %cst_40 = stablehlo.constant dense<8.000000e+00> : tensor<f32>
      %68 = stablehlo.divide %cst_39, %cst_40 : tensor<f32>
      %69 = stablehlo.broadcast_in_dim %68, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
      %70 = stablehlo.multiply %69, %65 : tensor<2x4xf32>
      %71 = stablehlo.optimization_barrier {jaxpp.marker = "bwd"} %70 : tensor<2x4xf32>
      %72 = stablehlo.multiply %71, %60 : tensor<2x4xf32>
      %cst_41 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %73 = stablehlo.reduce(%72 init: %cst_41) applies stablehlo.add across dimensions = [0] : (tensor<2x4xf32>, tensor<f32>) -> tensor<4xf32>
      %74 = stablehlo.reshape %73 : (tensor<4xf32>) -> tensor<1x4xf32>
      %cst_42 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %75 = stablehlo.reduce(%74 init: %cst_42) applies stablehlo.add across dimensions = [0] : (tensor<1x4xf32>, tensor<f32>) -> tensor<4xf32>
      %76 = stablehlo.dot_general %72, %50, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
      %77 = stablehlo.transpose %76, dims = [1, 0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
      %78 = stablehlo.dot_general %72, %iterArg_18, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
      %79 = stablehlo.optimization_barrier {jaxpp.marker = "bwd"} %78 : tensor<2x4xf32>
      %80 = stablehlo.multiply %79, %49 : tensor<2x4xf32>
      %cst_43 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %81 = stablehlo.reduce(%80 init: %cst_43) applies stablehlo.add across dimensions = [0] : (tensor<2x4xf32>, tensor<f32>) -> tensor<4xf32>
      %82 = stablehlo.reshape %81 : (tensor<4xf32>) -> tensor<1x4xf32>
      %cst_44 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %83 = stablehlo.reduce(%82 init: %cst_44) applies stablehlo.add across dimensions = [0] : (tensor<1x4xf32>, tensor<f32>) -> tensor<4xf32>
      %84 = stablehlo.dot_general %80, %39, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
      %85 = stablehlo.transpose %84, dims = [1, 0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
      %86 = stablehlo.dot_general %80, %iterArg_16, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
      %87 = stablehlo.optimization_barrier {jaxpp.marker = "bwd"} %86 : tensor<2x4xf32>
      %88 = stablehlo.multiply %87, %38 : tensor<2x4xf32>
      %cst_45 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %89 = stablehlo.reduce(%88 init: %cst_45) applies stablehlo.add across dimensions = [0] : (tensor<2x4xf32>, tensor<f32>) -> tensor<4xf32>
      %90 = stablehlo.reshape %89 : (tensor<4xf32>) -> tensor<1x4xf32>
      %cst_46 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %91 = stablehlo.reduce(%90 init: %cst_46) applies stablehlo.add across dimensions = [0] : (tensor<1x4xf32>, tensor<f32>) -> tensor<4xf32>
      %92 = stablehlo.dot_general %88, %27, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
      %93 = stablehlo.transpose %92, dims = [1, 0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
      %94 = stablehlo.add %iterArg_22, %67 : tensor<f32>
      %95 = stablehlo.add %iterArg_23, %91 : tensor<4xf32>
      %96 = stablehlo.add %iterArg_24, %93 : tensor<4x4xf32>
      %97 = stablehlo.add %iterArg_25, %83 : tensor<4xf32>
      %98 = stablehlo.add %iterArg_26, %85 : tensor<4x4xf32>
      %99 = stablehlo.add %iterArg_27, %75 : tensor<4xf32>
      %100 = stablehlo.add %iterArg_28, %77 : tensor<4x4xf32>
      %c_47 = stablehlo.constant dense<1> : tensor<i32>
      %101 = stablehlo.add %iterArg_20, %c_47 : tensor<i32>
      stablehlo.return %iterArg, %iterArg_13, %iterArg_14, %iterArg_15, %iterArg_16, %iterArg_17, %iterArg_18, %iterArg_19, %101, %25, %94, %95, %96, %97, %98, %99, %100 : tensor<2x2x4xf32>, tensor<2x2x4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<i32>, tensor<i32>, tensor<f32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>
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
