// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-inline-calls)' | filecheck %s

// A marker two calls deep ends up in @main; both private callees are erased
// (@inner once @outer, its only caller, is gone).

// CHECK-LABEL: module @nested_calls attributes {jaxpp.calls_inlined} {
// CHECK-NEXT:    func.func @main(%[[ARG:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[TANH:.*]] = stablehlo.tanh %[[ARG]] : tensor<2x4xf32>
// CHECK-NEXT:      %[[MARK:.*]] = stablehlo.custom_call @jaxpp.enter_stage(%[[TANH]])
// CHECK-SAME:        mhlo.frontend_attributes = {jaxpp.direction = "fwd"}
// CHECK-NEXT:      %[[SIN:.*]] = stablehlo.sine %[[MARK]] : tensor<2x4xf32>
// CHECK-NEXT:      return %[[SIN]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @nested_calls {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = call @outer(%arg0) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %1 = stablehlo.sine %0 : tensor<2x4xf32>
    return %1 : tensor<2x4xf32>
  }
  func.func private @outer(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    %1 = call @inner(%0) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %1 : tensor<2x4xf32>
  }
  func.func private @inner(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.custom_call @jaxpp.enter_stage(%arg0) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

// Each call gets its own copy of the callee's body, with its own operands;
// the callee is erased once no call is left.

// CHECK-LABEL: module @callee_called_twice
// CHECK-NEXT:    func.func @main(%[[ARG0:.*]]: tensor<2x4xf32>, %[[W:.*]]: tensor<4x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[DOT0:.*]] = stablehlo.dot_general %[[ARG0]], %[[W]], contracting_dims = [1] x [0]
// CHECK-NEXT:      %[[TANH0:.*]] = stablehlo.tanh %[[DOT0]] : tensor<2x4xf32>
// CHECK-NEXT:      %[[MARK:.*]] = stablehlo.custom_call @jaxpp.enter_stage(%[[TANH0]])
// CHECK-NEXT:      %[[DOT1:.*]] = stablehlo.dot_general %[[MARK]], %[[W]], contracting_dims = [1] x [0]
// CHECK-NEXT:      %[[TANH1:.*]] = stablehlo.tanh %[[DOT1]] : tensor<2x4xf32>
// CHECK-NEXT:      return %[[TANH1]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @callee_called_twice {
  func.func @main(%arg0: tensor<2x4xf32>, %arg1: tensor<4x4xf32>) -> tensor<2x4xf32> {
    %0 = call @layer(%arg0, %arg1) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %1 = stablehlo.custom_call @jaxpp.enter_stage(%0) {api_version = 4 : i32, backend_config = {}, mhlo.frontend_attributes = {jaxpp.direction = "fwd"}, output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %2 = call @layer(%1, %arg1) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    return %2 : tensor<2x4xf32>
  }
  func.func private @layer(%arg0: tensor<2x4xf32>, %arg1: tensor<4x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %1 = stablehlo.tanh %0 : tensor<2x4xf32>
    return %1 : tensor<2x4xf32>
  }
}

// -----

// A callee that another function still calls is inlined into @main but kept;
// a private function @main never called is left alone.

// CHECK-LABEL: module @callee_still_called_elsewhere
// CHECK-NEXT:    func.func @main(%[[ARG:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[TANH:.*]] = stablehlo.tanh %[[ARG]] : tensor<2x4xf32>
// CHECK-NEXT:      return %[[TANH]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func @other(%[[OARG:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[CALL:.*]] = call @helper(%[[OARG]])
// CHECK-NEXT:      return %[[CALL]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @helper(%[[HARG:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[HTANH:.*]] = stablehlo.tanh %[[HARG]] : tensor<2x4xf32>
// CHECK-NEXT:      return %[[HTANH]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @unused(%[[UARG:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      return %[[UARG]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @callee_still_called_elsewhere {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = call @helper(%arg0) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func @other(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = call @helper(%arg0) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @helper(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @unused(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    return %arg0 : tensor<2x4xf32>
  }
}

// -----

// Calls in nested regions (a loop body) are inlined in place.

// CHECK-LABEL: module @call_in_loop_body
// CHECK-NEXT:    func.func @main(%[[ARG:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[ZERO:.*]] = stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT:      %[[LOOP:.*]]:2 = stablehlo.while(%[[I:.*]] = %[[ZERO]], %[[X:.*]] = %[[ARG]]) : tensor<i32>, tensor<2x4xf32>
// CHECK-NEXT:      cond {
// CHECK-NEXT:        %[[THREE:.*]] = stablehlo.constant dense<3> : tensor<i32>
// CHECK-NEXT:        %[[CMP:.*]] = stablehlo.compare LT, %[[I]], %[[THREE]]
// CHECK-NEXT:        stablehlo.return %[[CMP]] : tensor<i1>
// CHECK-NEXT:      } do {
// CHECK-NEXT:        %[[ONE:.*]] = stablehlo.constant dense<1> : tensor<i32>
// CHECK-NEXT:        %[[NEXT:.*]] = stablehlo.add %[[I]], %[[ONE]] : tensor<i32>
// CHECK-NEXT:        %[[TANH:.*]] = stablehlo.tanh %[[X]] : tensor<2x4xf32>
// CHECK-NEXT:        stablehlo.return %[[NEXT]], %[[TANH]] : tensor<i32>, tensor<2x4xf32>
// CHECK-NEXT:      }
// CHECK-NEXT:      return %[[LOOP]]#1 : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @call_in_loop_body {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0:2 = stablehlo.while(%iterArg = %c, %iterArg_0 = %arg0) : tensor<i32>, tensor<2x4xf32>
     cond {
      %c_1 = stablehlo.constant dense<3> : tensor<i32>
      %1 = stablehlo.compare  LT, %iterArg, %c_1 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %c_1 = stablehlo.constant dense<1> : tensor<i32>
      %1 = stablehlo.add %iterArg, %c_1 : tensor<i32>
      %2 = func.call @body(%iterArg_0) : (tensor<2x4xf32>) -> tensor<2x4xf32>
      stablehlo.return %1, %2 : tensor<i32>, tensor<2x4xf32>
    }
    return %0#1 : tensor<2x4xf32>
  }
  func.func private @body(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

// A module without calls is unchanged but for the mark that the pass ran.

// CHECK-LABEL: module @no_calls attributes {jaxpp.calls_inlined} {
// CHECK-NEXT:    func.func @main(%[[ARG:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[TANH:.*]] = stablehlo.tanh %[[ARG]] : tensor<2x4xf32>
// CHECK-NEXT:      return %[[TANH]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module @no_calls {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}
