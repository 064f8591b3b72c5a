// RUN: jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-outline-stages)' --split-input-file | filecheck %s

// A loop's iteration argument that its body returns unchanged (a scan's weight, %arg1)
// leaves the outlined loop with its sdy.sharding entry: the body and the readers of its
// result read the start value. The counter and the activation stay, with theirs. The
// single-result op reading a result of the loop (%2, an `x - 0` XLA folds into the loop)
// loses its sharding; the op after it (%3) keeps its own (passes/xla_import.py).

// CHECK-LABEL: module @invariant_carry
// CHECK:         func.func private @stage0_fwd(%[[W:arg[0-9]+]]: tensor<4x4xf32> {{.*}}, %[[X:arg[0-9]+]]: tensor<2x4xf32> {{.*}})
// CHECK:           %[[LOOP:[0-9]+]]:2 = stablehlo.while(%[[I:iterArg[_0-9]*]] = %{{.*}}, %[[H:iterArg[_0-9]*]] = %[[X]]) : tensor<i32>, tensor<2x4xf32>
// CHECK-SAME:        attributes {sdy.sharding = #sdy.sharding_per_value<[<@mesh, []>, <@mesh, [{}, {"model"}]>]>}
// CHECK:             stablehlo.dot_general %[[H]], %[[W]]
// CHECK:             stablehlo.return %{{.*}}, %{{.*}} : tensor<i32>, tensor<2x4xf32>
// CHECK:           %[[SUB:[0-9]+]] = stablehlo.subtract %[[LOOP]]#1, %{{[a-z0-9_]+}} : tensor<2x4xf32>
// CHECK:           stablehlo.tanh %[[SUB]] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"model"}]>]>}
// CHECK:           stablehlo.add %{{.*}}, %[[W]] {sdy.sharding
module @invariant_carry attributes {jaxpp.num_stages = 1 : i64} {
  sdy.mesh @mesh = <["model"=2]>
  func.func @main(%arg0: tensor<2x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}, %arg1: tensor<4x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}) -> (tensor<2x4xf32>, tensor<4x4xf32>) {
    %c0 = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} dense<0> : tensor<i32>
    %zero = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} dense<0.0> : tensor<2x4xf32>
    %0:3 = stablehlo.while(%i = %c0, %w = %arg1, %h = %arg0) : tensor<i32>, tensor<4x4xf32>, tensor<2x4xf32>
      attributes {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64, sdy.sharding = #sdy.sharding_per_value<[<@mesh, []>, <@mesh, [{}, {"model"}]>, <@mesh, [{}, {"model"}]>]>}
      cond {
      %n = stablehlo.constant dense<2> : tensor<i32>
      %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %next = stablehlo.add %i, %one : tensor<i32>
      %y = stablehlo.dot_general %h, %w, contracting_dims = [1] x [0] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
      stablehlo.return %next, %w, %y : tensor<i32>, tensor<4x4xf32>, tensor<2x4xf32>
    }
    %2 = stablehlo.subtract %0#2, %zero {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64, sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"model"}]>]>} : tensor<2x4xf32>
    %3 = stablehlo.tanh %2 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64, sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"model"}]>]>} : tensor<2x4xf32>
    %4 = stablehlo.add %0#1, %arg1 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64, sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"model"}]>]>} : tensor<4x4xf32>
    return %3, %4 : tensor<2x4xf32>, tensor<4x4xf32>
  }
}

// -----

// A loop whose every carry changes keeps them all, and its sharding.

// CHECK-LABEL: module @no_invariant_carry
// CHECK:         stablehlo.while(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) : tensor<i32>, tensor<2x4xf32>
// CHECK-SAME:      attributes {sdy.sharding = #sdy.sharding_per_value<[<@mesh, []>, <@mesh, [{}, {"model"}]>]>}
module @no_invariant_carry attributes {jaxpp.num_stages = 1 : i64} {
  sdy.mesh @mesh = <["model"=2]>
  func.func @main(%arg0: tensor<2x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}) -> tensor<2x4xf32> {
    %c0 = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} dense<0> : tensor<i32>
    %0:2 = stablehlo.while(%i = %c0, %h = %arg0) : tensor<i32>, tensor<2x4xf32>
      attributes {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64, sdy.sharding = #sdy.sharding_per_value<[<@mesh, []>, <@mesh, [{}, {"model"}]>]>}
      cond {
      %n = stablehlo.constant dense<2> : tensor<i32>
      %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %next = stablehlo.add %i, %one : tensor<i32>
      %y = stablehlo.tanh %h : tensor<2x4xf32>
      stablehlo.return %next, %y : tensor<i32>, tensor<2x4xf32>
    }
    return %0#1 : tensor<2x4xf32>
  }
}
