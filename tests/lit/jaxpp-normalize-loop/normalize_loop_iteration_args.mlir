// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-normalize-loop)' | filecheck %s

// How the iteration arguments of the while are told apart. A counter starts
// at the constant 0 and is incremented by the constant 1, whichever side of
// the add the 1 is on and wherever it is defined (in the body or in @main):
// both counters here become the index, and a use of the unmarked trip
// counter %iterArg_2 in the body (the integer accumulator) reads the index
// too. Their increments and the body's now unused constant 1 are erased; the
// constant 1 of @main and the counters' initial values stay where they are.

// CHECK-LABEL: module @counters_and_state
// CHECK-NEXT:    func.func @main(%[[W:.*]]: tensor<2xf32>, %[[XS:.*]]: tensor<4x2xf32>) -> (tensor<2xf32>, tensor<i32>) {
// CHECK-NEXT:      %[[ZEROS:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<2xf32>
// CHECK-NEXT:      stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT:      %[[C0:.*]] = stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT:      stablehlo.constant dense<1> : tensor<i32>
// CHECK-NEXT:      %[[LOOP:.*]]:2 = "jaxpp.loop"(%[[ZEROS]], %[[C0]]) ({
// CHECK-NEXT:      ^bb0(%[[I:.*]]: tensor<i32>, %[[ACC:.*]]: tensor<2xf32>, %[[SUM:.*]]: tensor<i32>):
// CHECK-NEXT:        %[[Z:.*]] = stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT:        %[[SLICE:.*]] = stablehlo.dynamic_slice %[[XS]], %[[I]], %[[Z]], sizes = [1, 2] : (tensor<4x2xf32>, tensor<i32>, tensor<i32>) -> tensor<1x2xf32>
// CHECK-NEXT:        %[[X:.*]] = stablehlo.reshape %[[SLICE]] : (tensor<1x2xf32>) -> tensor<2xf32>
// CHECK-NEXT:        %[[Y:.*]] = stablehlo.multiply %[[X]], %[[W]] : tensor<2xf32>
// CHECK-NEXT:        %[[NEXT:.*]] = stablehlo.add %[[ACC]], %[[Y]] : tensor<2xf32>
// CHECK-NEXT:        %[[NEXT_SUM:.*]] = stablehlo.add %[[SUM]], %[[I]] : tensor<i32>
// CHECK-NEXT:        "jaxpp.yield"(%[[NEXT]], %[[NEXT_SUM]]) : (tensor<2xf32>, tensor<i32>) -> ()
// CHECK-NEXT:      }) {jaxpp.num_microbatches = 4 : i64} : (tensor<2xf32>, tensor<i32>) -> (tensor<2xf32>, tensor<i32>)
// CHECK-NEXT:      return %[[LOOP]]#0, %[[LOOP]]#1 : tensor<2xf32>, tensor<i32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @counters_and_state {
  func.func @main(%arg0: tensor<2xf32>, %arg1: tensor<4x2xf32>) -> (tensor<2xf32>, tensor<i32>) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<2xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %c_1 = stablehlo.constant dense<1> : tensor<i32>
    %0:6 = stablehlo.while(%iterArg = %arg1, %iterArg_1 = %arg0, %iterArg_2 = %c, %iterArg_3 = %c_0, %iterArg_4 = %cst, %iterArg_5 = %c_0) : tensor<4x2xf32>, tensor<2xf32>, tensor<i32>, tensor<i32>, tensor<2xf32>, tensor<i32>
    cond {
      %c_6 = stablehlo.constant dense<4> : tensor<i32>
      %1 = stablehlo.compare LT, %iterArg_2, %c_6, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %1 = stablehlo.add %iterArg_3, %c_1 : tensor<i32>
      %2 = stablehlo.custom_call @jaxpp.loop_marker(%iterArg_3) {mhlo.frontend_attributes = {jaxpp.num_microbatches = "4", jaxpp.reductions = "add,add", jaxpp.schedule = ""}} : (tensor<i32>) -> tensor<i32>
      %c_6 = stablehlo.constant dense<0> : tensor<i32>
      %3 = stablehlo.dynamic_slice %iterArg, %2, %c_6, sizes = [1, 2] : (tensor<4x2xf32>, tensor<i32>, tensor<i32>) -> tensor<1x2xf32>
      %4 = stablehlo.reshape %3 : (tensor<1x2xf32>) -> tensor<2xf32>
      %5 = stablehlo.multiply %4, %iterArg_1 : tensor<2xf32>
      %6 = stablehlo.add %iterArg_4, %5 : tensor<2xf32>
      %7 = stablehlo.add %iterArg_5, %iterArg_2 : tensor<i32>
      %c_7 = stablehlo.constant dense<1> : tensor<i32>
      %8 = stablehlo.add %c_7, %iterArg_2 : tensor<i32>
      stablehlo.return %iterArg, %iterArg_1, %8, %1, %6, %7 : tensor<4x2xf32>, tensor<2xf32>, tensor<i32>, tensor<i32>, tensor<2xf32>, tensor<i32>
    }
    return %0#4, %0#5 : tensor<2xf32>, tensor<i32>
  }
}

