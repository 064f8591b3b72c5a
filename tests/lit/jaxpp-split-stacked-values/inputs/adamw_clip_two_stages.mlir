module @jit__step attributes {jaxpp.calls_inlined, jaxpp.num_segments = 2 : i64, jaxpp.num_stages = 2 : i64, jaxpp.schedule = {kind = "Std1F1B", num_stages = 2 : i64}, jaxpp.stage_split = array<i64: 1, 1>, mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x2xf32>, %arg1: tensor<4x4x4xf32>, %arg2: tensor<i32>, %arg3: tensor<4x2xf32>, %arg4: tensor<4x4x4xf32>, %arg5: tensor<4x2xf32>, %arg6: tensor<4x4x4xf32>, %arg7: tensor<3x2x4xf32>, %arg8: tensor<3x2x2xf32>) -> (tensor<4x2xf32> {jax.result_info = "result[0]['head']"}, tensor<4x4x4xf32> {jax.result_info = "result[0]['w']"}, tensor<i32> {jax.result_info = "result[1][1][0].count"}, tensor<4x2xf32> {jax.result_info = "result[1][1][0].mu['head']"}, tensor<4x4x4xf32> {jax.result_info = "result[1][1][0].mu['w']"}, tensor<4x2xf32> {jax.result_info = "result[1][1][0].nu['head']"}, tensor<4x4x4xf32> {jax.result_info = "result[1][1][0].nu['w']"}, tensor<3xf32> {jax.result_info = "result[2]"}) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<4x2xf32>
    %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<4x4x4xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %3:3 = "jaxpp.loop"(%0, %1, %2) ({
    ^bb0(%arg9: tensor<i32>, %arg10: tensor<3xf32>, %arg11: tensor<4x2xf32>, %arg12: tensor<4x4x4xf32>):
      %c_34 = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} dense<0> : tensor<i32>
      %91 = stablehlo.compare LT, %arg9, %c_34, SIGNED {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %c_35 = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} dense<3> : tensor<i32>
      %92 = stablehlo.add %arg9, %c_35 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<i32>
      %93 = stablehlo.select %91, %92, %arg9 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<i1>, tensor<i32>
      %c_36 = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} dense<0> : tensor<i32>
      %c_37 = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} dense<0> : tensor<i32>
      %94 = stablehlo.dynamic_slice %arg7, %93, %c_36, %c_37, sizes = [1, 2, 4] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<3x2x4xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x4xf32>
      %95 = stablehlo.reshape %94 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<1x2x4xf32>) -> tensor<2x4xf32>
      %c_38 = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} dense<0> : tensor<i32>
      %96 = stablehlo.compare LT, %arg9, %c_38, SIGNED {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %c_39 = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} dense<3> : tensor<i32>
      %97 = stablehlo.add %arg9, %c_39 {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<i32>
      %98 = stablehlo.select %96, %97, %arg9 {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<i1>, tensor<i32>
      %c_40 = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} dense<0> : tensor<i32>
      %c_41 = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} dense<0> : tensor<i32>
      %99 = stablehlo.dynamic_slice %arg8, %98, %c_40, %c_41, sizes = [1, 2, 2] {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<3x2x2xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x2xf32>
      %100 = stablehlo.reshape %99 {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<1x2x2xf32>) -> tensor<2x2xf32>
      %101 = stablehlo.slice %arg1 [0:1, 0:4, 0:4] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<4x4x4xf32>) -> tensor<1x4x4xf32>
      %102 = stablehlo.slice %arg1 [1:4, 0:4, 0:4] {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<4x4x4xf32>) -> tensor<3x4x4xf32>
      %cst_42 = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} dense<0.000000e+00> : tensor<f32>
      %103 = stablehlo.broadcast_in_dim %cst_42, dims = [] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<f32>) -> tensor<1x2x4xf32>
      %cst_43 = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} dense<0.000000e+00> : tensor<f32>
      %104 = stablehlo.broadcast_in_dim %cst_43, dims = [] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<f32>) -> tensor<1x2x4xf32>
      %c_44 = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} dense<0> : tensor<i32>
      %105:5 = stablehlo.while(%iterArg = %101, %iterArg_59 = %c_44, %iterArg_60 = %95, %iterArg_61 = %103, %iterArg_62 = %104) : tensor<1x4x4xf32>, tensor<i32>, tensor<2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32> attributes {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64}
      cond {
        %c_63 = stablehlo.constant dense<1> : tensor<i32>
        %139 = stablehlo.compare LT, %iterArg_59, %c_63, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %139 : tensor<i1>
      } do {
        %c_63 = stablehlo.constant dense<0> : tensor<i32>
        %c_64 = stablehlo.constant dense<0> : tensor<i32>
        %139 = stablehlo.dynamic_slice %iterArg, %iterArg_59, %c_63, %c_64, sizes = [1, 4, 4] : (tensor<1x4x4xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x4x4xf32>
        %140 = stablehlo.reshape %139 : (tensor<1x4x4xf32>) -> tensor<4x4xf32>
        %141 = stablehlo.dot_general %iterArg_60, %140, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
        %142 = stablehlo.tanh %141 : tensor<2x4xf32>
        %cst_65 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
        %143 = stablehlo.broadcast_in_dim %cst_65, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
        %144 = stablehlo.add %143, %142 : tensor<2x4xf32>
        %cst_66 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
        %145 = stablehlo.broadcast_in_dim %cst_66, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
        %146 = stablehlo.subtract %145, %142 : tensor<2x4xf32>
        %147 = stablehlo.multiply %144, %146 : tensor<2x4xf32>
        %148 = stablehlo.broadcast_in_dim %iterArg_60, dims = [1, 2] : (tensor<2x4xf32>) -> tensor<1x2x4xf32>
        %c_67 = stablehlo.constant dense<0> : tensor<i32>
        %c_68 = stablehlo.constant dense<0> : tensor<i32>
        %149 = stablehlo.dynamic_update_slice %iterArg_61, %148, %iterArg_59, %c_67, %c_68 : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x4xf32>
        %150 = stablehlo.broadcast_in_dim %147, dims = [1, 2] : (tensor<2x4xf32>) -> tensor<1x2x4xf32>
        %c_69 = stablehlo.constant dense<0> : tensor<i32>
        %c_70 = stablehlo.constant dense<0> : tensor<i32>
        %151 = stablehlo.dynamic_update_slice %iterArg_62, %150, %iterArg_59, %c_69, %c_70 : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x4xf32>
        %c_71 = stablehlo.constant dense<1> : tensor<i32>
        %152 = stablehlo.add %iterArg_59, %c_71 : tensor<i32>
        stablehlo.return %iterArg, %152, %142, %149, %151 : tensor<1x4x4xf32>, tensor<i32>, tensor<2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>
      }
      %106 = stablehlo.optimization_barrier {jaxpp.kind = "fwd", jaxpp.marker = "fwd", jaxpp.stage = 0 : i64} %105#2 : tensor<2x4xf32>
      %cst_45 = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} dense<0.000000e+00> : tensor<f32>
      %107 = stablehlo.broadcast_in_dim %cst_45, dims = [] {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<f32>) -> tensor<3x2x4xf32>
      %cst_46 = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} dense<0.000000e+00> : tensor<f32>
      %108 = stablehlo.broadcast_in_dim %cst_46, dims = [] {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<f32>) -> tensor<3x2x4xf32>
      %c_47 = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} dense<0> : tensor<i32>
      %109:5 = stablehlo.while(%iterArg = %102, %iterArg_59 = %c_47, %iterArg_60 = %106, %iterArg_61 = %107, %iterArg_62 = %108) : tensor<3x4x4xf32>, tensor<i32>, tensor<2x4xf32>, tensor<3x2x4xf32>, tensor<3x2x4xf32> attributes {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64}
      cond {
        %c_63 = stablehlo.constant dense<3> : tensor<i32>
        %139 = stablehlo.compare LT, %iterArg_59, %c_63, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %139 : tensor<i1>
      } do {
        %c_63 = stablehlo.constant dense<0> : tensor<i32>
        %c_64 = stablehlo.constant dense<0> : tensor<i32>
        %139 = stablehlo.dynamic_slice %iterArg, %iterArg_59, %c_63, %c_64, sizes = [1, 4, 4] : (tensor<3x4x4xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x4x4xf32>
        %140 = stablehlo.reshape %139 : (tensor<1x4x4xf32>) -> tensor<4x4xf32>
        %141 = stablehlo.dot_general %iterArg_60, %140, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
        %142 = stablehlo.tanh %141 : tensor<2x4xf32>
        %cst_65 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
        %143 = stablehlo.broadcast_in_dim %cst_65, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
        %144 = stablehlo.add %143, %142 : tensor<2x4xf32>
        %cst_66 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
        %145 = stablehlo.broadcast_in_dim %cst_66, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
        %146 = stablehlo.subtract %145, %142 : tensor<2x4xf32>
        %147 = stablehlo.multiply %144, %146 : tensor<2x4xf32>
        %148 = stablehlo.broadcast_in_dim %iterArg_60, dims = [1, 2] : (tensor<2x4xf32>) -> tensor<1x2x4xf32>
        %c_67 = stablehlo.constant dense<0> : tensor<i32>
        %c_68 = stablehlo.constant dense<0> : tensor<i32>
        %149 = stablehlo.dynamic_update_slice %iterArg_61, %148, %iterArg_59, %c_67, %c_68 : (tensor<3x2x4xf32>, tensor<1x2x4xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<3x2x4xf32>
        %150 = stablehlo.broadcast_in_dim %147, dims = [1, 2] : (tensor<2x4xf32>) -> tensor<1x2x4xf32>
        %c_69 = stablehlo.constant dense<0> : tensor<i32>
        %c_70 = stablehlo.constant dense<0> : tensor<i32>
        %151 = stablehlo.dynamic_update_slice %iterArg_62, %150, %iterArg_59, %c_69, %c_70 : (tensor<3x2x4xf32>, tensor<1x2x4xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<3x2x4xf32>
        %c_71 = stablehlo.constant dense<1> : tensor<i32>
        %152 = stablehlo.add %iterArg_59, %c_71 : tensor<i32>
        stablehlo.return %iterArg, %152, %142, %149, %151 : tensor<3x4x4xf32>, tensor<i32>, tensor<2x4xf32>, tensor<3x2x4xf32>, tensor<3x2x4xf32>
      }
      %110 = stablehlo.dot_general %109#2, %arg0, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<2x4xf32>, tensor<4x2xf32>) -> tensor<2x2xf32>
      %111 = stablehlo.subtract %110, %100 {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<2x2xf32>
      %112 = stablehlo.multiply %111, %111 {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<2x2xf32>
      %cst_48 = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} dense<2.000000e+00> : tensor<f32>
      %113 = stablehlo.broadcast_in_dim %cst_48, dims = [] {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<f32>) -> tensor<2x2xf32>
      %114 = stablehlo.multiply %113, %111 {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<2x2xf32>
      %cst_49 = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} dense<0.000000e+00> : tensor<f32>
      %115 = stablehlo.reduce(%112 init: %cst_49) applies stablehlo.add across dimensions = [0, 1] {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<2x2xf32>, tensor<f32>) -> tensor<f32>
      %cst_50 = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} dense<4.000000e+00> : tensor<f32>
      %116 = stablehlo.divide %115, %cst_50 {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<f32>
      %117 = stablehlo.optimization_barrier {jaxpp.kind = "fwd", jaxpp.marker = "fwd", jaxpp.stage = 1 : i64} %116 : tensor<f32>
      %cst_51 = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} dense<1.000000e+00> : tensor<f32>
      %118 = stablehlo.optimization_barrier {jaxpp.kind = "fwd", jaxpp.marker = "bwd", jaxpp.stage = 1 : i64} %cst_51 : tensor<f32>
      %cst_52 = stablehlo.constant {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} dense<4.000000e+00> : tensor<f32>
      %119 = stablehlo.divide %118, %cst_52 {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : tensor<f32>
      %120 = stablehlo.broadcast_in_dim %119, dims = [] {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : (tensor<f32>) -> tensor<2x2xf32>
      %121 = stablehlo.multiply %120, %114 {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : tensor<2x2xf32>
      %122 = stablehlo.dot_general %121, %109#2, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : (tensor<2x2xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
      %123 = stablehlo.transpose %122, dims = [1, 0] {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : (tensor<2x4xf32>) -> tensor<4x2xf32>
      %124 = stablehlo.dot_general %121, %arg0, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : (tensor<2x2xf32>, tensor<4x2xf32>) -> tensor<2x4xf32>
      %cst_53 = stablehlo.constant {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} dense<0.000000e+00> : tensor<f32>
      %125 = stablehlo.broadcast_in_dim %cst_53, dims = [] {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : (tensor<f32>) -> tensor<3x4x4xf32>
      %c_54 = stablehlo.constant {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} dense<0> : tensor<i32>
      %126:6 = stablehlo.while(%iterArg = %102, %iterArg_59 = %109#3, %iterArg_60 = %109#4, %iterArg_61 = %c_54, %iterArg_62 = %124, %iterArg_63 = %125) : tensor<3x4x4xf32>, tensor<3x2x4xf32>, tensor<3x2x4xf32>, tensor<i32>, tensor<2x4xf32>, tensor<3x4x4xf32> attributes {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64}
      cond {
        %c_64 = stablehlo.constant dense<3> : tensor<i32>
        %139 = stablehlo.compare LT, %iterArg_61, %c_64, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %139 : tensor<i1>
      } do {
        %c_64 = stablehlo.constant dense<3> : tensor<i32>
        %139 = stablehlo.subtract %c_64, %iterArg_61 : tensor<i32>
        %c_65 = stablehlo.constant dense<1> : tensor<i32>
        %140 = stablehlo.subtract %139, %c_65 : tensor<i32>
        %c_66 = stablehlo.constant dense<0> : tensor<i32>
        %c_67 = stablehlo.constant dense<0> : tensor<i32>
        %141 = stablehlo.dynamic_slice %iterArg, %140, %c_66, %c_67, sizes = [1, 4, 4] : (tensor<3x4x4xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x4x4xf32>
        %142 = stablehlo.reshape %141 : (tensor<1x4x4xf32>) -> tensor<4x4xf32>
        %c_68 = stablehlo.constant dense<0> : tensor<i32>
        %c_69 = stablehlo.constant dense<0> : tensor<i32>
        %143 = stablehlo.dynamic_slice %iterArg_59, %140, %c_68, %c_69, sizes = [1, 2, 4] : (tensor<3x2x4xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x4xf32>
        %144 = stablehlo.reshape %143 : (tensor<1x2x4xf32>) -> tensor<2x4xf32>
        %c_70 = stablehlo.constant dense<0> : tensor<i32>
        %c_71 = stablehlo.constant dense<0> : tensor<i32>
        %145 = stablehlo.dynamic_slice %iterArg_60, %140, %c_70, %c_71, sizes = [1, 2, 4] : (tensor<3x2x4xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x4xf32>
        %146 = stablehlo.reshape %145 : (tensor<1x2x4xf32>) -> tensor<2x4xf32>
        %147 = stablehlo.multiply %iterArg_62, %146 : tensor<2x4xf32>
        %148 = stablehlo.dot_general %147, %144, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
        %149 = stablehlo.transpose %148, dims = [1, 0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
        %150 = stablehlo.dot_general %147, %142, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
        %151 = stablehlo.broadcast_in_dim %149, dims = [1, 2] : (tensor<4x4xf32>) -> tensor<1x4x4xf32>
        %c_72 = stablehlo.constant dense<0> : tensor<i32>
        %c_73 = stablehlo.constant dense<0> : tensor<i32>
        %152 = stablehlo.dynamic_update_slice %iterArg_63, %151, %140, %c_72, %c_73 : (tensor<3x4x4xf32>, tensor<1x4x4xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<3x4x4xf32>
        %c_74 = stablehlo.constant dense<1> : tensor<i32>
        %153 = stablehlo.add %iterArg_61, %c_74 : tensor<i32>
        stablehlo.return %iterArg, %iterArg_59, %iterArg_60, %153, %150, %152 : tensor<3x4x4xf32>, tensor<3x2x4xf32>, tensor<3x2x4xf32>, tensor<i32>, tensor<2x4xf32>, tensor<3x4x4xf32>
      }
      %127 = stablehlo.optimization_barrier {jaxpp.kind = "bwd", jaxpp.marker = "bwd", jaxpp.stage = 1 : i64} %126#4 : tensor<2x4xf32>
      %cst_55 = stablehlo.constant {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} dense<0.000000e+00> : tensor<f32>
      %128 = stablehlo.broadcast_in_dim %cst_55, dims = [] {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<f32>) -> tensor<1x4x4xf32>
      %c_56 = stablehlo.constant {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} dense<0> : tensor<i32>
      %129:6 = stablehlo.while(%iterArg = %101, %iterArg_59 = %105#3, %iterArg_60 = %105#4, %iterArg_61 = %c_56, %iterArg_62 = %127, %iterArg_63 = %128) : tensor<1x4x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<i32>, tensor<2x4xf32>, tensor<1x4x4xf32> attributes {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64}
      cond {
        %c_64 = stablehlo.constant dense<1> : tensor<i32>
        %139 = stablehlo.compare LT, %iterArg_61, %c_64, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %139 : tensor<i1>
      } do {
        %c_64 = stablehlo.constant dense<1> : tensor<i32>
        %139 = stablehlo.subtract %c_64, %iterArg_61 : tensor<i32>
        %c_65 = stablehlo.constant dense<1> : tensor<i32>
        %140 = stablehlo.subtract %139, %c_65 : tensor<i32>
        %c_66 = stablehlo.constant dense<0> : tensor<i32>
        %c_67 = stablehlo.constant dense<0> : tensor<i32>
        %141 = stablehlo.dynamic_slice %iterArg, %140, %c_66, %c_67, sizes = [1, 4, 4] : (tensor<1x4x4xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x4x4xf32>
        %142 = stablehlo.reshape %141 : (tensor<1x4x4xf32>) -> tensor<4x4xf32>
        %c_68 = stablehlo.constant dense<0> : tensor<i32>
        %c_69 = stablehlo.constant dense<0> : tensor<i32>
        %143 = stablehlo.dynamic_slice %iterArg_59, %140, %c_68, %c_69, sizes = [1, 2, 4] : (tensor<1x2x4xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x4xf32>
        %144 = stablehlo.reshape %143 : (tensor<1x2x4xf32>) -> tensor<2x4xf32>
        %c_70 = stablehlo.constant dense<0> : tensor<i32>
        %c_71 = stablehlo.constant dense<0> : tensor<i32>
        %145 = stablehlo.dynamic_slice %iterArg_60, %140, %c_70, %c_71, sizes = [1, 2, 4] : (tensor<1x2x4xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x4xf32>
        %146 = stablehlo.reshape %145 : (tensor<1x2x4xf32>) -> tensor<2x4xf32>
        %147 = stablehlo.multiply %iterArg_62, %146 : tensor<2x4xf32>
        %148 = stablehlo.dot_general %147, %144, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
        %149 = stablehlo.transpose %148, dims = [1, 0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
        %150 = stablehlo.dot_general %147, %142, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
        %151 = stablehlo.broadcast_in_dim %149, dims = [1, 2] : (tensor<4x4xf32>) -> tensor<1x4x4xf32>
        %c_72 = stablehlo.constant dense<0> : tensor<i32>
        %c_73 = stablehlo.constant dense<0> : tensor<i32>
        %152 = stablehlo.dynamic_update_slice %iterArg_63, %151, %140, %c_72, %c_73 : (tensor<1x4x4xf32>, tensor<1x4x4xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x4x4xf32>
        %c_74 = stablehlo.constant dense<1> : tensor<i32>
        %153 = stablehlo.add %iterArg_61, %c_74 : tensor<i32>
        stablehlo.return %iterArg, %iterArg_59, %iterArg_60, %153, %150, %152 : tensor<1x4x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<i32>, tensor<2x4xf32>, tensor<1x4x4xf32>
      }
      %130 = stablehlo.concatenate %129#5, %126#5, dim = 0 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<1x4x4xf32>, tensor<3x4x4xf32>) -> tensor<4x4x4xf32>
      %131 = stablehlo.broadcast_in_dim %117, dims = [] {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<f32>) -> tensor<1xf32>
      %c_57 = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} dense<0> : tensor<i32>
      %132 = stablehlo.compare LT, %arg9, %c_57, SIGNED {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %133 = stablehlo.convert %arg9 {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<i32>
      %c_58 = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} dense<3> : tensor<i32>
      %134 = stablehlo.add %133, %c_58 {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<i32>
      %135 = stablehlo.select %132, %134, %arg9 {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<i1>, tensor<i32>
      %136 = stablehlo.dynamic_update_slice %arg10, %131, %135 {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<3xf32>, tensor<1xf32>, tensor<i32>) -> tensor<3xf32>
      %137 = stablehlo.add %arg11, %123 {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : tensor<4x2xf32>
      %138 = stablehlo.add %arg12, %130 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4x4x4xf32>
      "jaxpp.yield"(%136, %137, %138) : (tensor<3xf32>, tensor<4x2xf32>, tensor<4x4x4xf32>) -> ()
    }) {jaxpp.num_microbatches = 3 : i64} : (tensor<3xf32>, tensor<4x2xf32>, tensor<4x4x4xf32>) -> (tensor<3xf32>, tensor<4x2xf32>, tensor<4x4x4xf32>)
    %4 = chlo.square %3#1 : tensor<4x2xf32> -> tensor<4x2xf32>
    %cst_3 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %5 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<4x2xf32>
    %6 = chlo.square %5 : tensor<4x2xf32> -> tensor<4x2xf32>
    %7 = stablehlo.add %4, %6 : tensor<4x2xf32>
    %8 = chlo.square %3#2 : tensor<4x4x4xf32> -> tensor<4x4x4xf32>
    %cst_4 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %9 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<4x4x4xf32>
    %10 = chlo.square %9 : tensor<4x4x4xf32> -> tensor<4x4x4xf32>
    %11 = stablehlo.add %8, %10 : tensor<4x4x4xf32>
    %cst_5 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %12 = stablehlo.reduce(%7 init: %cst_5) applies stablehlo.add across dimensions = [0, 1] : (tensor<4x2xf32>, tensor<f32>) -> tensor<f32>
    %cst_6 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %13 = stablehlo.reduce(%11 init: %cst_6) applies stablehlo.add across dimensions = [0, 1, 2] : (tensor<4x4x4xf32>, tensor<f32>) -> tensor<f32>
    %cst_7 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %14 = stablehlo.add %cst_7, %12 : tensor<f32>
    %15 = stablehlo.add %14, %13 : tensor<f32>
    %16 = stablehlo.sqrt %15 : tensor<f32>
    %cst_8 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %17 = stablehlo.compare LT, %16, %cst_8, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %18 = stablehlo.broadcast_in_dim %16, dims = [] : (tensor<f32>) -> tensor<4x2xf32>
    %19 = stablehlo.divide %3#1, %18 : tensor<4x2xf32>
    %cst_9 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %20 = stablehlo.broadcast_in_dim %cst_9, dims = [] : (tensor<f32>) -> tensor<4x2xf32>
    %21 = stablehlo.multiply %19, %20 : tensor<4x2xf32>
    %22 = stablehlo.select %17, %3#1, %21 : tensor<i1>, tensor<4x2xf32>
    %23 = stablehlo.broadcast_in_dim %16, dims = [] : (tensor<f32>) -> tensor<4x4x4xf32>
    %24 = stablehlo.divide %3#2, %23 : tensor<4x4x4xf32>
    %cst_10 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %25 = stablehlo.broadcast_in_dim %cst_10, dims = [] : (tensor<f32>) -> tensor<4x4x4xf32>
    %26 = stablehlo.multiply %24, %25 : tensor<4x4x4xf32>
    %27 = stablehlo.select %17, %3#2, %26 : tensor<i1>, tensor<4x4x4xf32>
    %cst_11 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %28 = stablehlo.broadcast_in_dim %cst_11, dims = [] : (tensor<f32>) -> tensor<4x2xf32>
    %29 = stablehlo.multiply %28, %22 : tensor<4x2xf32>
    %cst_12 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %30 = stablehlo.broadcast_in_dim %cst_12, dims = [] : (tensor<f32>) -> tensor<4x2xf32>
    %31 = stablehlo.multiply %30, %arg3 : tensor<4x2xf32>
    %32 = stablehlo.add %29, %31 : tensor<4x2xf32>
    %cst_13 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %33 = stablehlo.broadcast_in_dim %cst_13, dims = [] : (tensor<f32>) -> tensor<4x4x4xf32>
    %34 = stablehlo.multiply %33, %27 : tensor<4x4x4xf32>
    %cst_14 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %35 = stablehlo.broadcast_in_dim %cst_14, dims = [] : (tensor<f32>) -> tensor<4x4x4xf32>
    %36 = stablehlo.multiply %35, %arg4 : tensor<4x4x4xf32>
    %37 = stablehlo.add %34, %36 : tensor<4x4x4xf32>
    %38 = stablehlo.multiply %22, %22 : tensor<4x2xf32>
    %cst_15 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %39 = stablehlo.broadcast_in_dim %cst_15, dims = [] : (tensor<f32>) -> tensor<4x2xf32>
    %40 = stablehlo.multiply %39, %38 : tensor<4x2xf32>
    %cst_16 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %41 = stablehlo.broadcast_in_dim %cst_16, dims = [] : (tensor<f32>) -> tensor<4x2xf32>
    %42 = stablehlo.multiply %41, %arg5 : tensor<4x2xf32>
    %43 = stablehlo.add %40, %42 : tensor<4x2xf32>
    %44 = stablehlo.multiply %27, %27 : tensor<4x4x4xf32>
    %cst_17 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %45 = stablehlo.broadcast_in_dim %cst_17, dims = [] : (tensor<f32>) -> tensor<4x4x4xf32>
    %46 = stablehlo.multiply %45, %44 : tensor<4x4x4xf32>
    %cst_18 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %47 = stablehlo.broadcast_in_dim %cst_18, dims = [] : (tensor<f32>) -> tensor<4x4x4xf32>
    %48 = stablehlo.multiply %47, %arg6 : tensor<4x4x4xf32>
    %49 = stablehlo.add %46, %48 : tensor<4x4x4xf32>
    %c_19 = stablehlo.constant dense<2147483647> : tensor<i32>
    %50 = stablehlo.compare LT, %arg2, %c_19, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_20 = stablehlo.constant dense<1> : tensor<i32>
    %51 = stablehlo.add %arg2, %c_20 : tensor<i32>
    %c_21 = stablehlo.constant dense<2147483647> : tensor<i32>
    %52 = stablehlo.select %50, %51, %c_21 : tensor<i1>, tensor<i32>
    %cst_22 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %53 = stablehlo.convert %52 : (tensor<i32>) -> tensor<f32>
    %54 = stablehlo.power %cst_22, %53 : tensor<f32>
    %cst_23 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %55 = stablehlo.subtract %cst_23, %54 : tensor<f32>
    %56 = stablehlo.broadcast_in_dim %55, dims = [] : (tensor<f32>) -> tensor<4x2xf32>
    %57 = stablehlo.divide %32, %56 : tensor<4x2xf32>
    %58 = stablehlo.broadcast_in_dim %55, dims = [] : (tensor<f32>) -> tensor<4x4x4xf32>
    %59 = stablehlo.divide %37, %58 : tensor<4x4x4xf32>
    %cst_24 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %60 = stablehlo.convert %52 : (tensor<i32>) -> tensor<f32>
    %61 = stablehlo.power %cst_24, %60 : tensor<f32>
    %cst_25 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %62 = stablehlo.subtract %cst_25, %61 : tensor<f32>
    %63 = stablehlo.broadcast_in_dim %62, dims = [] : (tensor<f32>) -> tensor<4x2xf32>
    %64 = stablehlo.divide %43, %63 : tensor<4x2xf32>
    %65 = stablehlo.broadcast_in_dim %62, dims = [] : (tensor<f32>) -> tensor<4x4x4xf32>
    %66 = stablehlo.divide %49, %65 : tensor<4x4x4xf32>
    %cst_26 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %67 = stablehlo.broadcast_in_dim %cst_26, dims = [] : (tensor<f32>) -> tensor<4x2xf32>
    %68 = stablehlo.add %64, %67 : tensor<4x2xf32>
    %69 = stablehlo.sqrt %68 : tensor<4x2xf32>
    %cst_27 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %70 = stablehlo.broadcast_in_dim %cst_27, dims = [] : (tensor<f32>) -> tensor<4x2xf32>
    %71 = stablehlo.add %69, %70 : tensor<4x2xf32>
    %72 = stablehlo.divide %57, %71 : tensor<4x2xf32>
    %cst_28 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %73 = stablehlo.broadcast_in_dim %cst_28, dims = [] : (tensor<f32>) -> tensor<4x4x4xf32>
    %74 = stablehlo.add %66, %73 : tensor<4x4x4xf32>
    %75 = stablehlo.sqrt %74 : tensor<4x4x4xf32>
    %cst_29 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %76 = stablehlo.broadcast_in_dim %cst_29, dims = [] : (tensor<f32>) -> tensor<4x4x4xf32>
    %77 = stablehlo.add %75, %76 : tensor<4x4x4xf32>
    %78 = stablehlo.divide %59, %77 : tensor<4x4x4xf32>
    %cst_30 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %79 = stablehlo.broadcast_in_dim %cst_30, dims = [] : (tensor<f32>) -> tensor<4x2xf32>
    %80 = stablehlo.multiply %79, %arg0 : tensor<4x2xf32>
    %81 = stablehlo.add %72, %80 : tensor<4x2xf32>
    %cst_31 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %82 = stablehlo.broadcast_in_dim %cst_31, dims = [] : (tensor<f32>) -> tensor<4x4x4xf32>
    %83 = stablehlo.multiply %82, %arg1 : tensor<4x4x4xf32>
    %84 = stablehlo.add %78, %83 : tensor<4x4x4xf32>
    %cst_32 = stablehlo.constant dense<-0.00999999977> : tensor<f32>
    %85 = stablehlo.broadcast_in_dim %cst_32, dims = [] : (tensor<f32>) -> tensor<4x2xf32>
    %86 = stablehlo.multiply %85, %81 : tensor<4x2xf32>
    %cst_33 = stablehlo.constant dense<-0.00999999977> : tensor<f32>
    %87 = stablehlo.broadcast_in_dim %cst_33, dims = [] : (tensor<f32>) -> tensor<4x4x4xf32>
    %88 = stablehlo.multiply %87, %84 : tensor<4x4x4xf32>
    %89 = stablehlo.add %arg0, %86 : tensor<4x2xf32>
    %90 = stablehlo.add %arg1, %88 : tensor<4x4x4xf32>
    return %89, %90, %52, %32, %37, %43, %49, %3#0 : tensor<4x2xf32>, tensor<4x4x4xf32>, tensor<i32>, tensor<4x2xf32>, tensor<4x4x4xf32>, tensor<4x2xf32>, tensor<4x4x4xf32>, tensor<3xf32>
  }
}
