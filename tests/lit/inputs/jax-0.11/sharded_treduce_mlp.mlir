module @jit_step attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["stage"=1, "data"=2, "model"=2]> {stablehlo.mesh = {axes = [{name = "stage", size = 1 : i64}, {name = "data", size = 2 : i64}, {name = "model", size = 2 : i64}]}}
  func.func public @main(%arg0: tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}, %arg1: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>}, %arg2: tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}, %arg3: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>}, %arg4: tensor<2x2x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"data"}, {}]>}, %arg5: tensor<2x2x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"data"}, {}]>}) -> (tensor<4x8xf32> {jax.result_info = "result[0][0][0]"}, tensor<8x4xf32> {jax.result_info = "result[0][0][1]"}, tensor<4x8xf32> {jax.result_info = "result[0][1][0]"}, tensor<8x4xf32> {jax.result_info = "result[0][1][1]"}, tensor<2xf32> {jax.result_info = "result[1]"}) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2xf32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<4x8xf32>
    %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<8x4xf32>
    %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %3 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<4x8xf32>
    %cst_3 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %4 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<8x4xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_4 = stablehlo.constant dense<0> : tensor<i32>
    %5:13 = stablehlo.while(%iterArg = %arg4, %iterArg_9 = %arg5, %iterArg_10 = %arg0, %iterArg_11 = %arg1, %iterArg_12 = %arg2, %iterArg_13 = %arg3, %iterArg_14 = %c_4, %iterArg_15 = %c, %iterArg_16 = %0, %iterArg_17 = %1, %iterArg_18 = %2, %iterArg_19 = %3, %iterArg_20 = %4) : tensor<2x2x4xf32>, tensor<2x2x4xf32>, tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8xf32>, tensor<8x4xf32>, tensor<i32>, tensor<i32>, tensor<2xf32>, tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8xf32>, tensor<8x4xf32>
    cond {
      %c_21 = stablehlo.constant dense<2> : tensor<i32>
      %18 = stablehlo.compare LT, %iterArg_14, %c_21, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %18 : tensor<i1>
    } do {
      %c_21 = stablehlo.constant dense<1> : tensor<i32>
      %18 = stablehlo.add %iterArg_15, %c_21 : tensor<i32>
      %19 = stablehlo.optimization_barrier {jaxpp.marker = "loop", jaxpp.num_microbatches = 2 : i64, jaxpp.reductions = "concat(0),add,add,add,add", jaxpp.stage_markers = "tests/lit/regenerate_inputs.py:155\0Atests/lit/regenerate_inputs.py:155"} %iterArg_15 : tensor<i32>
      %20 = func.call @dynamic_index_in_dim(%iterArg, %19) : (tensor<2x2x4xf32>, tensor<i32>) -> tensor<2x4xf32>
      %21 = func.call @dynamic_index_in_dim(%iterArg_9, %19) : (tensor<2x2x4xf32>, tensor<i32>) -> tensor<2x4xf32>
      %22 = stablehlo.dot_general %20, %iterArg_10, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
      %23 = stablehlo.tanh %22 : tensor<2x8xf32>
      %cst_22 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
      %24 = stablehlo.broadcast_in_dim %cst_22, dims = [] : (tensor<f32>) -> tensor<2x8xf32>
      %25 = stablehlo.add %24, %23 : tensor<2x8xf32>
      %cst_23 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
      %26 = stablehlo.broadcast_in_dim %cst_23, dims = [] : (tensor<f32>) -> tensor<2x8xf32>
      %27 = stablehlo.subtract %26, %23 : tensor<2x8xf32>
      %28 = stablehlo.multiply %25, %27 : tensor<2x8xf32>
      %29 = stablehlo.dot_general %23, %iterArg_11, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
      %30 = sdy.sharding_constraint %29 <@mesh, [{"data"}, {}]> : tensor<2x4xf32>
      %31 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %30 : tensor<2x4xf32>
      %32 = stablehlo.dot_general %31, %iterArg_12, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
      %33 = stablehlo.tanh %32 : tensor<2x8xf32>
      %cst_24 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
      %34 = stablehlo.broadcast_in_dim %cst_24, dims = [] : (tensor<f32>) -> tensor<2x8xf32>
      %35 = stablehlo.add %34, %33 : tensor<2x8xf32>
      %cst_25 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
      %36 = stablehlo.broadcast_in_dim %cst_25, dims = [] : (tensor<f32>) -> tensor<2x8xf32>
      %37 = stablehlo.subtract %36, %33 : tensor<2x8xf32>
      %38 = stablehlo.multiply %35, %37 : tensor<2x8xf32>
      %39 = stablehlo.dot_general %33, %iterArg_13, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
      %40 = sdy.sharding_constraint %39 <@mesh, [{"data"}, {}]> : tensor<2x4xf32>
      %41 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %40 : tensor<2x4xf32>
      %42 = stablehlo.subtract %41, %21 : tensor<2x4xf32>
      %43 = stablehlo.multiply %42, %42 : tensor<2x4xf32>
      %cst_26 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
      %44 = stablehlo.broadcast_in_dim %cst_26, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
      %45 = stablehlo.multiply %44, %42 : tensor<2x4xf32>
      %cst_27 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %46 = stablehlo.reduce(%43 init: %cst_27) applies stablehlo.add across dimensions = [0, 1] : (tensor<2x4xf32>, tensor<f32>) -> tensor<f32>
      %cst_28 = stablehlo.constant dense<8.000000e+00> : tensor<f32>
      %47 = stablehlo.divide %46, %cst_28 : tensor<f32>
      %cst_29 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
      %cst_30 = stablehlo.constant dense<8.000000e+00> : tensor<f32>
      %48 = stablehlo.divide %cst_29, %cst_30 : tensor<f32>
      %49 = stablehlo.broadcast_in_dim %48, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
      %50 = stablehlo.multiply %49, %45 : tensor<2x4xf32>
      %51 = stablehlo.optimization_barrier {jaxpp.marker = "bwd"} %50 : tensor<2x4xf32>
      %52 = sdy.sharding_constraint %51 <@mesh, [{"data"}, {}]> : tensor<2x4xf32>
      %53 = stablehlo.dot_general %52, %33, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<2x8xf32>) -> tensor<4x8xf32>
      %54 = stablehlo.transpose %53, dims = [1, 0] : (tensor<4x8xf32>) -> tensor<8x4xf32>
      %55 = stablehlo.dot_general %52, %iterArg_13, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
      %56 = stablehlo.multiply %55, %38 : tensor<2x8xf32>
      %57 = stablehlo.dot_general %56, %31, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x8xf32>, tensor<2x4xf32>) -> tensor<8x4xf32>
      %58 = stablehlo.transpose %57, dims = [1, 0] : (tensor<8x4xf32>) -> tensor<4x8xf32>
      %59 = stablehlo.dot_general %56, %iterArg_12, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
      %60 = stablehlo.optimization_barrier {jaxpp.marker = "bwd"} %59 : tensor<2x4xf32>
      %61 = sdy.sharding_constraint %60 <@mesh, [{"data"}, {}]> : tensor<2x4xf32>
      %62 = stablehlo.dot_general %61, %23, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<2x8xf32>) -> tensor<4x8xf32>
      %63 = stablehlo.transpose %62, dims = [1, 0] : (tensor<4x8xf32>) -> tensor<8x4xf32>
      %64 = stablehlo.dot_general %61, %iterArg_11, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
      %65 = stablehlo.multiply %64, %28 : tensor<2x8xf32>
      %66 = stablehlo.dot_general %65, %20, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x8xf32>, tensor<2x4xf32>) -> tensor<8x4xf32>
      %67 = stablehlo.transpose %66, dims = [1, 0] : (tensor<8x4xf32>) -> tensor<4x8xf32>
      %68 = func.call @dynamic_update_index_in_dim(%iterArg_16, %47, %19) : (tensor<2xf32>, tensor<f32>, tensor<i32>) -> tensor<2xf32>
      %69 = stablehlo.add %iterArg_17, %67 : tensor<4x8xf32>
      %70 = stablehlo.add %iterArg_18, %63 : tensor<8x4xf32>
      %71 = stablehlo.add %iterArg_19, %58 : tensor<4x8xf32>
      %72 = stablehlo.add %iterArg_20, %54 : tensor<8x4xf32>
      %c_31 = stablehlo.constant dense<1> : tensor<i32>
      %73 = stablehlo.add %iterArg_14, %c_31 : tensor<i32>
      stablehlo.return %iterArg, %iterArg_9, %iterArg_10, %iterArg_11, %iterArg_12, %iterArg_13, %73, %18, %68, %69, %70, %71, %72 : tensor<2x2x4xf32>, tensor<2x2x4xf32>, tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8xf32>, tensor<8x4xf32>, tensor<i32>, tensor<i32>, tensor<2xf32>, tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8xf32>, tensor<8x4xf32>
    }
    %cst_5 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %6 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<f32>) -> tensor<4x8xf32>
    %7 = stablehlo.multiply %6, %5#9 : tensor<4x8xf32>
    %8 = stablehlo.subtract %arg0, %7 : tensor<4x8xf32>
    %cst_6 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %9 = stablehlo.broadcast_in_dim %cst_6, dims = [] : (tensor<f32>) -> tensor<8x4xf32>
    %10 = stablehlo.multiply %9, %5#10 : tensor<8x4xf32>
    %11 = stablehlo.subtract %arg1, %10 : tensor<8x4xf32>
    %cst_7 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %12 = stablehlo.broadcast_in_dim %cst_7, dims = [] : (tensor<f32>) -> tensor<4x8xf32>
    %13 = stablehlo.multiply %12, %5#11 : tensor<4x8xf32>
    %14 = stablehlo.subtract %arg2, %13 : tensor<4x8xf32>
    %cst_8 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %15 = stablehlo.broadcast_in_dim %cst_8, dims = [] : (tensor<f32>) -> tensor<8x4xf32>
    %16 = stablehlo.multiply %15, %5#12 : tensor<8x4xf32>
    %17 = stablehlo.subtract %arg3, %16 : tensor<8x4xf32>
    return %8, %11, %14, %17, %5#8 : tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8xf32>, tensor<8x4xf32>, tensor<2xf32>
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
  func.func private @dynamic_update_index_in_dim(%arg0: tensor<2xf32>, %arg1: tensor<f32>, %arg2: tensor<i32>) -> tensor<2xf32> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [] : (tensor<f32>) -> tensor<1xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.compare LT, %arg2, %c, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %2 = stablehlo.convert %arg2 : tensor<i32>
    %c_0 = stablehlo.constant dense<2> : tensor<i32>
    %3 = stablehlo.add %2, %c_0 : tensor<i32>
    %4 = stablehlo.select %1, %3, %arg2 : tensor<i1>, tensor<i32>
    %5 = stablehlo.dynamic_update_slice %arg0, %0, %4 : (tensor<2xf32>, tensor<1xf32>, tensor<i32>) -> tensor<2xf32>
    return %5 : tensor<2xf32>
  }
}
