// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-split-backward)'

// The order checks hold where the pass splits: the modules below record a schedule
// that splits backwards (ZeroBubble); under any other the pass changes nothing.

// expected-error @+1 {{the module has no 'func.func @main' to partition}}
module @no_main attributes {jaxpp.num_stages = 1 : i64} {
  func.func @step(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    return %arg0 : tensor<2x4xf32>
  }
}

// -----

module @op_without_stage attributes {jaxpp.num_stages = 1 : i64, jaxpp.schedule = {kind = "ZeroBubble", num_stages = 1 : i64}} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    // expected-error @+1 {{has no stage assignment: run jaxpp-choose-stages first}}
    %1 = stablehlo.sine %0 : tensor<2x4xf32>
    return %1 : tensor<2x4xf32>
  }
}

// -----

// Running the pass twice (for a schedule that splits backwards) is refused at the
// first split op.
module @already_split attributes {jaxpp.num_stages = 1 : i64, jaxpp.schedule = {kind = "ZeroBubble", num_stages = 1 : i64}} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    // expected-error @+1 {{jaxpp-split-backward: the backward is already split (found 'stablehlo.sine' of kind bwd_w): run jaxpp-split-backward only once}}
    %1 = stablehlo.sine %0 {jaxpp.kind = "bwd_w", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    return %1 : tensor<2x4xf32>
  }
}

// -----

// After outlining, the tasks carry the stage and kind of what they call:
// splitting them would relabel whole backward tasks, so it is refused.
module @already_outlined attributes {jaxpp.num_stages = 1 : i64, jaxpp.schedule = {kind = "ZeroBubble", num_stages = 1 : i64}} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{jaxpp-split-backward: the stages are already outlined (found jaxpp.task @stage0_fwd): run jaxpp-split-backward before jaxpp-outline-stages}}
    %0 = "jaxpp.task"(%arg0) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %1 = "jaxpp.task"(%0) {callee = @stage0_bwd, jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %1 : tensor<2x4xf32>
  }
  func.func private @stage0_fwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @stage0_bwd(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.sine %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

// The module's schedule record must name a schedule.

// expected-error @+1 {{the module's jaxpp.schedule: the schedule record names the unknown schedule 'Wavy'}}
module @unknown_schedule attributes {jaxpp.num_stages = 1 : i64, jaxpp.schedule = {kind = "Wavy"}} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}
