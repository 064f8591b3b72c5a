// RUN: jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-normalize-loop)' | filecheck %s

// JAX's explicit sharding mode puts an sdy.sharding_constraint on every result,
// the scalar counters' included: the marked counter reaches the marker and its
// increment through constraints (as after Shardy's propagation). The counter is
// still recognised; the marker, the increments, their constants and their
// constraints are erased, and the constraints on the accumulator stay.

// CHECK-LABEL: module @explicit_sharding_counters
// CHECK-NEXT:    sdy.mesh @mesh = <["data"=2]>
// CHECK-NEXT:    func.func @main(%[[XS:.*]]: tensor<2x4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:      %[[ZEROS:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK-NEXT:      stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT:      %[[LOOP:.*]] = "jaxpp.loop"(%[[ZEROS]]) ({
// CHECK-NEXT:      ^bb0(%[[I:.*]]: tensor<i32>, %[[ACC:.*]]: tensor<4xf32>):
// CHECK-NEXT:        %[[C0:.*]] = stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT:        %[[SLICE:.*]] = stablehlo.dynamic_slice %[[XS]], %[[I]], %[[C0]], sizes = [1, 4]
// CHECK-NEXT:        %[[X:.*]] = stablehlo.reshape %[[SLICE]] : (tensor<1x4xf32>) -> tensor<4xf32>
// CHECK-NEXT:        %[[SUM:.*]] = stablehlo.add %[[ACC]], %[[X]] : tensor<4xf32>
// CHECK-NEXT:        %[[TYPED:.*]] = sdy.sharding_constraint %[[SUM]] <@mesh, [{"data"}]> : tensor<4xf32>
// CHECK-NEXT:        "jaxpp.yield"(%[[TYPED]]) : (tensor<4xf32>) -> ()
// CHECK-NEXT:      }) {jaxpp.num_microbatches = 2 : i64} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:      return %[[LOOP]] : tensor<4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @explicit_sharding_counters {
  sdy.mesh @mesh = <["data"=2]>
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<4xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<4xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0:4 = stablehlo.while(%iterArg = %arg0, %iterArg_1 = %c, %iterArg_2 = %c, %iterArg_3 = %cst) : tensor<2x4xf32>, tensor<i32>, tensor<i32>, tensor<4xf32>
    cond {
      %c_4 = stablehlo.constant dense<2> : tensor<i32>
      %1 = sdy.sharding_constraint %iterArg_1 <@mesh, []> : tensor<i32>
      %2 = stablehlo.compare LT, %1, %c_4, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %2 : tensor<i1>
    } do {
      %1 = sdy.sharding_constraint %iterArg_2 <@mesh, []> : tensor<i32>
      %c_4 = stablehlo.constant dense<1> : tensor<i32>
      %2 = sdy.sharding_constraint %c_4 <@mesh, []> : tensor<i32>
      %3 = stablehlo.add %1, %2 : tensor<i32>
      %4 = sdy.sharding_constraint %3 <@mesh, []> : tensor<i32>
      %5 = stablehlo.optimization_barrier {jaxpp.marker = "loop", jaxpp.num_microbatches = 2 : i64, jaxpp.reductions = "add", jaxpp.schedule = ""} %1 : tensor<i32>
      %c_5 = stablehlo.constant dense<0> : tensor<i32>
      %6 = stablehlo.dynamic_slice %iterArg, %5, %c_5, sizes = [1, 4] : (tensor<2x4xf32>, tensor<i32>, tensor<i32>) -> tensor<1x4xf32>
      %7 = stablehlo.reshape %6 : (tensor<1x4xf32>) -> tensor<4xf32>
      %8 = stablehlo.add %iterArg_3, %7 : tensor<4xf32>
      %9 = sdy.sharding_constraint %8 <@mesh, [{"data"}]> : tensor<4xf32>
      %10 = sdy.sharding_constraint %iterArg_1 <@mesh, []> : tensor<i32>
      %11 = stablehlo.add %10, %2 : tensor<i32>
      %12 = sdy.sharding_constraint %11 <@mesh, []> : tensor<i32>
      stablehlo.return %iterArg, %12, %4, %9 : tensor<2x4xf32>, tensor<i32>, tensor<i32>, tensor<4xf32>
    }
    return %0#3 : tensor<4xf32>
  }
}
