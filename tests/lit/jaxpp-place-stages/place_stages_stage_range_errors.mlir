// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-place-stages)'

// A task whose jaxpp.stage is outside [0, jaxpp.num_stages) must be rejected
// with an error located at the task.

module @task_stage_beyond_num_stages attributes {jaxpp.num_stages = 1 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{task of stage 3 in a program of 1 stage(s)}}
    %0 = "jaxpp.task"(%arg0) {callee = @stage3_fwd, jaxpp.kind = "fwd", jaxpp.stage = 3 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage3_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    return %arg0 : tensor<2x4xf32>
  }
}

// -----

module @negative_task_stage attributes {jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{task of stage -1 in a program of 2 stage(s)}}
    %0 = "jaxpp.task"(%arg0) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.stage = -1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    return %arg0 : tensor<2x4xf32>
  }
}
