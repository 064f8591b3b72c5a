// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-normalize-loop)'

// Where the loop marker may sit and what it may mark (more cases in
// normalize_loop_errors.mlir).

// treduce inside a loop of the user (a while in the body of another while).
module @marker_in_nested_while {
  func.func @main(%arg0: tensor<f32>) -> tensor<f32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0:2 = stablehlo.while(%iterArg = %c, %iterArg_0 = %arg0) : tensor<i32>, tensor<f32>
    cond {
      %c_1 = stablehlo.constant dense<2> : tensor<i32>
      %1 = stablehlo.compare LT, %iterArg, %c_1, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      // The error is blamed on the marker's while: its location reaches the user's treduce call.
      // expected-error @+1 {{the microbatch loop marker must sit directly in the body of a top-level stablehlo.while (treduce inside other control flow is not supported)}}
      %1:2 = stablehlo.while(%iterArg_2 = %c, %iterArg_3 = %iterArg_0) : tensor<i32>, tensor<f32>
      cond {
        %c_1 = stablehlo.constant dense<2> : tensor<i32>
        %2 = stablehlo.compare LT, %iterArg_2, %c_1, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %2 : tensor<i1>
      } do {
        %2 = stablehlo.custom_call @jaxpp.loop_marker(%iterArg_2) {mhlo.frontend_attributes = {jaxpp.num_microbatches = "2"}} : (tensor<i32>) -> tensor<i32>
        %c_1 = stablehlo.constant dense<1> : tensor<i32>
        %3 = stablehlo.add %iterArg_2, %c_1 : tensor<i32>
        %4 = stablehlo.sine %iterArg_3 : tensor<f32>
        stablehlo.return %3, %4 : tensor<i32>, tensor<f32>
      }
      %c_1 = stablehlo.constant dense<1> : tensor<i32>
      %2 = stablehlo.add %iterArg, %c_1 : tensor<i32>
      stablehlo.return %2, %1#1 : tensor<i32>, tensor<f32>
    }
    return %0#1 : tensor<f32>
  }
}

// -----

// The marked iteration argument is incremented by 1 but starts at 1.
module @marker_on_counter_from_one {
  func.func @main(%arg0: tensor<f32>) -> tensor<f32> {
    %c = stablehlo.constant dense<1> : tensor<i32>
    %0:2 = stablehlo.while(%iterArg = %c, %iterArg_0 = %arg0) : tensor<i32>, tensor<f32>
    cond {
      %c_1 = stablehlo.constant dense<3> : tensor<i32>
      %1 = stablehlo.compare LT, %iterArg, %c_1, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      // expected-error @+1 {{the loop marker must mark the loop's microbatch counter (0, 1, 2, ...)}}
      %1 = stablehlo.custom_call @jaxpp.loop_marker(%iterArg) {mhlo.frontend_attributes = {jaxpp.num_microbatches = "2"}} : (tensor<i32>) -> tensor<i32>
      %c_1 = stablehlo.constant dense<1> : tensor<i32>
      %2 = stablehlo.add %iterArg, %c_1 : tensor<i32>
      %3 = stablehlo.sine %iterArg_0 : tensor<f32>
      stablehlo.return %2, %3 : tensor<i32>, tensor<f32>
    }
    return %0#1 : tensor<f32>
  }
}

// -----

// The marker is on the incremented counter, a value of the body, not on an
// iteration argument.
module @marker_on_body_value {
  func.func @main(%arg0: tensor<f32>) -> tensor<f32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0:2 = stablehlo.while(%iterArg = %c, %iterArg_0 = %arg0) : tensor<i32>, tensor<f32>
    cond {
      %c_1 = stablehlo.constant dense<2> : tensor<i32>
      %1 = stablehlo.compare LT, %iterArg, %c_1, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %c_1 = stablehlo.constant dense<1> : tensor<i32>
      %1 = stablehlo.add %iterArg, %c_1 : tensor<i32>
      // expected-error @+1 {{the loop marker must mark the loop's microbatch counter (0, 1, 2, ...)}}
      %2 = stablehlo.custom_call @jaxpp.loop_marker(%1) {mhlo.frontend_attributes = {jaxpp.num_microbatches = "2"}} : (tensor<i32>) -> tensor<i32>
      %3 = stablehlo.sine %iterArg_0 : tensor<f32>
      stablehlo.return %1, %3 : tensor<i32>, tensor<f32>
    }
    return %0#1 : tensor<f32>
  }
}

// -----

// The marked iteration argument is returned unchanged: a loop invariant.
module @marker_on_invariant {
  func.func @main(%arg0: tensor<f32>) -> tensor<f32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0:3 = stablehlo.while(%iterArg = %c, %iterArg_0 = %c, %iterArg_1 = %arg0) : tensor<i32>, tensor<i32>, tensor<f32>
    cond {
      %c_2 = stablehlo.constant dense<2> : tensor<i32>
      %1 = stablehlo.compare LT, %iterArg, %c_2, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      // expected-error @+1 {{the loop marker must mark the loop's microbatch counter (0, 1, 2, ...)}}
      %1 = stablehlo.custom_call @jaxpp.loop_marker(%iterArg_0) {mhlo.frontend_attributes = {jaxpp.num_microbatches = "2"}} : (tensor<i32>) -> tensor<i32>
      %c_2 = stablehlo.constant dense<1> : tensor<i32>
      %2 = stablehlo.add %iterArg, %c_2 : tensor<i32>
      %3 = stablehlo.sine %iterArg_1 : tensor<f32>
      stablehlo.return %2, %iterArg_0, %3 : tensor<i32>, tensor<i32>, tensor<f32>
    }
    return %0#2 : tensor<f32>
  }
}

// -----

// Through the sharding constraints explicit sharding adds, the marked iteration
// argument is incremented by 2: not a microbatch counter.
module @constrained_counter_incremented_by_two {
  sdy.mesh @mesh = <["data"=2]>
  func.func @main(%arg0: tensor<f32>) -> tensor<f32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0:2 = stablehlo.while(%iterArg = %c, %iterArg_0 = %arg0) : tensor<i32>, tensor<f32>
    cond {
      %c_1 = stablehlo.constant dense<3> : tensor<i32>
      %1 = stablehlo.compare LT, %iterArg, %c_1, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %1 = sdy.sharding_constraint %iterArg <@mesh, []> : tensor<i32>
      // expected-error @+1 {{the loop marker must mark the loop's microbatch counter (0, 1, 2, ...)}}
      %2 = stablehlo.optimization_barrier {jaxpp.marker = "loop", jaxpp.num_microbatches = 2 : i64, jaxpp.reductions = "add", jaxpp.schedule = ""} %1 : tensor<i32>
      %c_1 = stablehlo.constant dense<2> : tensor<i32>
      %3 = sdy.sharding_constraint %c_1 <@mesh, []> : tensor<i32>
      %4 = stablehlo.add %1, %3 : tensor<i32>
      %5 = sdy.sharding_constraint %4 <@mesh, []> : tensor<i32>
      %6 = stablehlo.sine %iterArg_0 : tensor<f32>
      stablehlo.return %5, %6 : tensor<i32>, tensor<f32>
    }
    return %0#1 : tensor<f32>
  }
}
