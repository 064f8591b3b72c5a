module @jit_step attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4x4xf32>, %arg2: tensor<4xf32>, %arg3: tensor<4x4xf32>, %arg4: tensor<4xf32>, %arg5: tensor<4x4xf32>, %arg6: tensor<2x4xf32>, %arg7: tensor<2x4xf32>) -> (tensor<4xf32> {jax.result_info = "result[0][0]['b']"}, tensor<4x4xf32> {jax.result_info = "result[0][0]['w']"}, tensor<4xf32> {jax.result_info = "result[0][1]['b']"}, tensor<4x4xf32> {jax.result_info = "result[0][1]['w']"}, tensor<4xf32> {jax.result_info = "result[0][2]['b']"}, tensor<4x4xf32> {jax.result_info = "result[0][2]['w']"}, tensor<f32> {jax.result_info = "result[1]"}) {
    %0 = stablehlo.dot_general %arg6, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %1 = stablehlo.broadcast_in_dim %arg0, dims = [1] : (tensor<4xf32>) -> tensor<1x4xf32>
    %2 = stablehlo.broadcast_in_dim %1, dims = [0, 1] : (tensor<1x4xf32>) -> tensor<2x4xf32>
    %3 = stablehlo.add %0, %2 : tensor<2x4xf32>
    %4 = stablehlo.tanh %3 : tensor<2x4xf32>
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %5 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %6 = stablehlo.subtract %5, %4 : tensor<2x4xf32>
    %7 = stablehlo.custom_call @jaxpp.enter_stage(%4) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, operand_layouts = [dense<[1, 0]> : tensor<2xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>], result_layouts = [dense<[1, 0]> : tensor<2xindex>], sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([i, j]) {i=2, j=4}>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %8 = stablehlo.dot_general %7, %arg3, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %9 = stablehlo.broadcast_in_dim %arg2, dims = [1] : (tensor<4xf32>) -> tensor<1x4xf32>
    %10 = stablehlo.broadcast_in_dim %9, dims = [0, 1] : (tensor<1x4xf32>) -> tensor<2x4xf32>
    %11 = stablehlo.add %8, %10 : tensor<2x4xf32>
    %12 = stablehlo.tanh %11 : tensor<2x4xf32>
    %cst_0 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %13 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %14 = stablehlo.subtract %13, %12 : tensor<2x4xf32>
    %15 = stablehlo.custom_call @jaxpp.enter_stage(%12) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, operand_layouts = [dense<[1, 0]> : tensor<2xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>], result_layouts = [dense<[1, 0]> : tensor<2xindex>], sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([i, j]) {i=2, j=4}>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %16 = stablehlo.dot_general %15, %arg5, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %17 = stablehlo.broadcast_in_dim %arg4, dims = [1] : (tensor<4xf32>) -> tensor<1x4xf32>
    %18 = stablehlo.broadcast_in_dim %17, dims = [0, 1] : (tensor<1x4xf32>) -> tensor<2x4xf32>
    %19 = stablehlo.add %16, %18 : tensor<2x4xf32>
    %20 = stablehlo.tanh %19 : tensor<2x4xf32>
    %cst_1 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %21 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %22 = stablehlo.subtract %21, %20 : tensor<2x4xf32>
    %23 = stablehlo.custom_call @jaxpp.enter_stage(%20) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, operand_layouts = [dense<[1, 0]> : tensor<2xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>], result_layouts = [dense<[1, 0]> : tensor<2xindex>], sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([i, j]) {i=2, j=4}>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %24 = stablehlo.subtract %23, %arg7 : tensor<2x4xf32>
    %25 = stablehlo.multiply %24, %24 : tensor<2x4xf32>
    %cst_2 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %26 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %27 = stablehlo.multiply %26, %24 : tensor<2x4xf32>
    %cst_3 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %28 = stablehlo.reduce(%25 init: %cst_3) applies stablehlo.add across dimensions = [0, 1] : (tensor<2x4xf32>, tensor<f32>) -> tensor<f32>
    %cst_4 = stablehlo.constant dense<8.000000e+00> : tensor<f32>
    %29 = stablehlo.divide %28, %cst_4 : tensor<f32>
    %cst_5 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %cst_6 = stablehlo.constant dense<8.000000e+00> : tensor<f32>
    %30 = stablehlo.divide %cst_5, %cst_6 : tensor<f32>
    %31 = stablehlo.broadcast_in_dim %30, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %32 = stablehlo.multiply %31, %27 : tensor<2x4xf32>
    %33 = stablehlo.custom_call @jaxpp.enter_stage(%32) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "bwd"}, operand_layouts = [dense<[1, 0]> : tensor<2xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>], result_layouts = [dense<[1, 0]> : tensor<2xindex>], sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([i, j]) {i=2, j=4}>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %34 = stablehlo.multiply %33, %22 : tensor<2x4xf32>
    %35 = stablehlo.multiply %34, %20 : tensor<2x4xf32>
    %36 = stablehlo.add %34, %35 : tensor<2x4xf32>
    %cst_7 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %37 = stablehlo.reduce(%36 init: %cst_7) applies stablehlo.add across dimensions = [0] : (tensor<2x4xf32>, tensor<f32>) -> tensor<4xf32>
    %38 = stablehlo.reshape %37 : (tensor<4xf32>) -> tensor<1x4xf32>
    %cst_8 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %39 = stablehlo.reduce(%38 init: %cst_8) applies stablehlo.add across dimensions = [0] : (tensor<1x4xf32>, tensor<f32>) -> tensor<4xf32>
    %40 = stablehlo.dot_general %36, %15, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %41 = stablehlo.transpose %40, dims = [1, 0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %42 = stablehlo.dot_general %36, %arg5, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %43 = stablehlo.custom_call @jaxpp.enter_stage(%42) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "bwd"}, operand_layouts = [dense<[1, 0]> : tensor<2xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>], result_layouts = [dense<[1, 0]> : tensor<2xindex>], sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([i, j]) {i=2, j=4}>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %44 = stablehlo.multiply %43, %14 : tensor<2x4xf32>
    %45 = stablehlo.multiply %44, %12 : tensor<2x4xf32>
    %46 = stablehlo.add %44, %45 : tensor<2x4xf32>
    %cst_9 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %47 = stablehlo.reduce(%46 init: %cst_9) applies stablehlo.add across dimensions = [0] : (tensor<2x4xf32>, tensor<f32>) -> tensor<4xf32>
    %48 = stablehlo.reshape %47 : (tensor<4xf32>) -> tensor<1x4xf32>
    %cst_10 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %49 = stablehlo.reduce(%48 init: %cst_10) applies stablehlo.add across dimensions = [0] : (tensor<1x4xf32>, tensor<f32>) -> tensor<4xf32>
    %50 = stablehlo.dot_general %46, %7, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %51 = stablehlo.transpose %50, dims = [1, 0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %52 = stablehlo.dot_general %46, %arg3, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %53 = stablehlo.custom_call @jaxpp.enter_stage(%52) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "bwd"}, operand_layouts = [dense<[1, 0]> : tensor<2xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>], result_layouts = [dense<[1, 0]> : tensor<2xindex>], sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([i, j]) {i=2, j=4}>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %54 = stablehlo.multiply %53, %6 : tensor<2x4xf32>
    %55 = stablehlo.multiply %54, %4 : tensor<2x4xf32>
    %56 = stablehlo.add %54, %55 : tensor<2x4xf32>
    %cst_11 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %57 = stablehlo.reduce(%56 init: %cst_11) applies stablehlo.add across dimensions = [0] : (tensor<2x4xf32>, tensor<f32>) -> tensor<4xf32>
    %58 = stablehlo.reshape %57 : (tensor<4xf32>) -> tensor<1x4xf32>
    %cst_12 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %59 = stablehlo.reduce(%58 init: %cst_12) applies stablehlo.add across dimensions = [0] : (tensor<1x4xf32>, tensor<f32>) -> tensor<4xf32>
    %60 = stablehlo.dot_general %56, %arg6, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %61 = stablehlo.transpose %60, dims = [1, 0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %cst_13 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %62 = stablehlo.broadcast_in_dim %cst_13, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %63 = stablehlo.multiply %62, %59 : tensor<4xf32>
    %64 = stablehlo.subtract %arg0, %63 : tensor<4xf32>
    %cst_14 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %65 = stablehlo.broadcast_in_dim %cst_14, dims = [] : (tensor<f32>) -> tensor<4x4xf32>
    %66 = stablehlo.multiply %65, %61 : tensor<4x4xf32>
    %67 = stablehlo.subtract %arg1, %66 : tensor<4x4xf32>
    %cst_15 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %68 = stablehlo.broadcast_in_dim %cst_15, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %69 = stablehlo.multiply %68, %49 : tensor<4xf32>
    %70 = stablehlo.subtract %arg2, %69 : tensor<4xf32>
    %cst_16 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %71 = stablehlo.broadcast_in_dim %cst_16, dims = [] : (tensor<f32>) -> tensor<4x4xf32>
    %72 = stablehlo.multiply %71, %51 : tensor<4x4xf32>
    %73 = stablehlo.subtract %arg3, %72 : tensor<4x4xf32>
    %cst_17 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %74 = stablehlo.broadcast_in_dim %cst_17, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %75 = stablehlo.multiply %74, %39 : tensor<4xf32>
    %76 = stablehlo.subtract %arg4, %75 : tensor<4xf32>
    %cst_18 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %77 = stablehlo.broadcast_in_dim %cst_18, dims = [] : (tensor<f32>) -> tensor<4x4xf32>
    %78 = stablehlo.multiply %77, %41 : tensor<4x4xf32>
    %79 = stablehlo.subtract %arg5, %78 : tensor<4x4xf32>
    return %64, %67, %70, %73, %76, %79, %29 : tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<f32>
  }
}
