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
      %18:6 = func.call @closed_call(%iterArg, %iterArg_9, %iterArg_10, %iterArg_11, %iterArg_12, %iterArg_13, %iterArg_15, %iterArg_16, %iterArg_17, %iterArg_18, %iterArg_19, %iterArg_20) : (tensor<2x2x4xf32>, tensor<2x2x4xf32>, tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8xf32>, tensor<8x4xf32>, tensor<i32>, tensor<2xf32>, tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8xf32>, tensor<8x4xf32>) -> (tensor<i32>, tensor<2xf32>, tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8xf32>, tensor<8x4xf32>)
      %c_21 = stablehlo.constant dense<1> : tensor<i32>
      %19 = stablehlo.add %iterArg_14, %c_21 : tensor<i32>
      stablehlo.return %iterArg, %iterArg_9, %iterArg_10, %iterArg_11, %iterArg_12, %iterArg_13, %19, %18#0, %18#1, %18#2, %18#3, %18#4, %18#5 : tensor<2x2x4xf32>, tensor<2x2x4xf32>, tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8xf32>, tensor<8x4xf32>, tensor<i32>, tensor<i32>, tensor<2xf32>, tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8xf32>, tensor<8x4xf32>
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
  func.func private @closed_call(%arg0: tensor<2x2x4xf32>, %arg1: tensor<2x2x4xf32>, %arg2: tensor<4x8xf32>, %arg3: tensor<8x4xf32>, %arg4: tensor<4x8xf32>, %arg5: tensor<8x4xf32>, %arg6: tensor<i32>, %arg7: tensor<2xf32>, %arg8: tensor<4x8xf32>, %arg9: tensor<8x4xf32>, %arg10: tensor<4x8xf32>, %arg11: tensor<8x4xf32>) -> (tensor<i32>, tensor<2xf32>, tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8xf32>, tensor<8x4xf32>) {
    %c = stablehlo.constant dense<1> : tensor<i32>
    %0 = stablehlo.add %arg6, %c : tensor<i32>
    %1 = stablehlo.optimization_barrier {jaxpp.marker = "loop", jaxpp.num_microbatches = 2 : i64, jaxpp.reductions = "concat(0),add,add,add,add", jaxpp.stage_markers = "tests/lit/regenerate_inputs.py:155\0Atests/lit/regenerate_inputs.py:155"} %arg6 : tensor<i32>
    %2 = call @dynamic_index_in_dim(%arg0, %1) : (tensor<2x2x4xf32>, tensor<i32>) -> tensor<2x4xf32>
    %3 = call @dynamic_index_in_dim(%arg1, %1) : (tensor<2x2x4xf32>, tensor<i32>) -> tensor<2x4xf32>
    %4 = stablehlo.dot_general %2, %arg2, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    %5 = stablehlo.tanh %4 : tensor<2x8xf32>
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %6 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x8xf32>
    %7 = stablehlo.subtract %6, %5 : tensor<2x8xf32>
    %8 = stablehlo.dot_general %5, %arg3, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
    %9 = sdy.sharding_constraint %8 <@mesh, [{"data"}, {}]> : tensor<2x4xf32>
    %10 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %9 : tensor<2x4xf32>
    %11 = stablehlo.dot_general %10, %arg4, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    %12 = stablehlo.tanh %11 : tensor<2x8xf32>
    %cst_0 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %13 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<2x8xf32>
    %14 = stablehlo.subtract %13, %12 : tensor<2x8xf32>
    %15 = stablehlo.dot_general %12, %arg5, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
    %16 = sdy.sharding_constraint %15 <@mesh, [{"data"}, {}]> : tensor<2x4xf32>
    %17 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %16 : tensor<2x4xf32>
    %18 = stablehlo.subtract %17, %3 : tensor<2x4xf32>
    %19 = stablehlo.multiply %18, %18 : tensor<2x4xf32>
    %cst_1 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %20 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %21 = stablehlo.multiply %20, %18 : tensor<2x4xf32>
    %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %22 = stablehlo.reduce(%19 init: %cst_2) applies stablehlo.add across dimensions = [0, 1] : (tensor<2x4xf32>, tensor<f32>) -> tensor<f32>
    %cst_3 = stablehlo.constant dense<8.000000e+00> : tensor<f32>
    %23 = stablehlo.divide %22, %cst_3 : tensor<f32>
    %cst_4 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %cst_5 = stablehlo.constant dense<8.000000e+00> : tensor<f32>
    %24 = stablehlo.divide %cst_4, %cst_5 : tensor<f32>
    %25 = stablehlo.broadcast_in_dim %24, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %26 = stablehlo.multiply %25, %21 : tensor<2x4xf32>
    %27 = stablehlo.optimization_barrier {jaxpp.marker = "bwd"} %26 : tensor<2x4xf32>
    %28 = sdy.sharding_constraint %27 <@mesh, [{"data"}, {}]> : tensor<2x4xf32>
    %29 = stablehlo.dot_general %28, %12, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<2x8xf32>) -> tensor<4x8xf32>
    %30 = stablehlo.transpose %29, dims = [1, 0] : (tensor<4x8xf32>) -> tensor<8x4xf32>
    %31 = stablehlo.dot_general %28, %arg5, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
    %32 = stablehlo.multiply %31, %14 : tensor<2x8xf32>
    %33 = stablehlo.multiply %32, %12 : tensor<2x8xf32>
    %34 = stablehlo.add %32, %33 : tensor<2x8xf32>
    %35 = stablehlo.dot_general %34, %10, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x8xf32>, tensor<2x4xf32>) -> tensor<8x4xf32>
    %36 = stablehlo.transpose %35, dims = [1, 0] : (tensor<8x4xf32>) -> tensor<4x8xf32>
    %37 = stablehlo.dot_general %34, %arg4, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
    %38 = stablehlo.optimization_barrier {jaxpp.marker = "bwd"} %37 : tensor<2x4xf32>
    %39 = sdy.sharding_constraint %38 <@mesh, [{"data"}, {}]> : tensor<2x4xf32>
    %40 = stablehlo.dot_general %39, %5, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<2x8xf32>) -> tensor<4x8xf32>
    %41 = stablehlo.transpose %40, dims = [1, 0] : (tensor<4x8xf32>) -> tensor<8x4xf32>
    %42 = stablehlo.dot_general %39, %arg3, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
    %43 = stablehlo.multiply %42, %7 : tensor<2x8xf32>
    %44 = stablehlo.multiply %43, %5 : tensor<2x8xf32>
    %45 = stablehlo.add %43, %44 : tensor<2x8xf32>
    %46 = stablehlo.dot_general %45, %2, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x8xf32>, tensor<2x4xf32>) -> tensor<8x4xf32>
    %47 = stablehlo.transpose %46, dims = [1, 0] : (tensor<8x4xf32>) -> tensor<4x8xf32>
    %48 = call @dynamic_update_index_in_dim(%arg7, %23, %1) : (tensor<2xf32>, tensor<f32>, tensor<i32>) -> tensor<2xf32>
    %49 = stablehlo.add %arg8, %47 : tensor<4x8xf32>
    %50 = stablehlo.add %arg9, %41 : tensor<8x4xf32>
    %51 = stablehlo.add %arg10, %36 : tensor<4x8xf32>
    %52 = stablehlo.add %arg11, %30 : tensor<8x4xf32>
    return %0, %48, %49, %50, %51, %52 : tensor<i32>, tensor<2xf32>, tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8xf32>, tensor<8x4xf32>
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
