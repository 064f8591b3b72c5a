// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-choose-stages{mpmd-dim=2})'

// A module lowered by an older version carries treduce's schedule as its repr: the
// pass asks for the step to be lowered again, at the loop.

module @old_schedule_text attributes {jaxpp.num_segments = 2 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{the treduce loop carries its schedule as the text 'Std1F1B(num_stages=2)', the form of modules lowered by an older jaxpp_mlir: lower the step again}}
    %0 = "jaxpp.loop"(%arg0) ({
    ^bb0(%i: tensor<i32>, %acc: tensor<2x4xf32>):
      %1 = stablehlo.tanh %acc {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64} : tensor<2x4xf32>
      %2 = stablehlo.sine %1 {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64} : tensor<2x4xf32>
      "jaxpp.yield"(%2) : (tensor<2x4xf32>) -> ()
    }) {jaxpp.num_microbatches = 4 : i64, jaxpp.schedule = "Std1F1B(num_stages=2)"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

// The default schedule has one stage per segment, one per rank: three segments do not
// fit two ranks.

module @more_segments_than_ranks attributes {jaxpp.num_segments = 3 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{the program has 3 stages but the mesh has only 2 submeshes along the mpmd axis}}
    %0 = "jaxpp.loop"(%arg0) ({
    ^bb0(%i: tensor<i32>, %acc: tensor<2x4xf32>):
      %1 = stablehlo.tanh %acc {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64} : tensor<2x4xf32>
      %2 = stablehlo.sine %1 {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64} : tensor<2x4xf32>
      %3 = stablehlo.cosine %2 {jaxpp.kind = "fwd", jaxpp.segment = 2 : i64} : tensor<2x4xf32>
      "jaxpp.yield"(%3) : (tensor<2x4xf32>) -> ()
    }) {jaxpp.num_microbatches = 4 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

// The same with the markers written: blamed on the marker that ends stage 2, the first
// without a rank; without a loop as well.

module @marked_stages_beyond_the_ranks attributes {jaxpp.num_segments = 3 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = "jaxpp.loop"(%arg0) ({
    ^bb0(%i: tensor<i32>, %acc: tensor<2x4xf32>):
      %1 = stablehlo.optimization_barrier {jaxpp.kind = "fwd", jaxpp.marker = "fwd", jaxpp.segment = 0 : i64} %acc : tensor<2x4xf32>
      %2 = stablehlo.optimization_barrier {jaxpp.kind = "fwd", jaxpp.marker = "fwd", jaxpp.segment = 1 : i64} %1 : tensor<2x4xf32>
      // expected-error @+1 {{the program has 3 stages but the mesh has only 2 submeshes along the mpmd axis (the marker here ends stage 2, the first without a rank): pass a schedule that places several stages per rank}}
      %3 = stablehlo.optimization_barrier {jaxpp.kind = "fwd", jaxpp.marker = "fwd", jaxpp.segment = 2 : i64} %2 : tensor<2x4xf32>
      "jaxpp.yield"(%3) : (tensor<2x4xf32>) -> ()
    }) {jaxpp.num_microbatches = 4 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

module @marked_stages_beyond_the_ranks_without_a_loop attributes {jaxpp.num_segments = 3 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %1 = stablehlo.optimization_barrier {jaxpp.kind = "fwd", jaxpp.marker = "fwd", jaxpp.segment = 0 : i64} %arg0 : tensor<2x4xf32>
    %2 = stablehlo.optimization_barrier {jaxpp.kind = "fwd", jaxpp.marker = "fwd", jaxpp.segment = 1 : i64} %1 : tensor<2x4xf32>
    // expected-error @+1 {{the program has 3 stages but the mesh has only 2 submeshes along the mpmd axis (the marker here ends stage 2, the first without a rank): use a mesh with at least as many submeshes as stages}}
    %3 = stablehlo.optimization_barrier {jaxpp.kind = "fwd", jaxpp.marker = "fwd", jaxpp.segment = 2 : i64} %2 : tensor<2x4xf32>
    return %3 : tensor<2x4xf32>
  }
}

// -----

// A treduce schedule record naming no schedule.

module @unknown_schedule attributes {jaxpp.num_segments = 1 : i64} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{the schedule record names the unknown schedule 'Wavy' (known: GPipe, Std1F1B}}
    %0 = "jaxpp.loop"(%arg0) ({
    ^bb0(%i: tensor<i32>, %acc: tensor<2x4xf32>):
      %1 = stablehlo.tanh %acc {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64} : tensor<2x4xf32>
      "jaxpp.yield"(%1) : (tensor<2x4xf32>) -> ()
    }) {jaxpp.num_microbatches = 4 : i64, jaxpp.schedule = {kind = "Wavy"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

// Chosen once already: the ops carry stages, no longer segments.

// expected-error @+1 {{jaxpp-choose-stages: the stages are already chosen (found jaxpp.num_stages): run jaxpp-choose-stages only once}}
module @chosen_twice attributes {jaxpp.num_segments = 1 : i64, jaxpp.num_stages = 1 : i64, jaxpp.stage_split = array<i64: 1>} {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %arg0 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

// No segments yet: the segmenter runs first.

module @not_segmented {
  func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{jaxpp-choose-stages: 'stablehlo.tanh' has no segment: run jaxpp-assign-segments first}}
    %0 = stablehlo.tanh %arg0 : tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}
