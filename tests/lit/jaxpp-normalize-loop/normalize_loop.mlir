// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-normalize-loop)' | filecheck %s

// The shape treduce lowers to (after jaxpp-inline-calls): a while over the
// stacked microbatches %iterArg (invariant), the weight %iterArg_1
// (invariant), the while's trip counter %iterArg_2 and the marked microbatch
// counter %iterArg_3 (both 0, 1, 2, ...) and an accumulator %iterArg_4
// (state). Only the state is kept: the body reads the invariants from @main,
// both counters become the index (block argument 0), the marker and the
// counter increments are erased, and the results of invariants are their
// initial values.

// CHECK-LABEL: module @treduce_loop
// CHECK-NEXT:    func.func @main(%[[W:.*]]: tensor<4x4xf32>, %[[XS:.*]]: tensor<2x2x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
// CHECK-NEXT:      %[[ZEROS:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<4x4xf32>
// CHECK-NEXT:      stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT:      stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT:      %[[LOOP:.*]] = "jaxpp.loop"(%[[ZEROS]]) ({
// CHECK-NEXT:      ^bb0(%[[I:.*]]: tensor<i32>, %[[ACC:.*]]: tensor<4x4xf32>):
// CHECK-NEXT:        %[[C0:.*]] = stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT:        %[[SLICE:.*]] = stablehlo.dynamic_slice %[[XS]], %[[I]], %[[C0]], %[[C0]], sizes = [1, 2, 4]
// CHECK-NEXT:        %[[X:.*]] = stablehlo.reshape %[[SLICE]] : (tensor<1x2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:        %[[H:.*]] = stablehlo.dot_general %[[X]], %[[W]], contracting_dims = [1] x [0]
// CHECK-NEXT:        %[[M:.*]] = stablehlo.custom_call @jaxpp.enter_stage(%[[H]])
// CHECK-NEXT:        %[[G:.*]] = stablehlo.dot_general %[[X]], %[[M]], contracting_dims = [0] x [0]
// CHECK-NEXT:        %[[NEXT:.*]] = stablehlo.add %[[ACC]], %[[G]] : tensor<4x4xf32>
// CHECK-NEXT:        "jaxpp.yield"(%[[NEXT]]) : (tensor<4x4xf32>) -> ()
// CHECK-NEXT:      }) {jaxpp.num_microbatches = 2 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT:      return %[[LOOP]], %[[W]] : tensor<4x4xf32>, tensor<4x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @treduce_loop {
  func.func @main(%arg0: tensor<4x4xf32>, %arg1: tensor<2x2x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<4x4xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %0:5 = stablehlo.while(%iterArg = %arg1, %iterArg_1 = %arg0, %iterArg_2 = %c, %iterArg_3 = %c_0, %iterArg_4 = %cst) : tensor<2x2x4xf32>, tensor<4x4xf32>, tensor<i32>, tensor<i32>, tensor<4x4xf32>
    cond {
      %c_5 = stablehlo.constant dense<2> : tensor<i32>
      %1 = stablehlo.compare LT, %iterArg_2, %c_5, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %c_5 = stablehlo.constant dense<1> : tensor<i32>
      %1 = stablehlo.add %iterArg_3, %c_5 : tensor<i32>
      %2 = stablehlo.custom_call @jaxpp.loop_marker(%iterArg_3) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.num_microbatches = "2", jaxpp.reductions = "add", jaxpp.schedule = ""}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<i32>) -> tensor<i32>
      %c_6 = stablehlo.constant dense<0> : tensor<i32>
      %3 = stablehlo.dynamic_slice %iterArg, %2, %c_6, %c_6, sizes = [1, 2, 4] : (tensor<2x2x4xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x4xf32>
      %4 = stablehlo.reshape %3 : (tensor<1x2x4xf32>) -> tensor<2x4xf32>
      %5 = stablehlo.dot_general %4, %iterArg_1, contracting_dims = [1] x [0] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
      %6 = stablehlo.custom_call @jaxpp.enter_stage(%5) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
      %7 = stablehlo.dot_general %4, %6, contracting_dims = [0] x [0] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
      %8 = stablehlo.add %iterArg_4, %7 : tensor<4x4xf32>
      %c_7 = stablehlo.constant dense<1> : tensor<i32>
      %9 = stablehlo.add %iterArg_2, %c_7 : tensor<i32>
      stablehlo.return %iterArg, %iterArg_1, %9, %1, %8 : tensor<2x2x4xf32>, tensor<4x4xf32>, tensor<i32>, tensor<i32>, tensor<4x4xf32>
    }
    return %0#4, %0#1 : tensor<4x4xf32>, tensor<4x4xf32>
  }
}

// -----

// Without a loop marker, a while is an ordinary op and the module is unchanged.

// CHECK-LABEL: module @no_loop_marker
// CHECK-NEXT:    func.func @main(%[[X:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[C0:.*]] = stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT:      %[[LOOP:.*]]:2 = stablehlo.while(%[[I:.*]] = %[[C0]], %[[Y:.*]] = %[[X]]) : tensor<i32>, tensor<2x4xf32>
// CHECK-NEXT:      cond {
// CHECK:           } do {
// CHECK-NEXT:        %[[ONE:.*]] = stablehlo.constant dense<1> : tensor<i32>
// CHECK-NEXT:        %[[NEXT:.*]] = stablehlo.add %[[I]], %[[ONE]] : tensor<i32>
// CHECK-NEXT:        %[[TANH:.*]] = stablehlo.tanh %[[Y]] : tensor<2x4xf32>
// CHECK-NEXT:        stablehlo.return %[[NEXT]], %[[TANH]] : tensor<i32>, tensor<2x4xf32>
// CHECK-NEXT:      }
// CHECK-NEXT:      return %[[LOOP]]#1 : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @no_loop_marker {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0:2 = stablehlo.while(%iterArg = %c, %iterArg_0 = %arg0) : tensor<i32>, tensor<2x4xf32>
    cond {
      %c_1 = stablehlo.constant dense<3> : tensor<i32>
      %1 = stablehlo.compare LT, %iterArg, %c_1, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %c_1 = stablehlo.constant dense<1> : tensor<i32>
      %1 = stablehlo.add %iterArg, %c_1 : tensor<i32>
      %2 = stablehlo.tanh %iterArg_0 : tensor<2x4xf32>
      stablehlo.return %1, %2 : tensor<i32>, tensor<2x4xf32>
    }
    return %0#1 : tensor<2x4xf32>
  }
}
