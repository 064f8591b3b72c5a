// RUN: jaxpp-opt %inputs/sharded_treduce_mlp.mlir --pass-pipeline='builtin.module(jaxpp-inline-calls,jaxpp-check-host-callbacks,jaxpp-verify-markers{num-stages=0 merge-parallel=false},jaxpp-check-shardings{mpmd-axis=stage submesh-size=4},sdy-propagation-pipeline,jaxpp-restore-sharding-constraints,jaxpp-normalize-loop,jaxpp-assign-segments{chained=true optional=true merge-parallel=false},jaxpp-segment-layer-scans{chained=true optional=true},jaxpp-segment-repeated-blocks{chained=true optional=false},jaxpp-choose-stages{mpmd-dim=2},jaxpp-split-layer-scans,jaxpp-split-stacked-values,jaxpp-split-accumulators,jaxpp-outline-stages,jaxpp-place-stages{mpmd-dim=2},jaxpp-outline-outer-code{replicate-max-bytes=1024},jaxpp-share-constant-tasks{max-bytes=1024},jaxpp-insert-transfers,jaxpp-verify-program)' | filecheck %s

// A value defined by an sdy.sharding_constraint has the constraint's own
// `sharding` as its sharding (Shardy writes no `sdy.sharding` on it). In the
// captured step the activation stage 0 sends to stage 1 is such a value (the
// user's with_sharding_constraint(..., P("data", None)) right before
// pipeline_enter_stage), so stage0_fwd returns it, the task carries it, and
// stage1_fwd and stage1_bwd receive it as [{"data"}, {}], as asked.
//
// Regression: shardings.value_sharding once read `sdy.sharding` only and fell
// back to replicated ([{}, {}]) here, so stage 0 all-gathered the activation
// and the transfer moved the whole tensor to every device of rank 1 (still
// correct, but the layout the user asked for was lost at the boundary).

// CHECK-LABEL: func.func public @main(
// CHECK:         "jaxpp.task"({{.*}}) {callee = @stage0_fwd, {{.*}}, sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data"}, {}]>, <@mesh, [{"data"}, {"model"}]>, <@mesh, [{"data"}, {}]>]>}

// CHECK-LABEL: func.func private @stage0_fwd(
// CHECK-SAME:      -> (tensor<2x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}, tensor<2x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {"model"}]>}, tensor<2x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}) {

// CHECK-LABEL: func.func private @stage1_fwd(
// CHECK-SAME:      %{{[^:]*}}: tensor<2x2x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"data"}, {}]>}, %{{[^:]*}}: tensor<2x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>},

// CHECK-LABEL: func.func private @stage1_bwd(
// CHECK-SAME:      %{{[^:]*}}: tensor<2x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {"model"}]>}, %{{[^:]*}}: tensor<2x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}, %{{[^:]*}}: tensor<4x8xf32>
