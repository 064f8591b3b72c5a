// RUN: jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-normalize-loop)' | filecheck %s

// With jax_enable_x64, treduce's counters are tensor<i64> (lax.fori_loop
// follows the default integer type). The loop's index stays tensor<i32>, the
// type the runtime feeds (plan_builder passes the microbatch index as int32),
// so the body must convert it wherever it replaces a counter.

// CHECK-LABEL: module @i64_counter
// CHECK:         "jaxpp.loop"(%{{.*}}) ({
// CHECK-NEXT:    ^bb0(%[[I:.*]]: tensor<i32>, %[[ACC:.*]]: tensor<2xf32>):
// CHECK:           stablehlo.dynamic_slice {{.*}} : (tensor<4x2xf32>, tensor<i64>, tensor<i64>) -> tensor<1x2xf32>
// CHECK:           "jaxpp.yield"
// CHECK-NEXT:    }) {jaxpp.num_microbatches = 4 : i64} : (tensor<2xf32>) -> tensor<2xf32>
module @i64_counter {
  func.func @main(%arg0: tensor<2xf32>, %arg1: tensor<4x2xf32>) -> tensor<2xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<2xf32>
    %c = stablehlo.constant dense<0> : tensor<i64>
    %0:3 = stablehlo.while(%iterArg = %arg1, %iterArg_0 = %c, %iterArg_1 = %cst) : tensor<4x2xf32>, tensor<i64>, tensor<2xf32>
    cond {
      %c_2 = stablehlo.constant dense<4> : tensor<i64>
      %1 = stablehlo.compare LT, %iterArg_0, %c_2, SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %1 = stablehlo.custom_call @jaxpp.loop_marker(%iterArg_0) {mhlo.frontend_attributes = {jaxpp.num_microbatches = "4", jaxpp.reductions = "add", jaxpp.schedule = ""}} : (tensor<i64>) -> tensor<i64>
      %c_2 = stablehlo.constant dense<0> : tensor<i64>
      %2 = stablehlo.dynamic_slice %iterArg, %1, %c_2, sizes = [1, 2] : (tensor<4x2xf32>, tensor<i64>, tensor<i64>) -> tensor<1x2xf32>
      %3 = stablehlo.reshape %2 : (tensor<1x2xf32>) -> tensor<2xf32>
      %4 = stablehlo.add %iterArg_1, %3 : tensor<2xf32>
      %c_3 = stablehlo.constant dense<1> : tensor<i64>
      %5 = stablehlo.add %iterArg_0, %c_3 : tensor<i64>
      stablehlo.return %iterArg, %5, %4 : tensor<4x2xf32>, tensor<i64>, tensor<2xf32>
    }
    return %0#2 : tensor<2xf32>
  }
}