// -----

// Iteration arguments that look like counters but are not 0, 1, 2, ... are
// state: %iterArg_1 starts at 1, %iterArg_2 grows by 2 and %iterArg_3 starts
// at an argument of @main. They stay operands, block arguments and results
// of the loop, in their order, and so do their increments.

// CHECK-LABEL: module @counter_like_state
// CHECK-NEXT:    func.func @main(%[[N:.*]]: tensor<i32>) -> (tensor<i32>, tensor<i32>, tensor<i32>) {
// CHECK-NEXT:      %[[C0:.*]] = stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT:      %[[C1:.*]] = stablehlo.constant dense<1> : tensor<i32>
// CHECK-NEXT:      %[[LOOP:.*]]:3 = "jaxpp.loop"(%[[C1]], %[[C0]], %[[N]]) ({
// CHECK-NEXT:      ^bb0(%[[I:.*]]: tensor<i32>, %[[A:.*]]: tensor<i32>, %[[B:.*]]: tensor<i32>, %[[C:.*]]: tensor<i32>):
// CHECK-NEXT:        %[[ONE:.*]] = stablehlo.constant dense<1> : tensor<i32>
// CHECK-NEXT:        %[[TWO:.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK-NEXT:        %[[A1:.*]] = stablehlo.add %[[A]], %[[ONE]] : tensor<i32>
// CHECK-NEXT:        %[[B1:.*]] = stablehlo.add %[[B]], %[[TWO]] : tensor<i32>
// CHECK-NEXT:        %[[C2:.*]] = stablehlo.add %[[C]], %[[ONE]] : tensor<i32>
// CHECK-NEXT:        "jaxpp.yield"(%[[A1]], %[[B1]], %[[C2]]) : (tensor<i32>, tensor<i32>, tensor<i32>) -> ()
// CHECK-NEXT:      }) {jaxpp.num_microbatches = 2 : i64} : (tensor<i32>, tensor<i32>, tensor<i32>) -> (tensor<i32>, tensor<i32>, tensor<i32>)
// CHECK-NEXT:      return %[[LOOP]]#0, %[[LOOP]]#1, %[[LOOP]]#2 : tensor<i32>, tensor<i32>, tensor<i32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @counter_like_state {
  func.func @main(%arg0: tensor<i32>) -> (tensor<i32>, tensor<i32>, tensor<i32>) {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<1> : tensor<i32>
    %0:4 = stablehlo.while(%iterArg = %c, %iterArg_1 = %c_0, %iterArg_2 = %c, %iterArg_3 = %arg0) : tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>
    cond {
      %c_4 = stablehlo.constant dense<2> : tensor<i32>
      %1 = stablehlo.compare LT, %iterArg, %c_4, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %1 = stablehlo.custom_call @jaxpp.loop_marker(%iterArg) {mhlo.frontend_attributes = {jaxpp.num_microbatches = "2", jaxpp.reductions = "add,add,add", jaxpp.schedule = ""}} : (tensor<i32>) -> tensor<i32>
      %c_4 = stablehlo.constant dense<1> : tensor<i32>
      %c_5 = stablehlo.constant dense<2> : tensor<i32>
      %2 = stablehlo.add %iterArg, %c_4 : tensor<i32>
      %3 = stablehlo.add %iterArg_1, %c_4 : tensor<i32>
      %4 = stablehlo.add %iterArg_2, %c_5 : tensor<i32>
      %5 = stablehlo.add %iterArg_3, %c_4 : tensor<i32>
      stablehlo.return %2, %3, %4, %5 : tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>
    }
    return %0#1, %0#2, %0#3 : tensor<i32>, tensor<i32>, tensor<i32>
  }
}
