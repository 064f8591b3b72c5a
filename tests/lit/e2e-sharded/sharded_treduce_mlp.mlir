// RUN: jaxpp-opt %inputs/sharded_treduce_mlp.mlir --pass-pipeline='builtin.module(jaxpp-inline-calls,jaxpp-check-host-callbacks,jaxpp-verify-markers{num-stages=0 merge-parallel=false},jaxpp-check-shardings{mpmd-axis=stage submesh-size=4},sdy-propagation-pipeline,jaxpp-restore-sharding-constraints,jaxpp-normalize-loop,jaxpp-assign-segments{chained=true optional=true merge-parallel=false},jaxpp-segment-layer-scans{chained=true optional=true},jaxpp-segment-repeated-blocks{chained=true optional=false},jaxpp-choose-stages{mpmd-dim=2},jaxpp-split-layer-scans,jaxpp-split-stacked-values,jaxpp-split-accumulators,jaxpp-outline-stages,jaxpp-place-stages{mpmd-dim=2},jaxpp-outline-outer-code{replicate-max-bytes=1024},jaxpp-share-constant-tasks{max-bytes=1024},jaxpp-insert-transfers,jaxpp-verify-program)' | filecheck %s

// The passes partition() runs for a sharded treduce step on an MpmdMesh
// (stage=2, data=2, model=2) with the default schedule (Std1F1B(2)), on the
// captured step of tests/lit/regenerate_inputs.py (sharded_treduce_mlp):
// 2 stages, 2 microbatches, lowered on the lowering mesh (stage=1, data=2,
// model=2), tensor-parallel weights (P(None, "model") then P("model",
// None)), data-parallel microbatches (P(None, "data", None)), and each
// stage's output constrained to P("data", None).
//
// Shardy's propagation gives every value a sharding; the stage functions
// then carry a closed sharding (no `?`) on every argument and result, every
// task and the loop carry their results' shardings (sdy.sharding_per_value),
// and the user's constraints, which propagation turned into sdy.reshard,
// are sdy.sharding_constraint again. The activation crossing ranks is
// checked in sharded_boundary_constraint.mlir.

// CHECK-LABEL: module @jit_step attributes {jaxpp.calls_inlined, jaxpp.num_ranks = 2 : i64, jaxpp.num_segments = 2 : i64, jaxpp.num_stages = 2 : i64, jaxpp.schedule = {kind = "Std1F1B", num_stages = 2 : i64}, jaxpp.stage_split = array<i64: 1, 1>, mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
// CHECK-NEXT:    sdy.mesh @mesh = <["stage"=1, "data"=2, "model"=2]>
// CHECK-NEXT:    func.func public @main(
// CHECK-SAME:      %[[W0:[^:]*]]: tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>},
// CHECK-SAME:      %[[W0OUT:[^:]*]]: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>},
// CHECK-SAME:      %[[W1:[^:]*]]: tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>},
// CHECK-SAME:      %[[W1OUT:[^:]*]]: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>},
// CHECK-SAME:      %[[XS:[^:]*]]: tensor<2x2x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"data"}, {}]>},
// CHECK-SAME:      %[[YS:[^:]*]]: tensor<2x2x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"data"}, {}]>})

// Each rank zeroes its own gradient accumulators (rank 1 also the losses).

// CHECK-NEXT:      %[[PRE0:.*]]:2 = "jaxpp.task"() {callee = @pre0_r0, jaxpp.kind = "pre", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64, sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"model"}]>, <@mesh, [{"model"}, {}]>]>} : () -> (tensor<4x8xf32>, tensor<8x4xf32>)
// CHECK-NEXT:      %[[PRE1:.*]]:3 = "jaxpp.task"() {callee = @pre0_r1, jaxpp.kind = "pre", jaxpp.rank = 1 : i64, jaxpp.stage = 0 : i64, sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}]>, <@mesh, [{}, {"model"}]>, <@mesh, [{"model"}, {}]>]>} : () -> (tensor<2xf32>, tensor<4x8xf32>, tensor<8x4xf32>)

// The loop body: one microbatch's four tasks in 1F1B order, the activation
// and its gradient crossing ranks through a send/recv pair each.

// CHECK-NEXT:      %[[LOOP:.*]]:5 = "jaxpp.loop"(%[[PRE1]]#0, %[[PRE0]]#0, %[[PRE0]]#1, %[[PRE1]]#1, %[[PRE1]]#2) ({
// CHECK-NEXT:      ^bb0(%[[I:.*]]: tensor<i32>, %[[LOSSES:.*]]: tensor<2xf32>, %[[G0:.*]]: tensor<4x8xf32>, %[[G0OUT:.*]]: tensor<8x4xf32>, %[[G1:.*]]: tensor<4x8xf32>, %[[G1OUT:.*]]: tensor<8x4xf32>):
// CHECK-NEXT:        %[[F0:.*]]:3 = "jaxpp.task"(%[[I]], %[[XS]], %[[W0]], %[[W0OUT]]) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64, sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data"}, {}]>, <@mesh, [{"data"}, {"model"}]>, <@mesh, {{.*}}>]>}
// CHECK-NEXT:        "jaxpp.send"(%[[F0]]#2) {jaxpp.channel = 0 : i64, jaxpp.for_task = [0, "fwd"], jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64} : (tensor<2x4xf32>) -> ()
// CHECK-NEXT:        %[[H:.*]] = "jaxpp.recv"() {jaxpp.channel = 0 : i64, jaxpp.for_task = [1, "fwd"], jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64} : () -> tensor<2x4xf32>
// CHECK-NEXT:        %[[F1:.*]]:4 = "jaxpp.task"(%[[I]], %[[YS]], %[[H]], %[[W1]], %[[W1OUT]], %[[LOSSES]]) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64, sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data"}, {"model"}]>, <@mesh, [{"data"}, {"model"}]>, <@mesh, [{"data"}, {}]>, <@mesh, [{}]>]>}
// CHECK-NEXT:        %[[B1:.*]]:3 = "jaxpp.task"({{.*}}, %[[G1]], %[[G1OUT]]) {callee = @stage1_bwd, jaxpp.kind = "bwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64, sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data"}, {}]>, <@mesh, [{}, {"model"}]>, <@mesh, [{"model"}, {}]>]>}
// CHECK-NEXT:        "jaxpp.send"(%[[B1]]#0) {jaxpp.channel = 1 : i64, jaxpp.for_task = [1, "bwd"], jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64} : (tensor<2x4xf32>) -> ()
// CHECK-NEXT:        %[[DH:.*]] = "jaxpp.recv"() {jaxpp.channel = 1 : i64, jaxpp.for_task = [0, "bwd"], jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64} : () -> tensor<2x4xf32>
// CHECK-NEXT:        %[[B0:.*]]:2 = "jaxpp.task"(%[[F0]]#1, %[[DH]], %[[W0OUT]], %[[F0]]#0, %[[G0]], %[[G0OUT]]) {callee = @stage0_bwd, jaxpp.kind = "bwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64, sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"model"}]>, <@mesh, [{"model"}, {}]>]>}
// CHECK-NEXT:        "jaxpp.yield"(%[[F1]]#3, %[[B0]]#0, %[[B0]]#1, %[[B1]]#1, %[[B1]]#2)
// CHECK-NEXT:      }) {jaxpp.num_microbatches = 2 : i64, jaxpp.state_ranks = [1, 0, 0, 1, 1], sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}]>, <@mesh, [{}, {"model"}]>, <@mesh, [{"model"}, {}]>, <@mesh, [{}, {"model"}]>, <@mesh, [{"model"}, {}]>]>}

// Each rank updates its own weights, which keep their tensor-parallel shardings.

// CHECK-NEXT:      %[[NEW0:.*]]:2 = "jaxpp.task"(%[[LOOP]]#1, %[[W0]], %[[LOOP]]#2, %[[W0OUT]]) {callee = @post0_r0, jaxpp.kind = "post", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64, sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"model"}]>, <@mesh, [{"model"}, {}]>]>}
// CHECK-NEXT:      %[[NEW1:.*]]:2 = "jaxpp.task"(%[[LOOP]]#3, %[[W1]], %[[LOOP]]#4, %[[W1OUT]]) {callee = @post0_r1, jaxpp.kind = "post", jaxpp.rank = 1 : i64, jaxpp.stage = 0 : i64, sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"model"}]>, <@mesh, [{"model"}, {}]>]>}
// CHECK-NEXT:      return %[[NEW0]]#0, %[[NEW0]]#1, %[[NEW1]]#0, %[[NEW1]]#1, %[[LOOP]]#0 :
// CHECK-NEXT:    }

// Stage functions: a closed sharding on every argument and result; the
// constraints are back (sdy.sharding_constraint, no sdy.reshard).

// CHECK-NEXT:    func.func private @stage0_fwd(
// CHECK-SAME:      %{{[^:]*}}: tensor<i32> {sdy.sharding = #sdy.sharding<@mesh, []>},
// CHECK-SAME:      %{{[^:]*}}: tensor<2x2x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"data"}, {}]>},
// CHECK-SAME:      %{{[^:]*}}: tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>},
// CHECK-SAME:      %{{[^:]*}}: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>})
// CHECK-SAME:      -> (tensor<2x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>},
// CHECK-SAME:          tensor<2x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {"model"}]>},
// CHECK-SAME:          tensor<2x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{{[^?>]*}}]>}) {
// CHECK-NOT:       sdy.reshard
// CHECK:           %[[OUT:.*]] = sdy.sharding_constraint %{{.*}} <@mesh, [{"data"}, {}]> : tensor<2x4xf32>
// CHECK-NEXT:      return %{{.*}}, %{{.*}}, %[[OUT]] :
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage1_fwd(
// CHECK-SAME:      %{{[^:]*}}: tensor<i32> {sdy.sharding = #sdy.sharding<@mesh, []>},
// CHECK-SAME:      %{{[^:]*}}: tensor<2x2x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"data"}, {}]>},
// CHECK-SAME:      %{{[^:]*}}: tensor<2x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{{[^?>]*}}]>},
// CHECK-SAME:      %{{[^:]*}}: tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>},
// CHECK-SAME:      %{{[^:]*}}: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>},
// CHECK-SAME:      %{{[^:]*}}: tensor<2xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>})
// CHECK-SAME:      -> (tensor<2x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {"model"}]>},
// CHECK-SAME:          tensor<2x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {"model"}]>},
// CHECK-SAME:          tensor<2x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>},
// CHECK-SAME:          tensor<2xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}) {
// CHECK-NOT:       sdy.reshard
// CHECK:           sdy.sharding_constraint %{{.*}} <@mesh, [{"data"}, {}]> : tensor<2x4xf32>
// CHECK-NOT:       sdy.reshard
// CHECK:         func.func private @stage1_bwd(
// CHECK-SAME:      %{{[^:]*}}: tensor<2x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>},
// CHECK-SAME:      %{{[^:]*}}: tensor<2x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {"model"}]>},
// CHECK-SAME:      %{{[^:]*}}: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>},
// CHECK-SAME:      %{{[^:]*}}: tensor<2x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {"model"}]>},
// CHECK-SAME:      %{{[^:]*}}: tensor<2x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{{[^?>]*}}]>},
// CHECK-SAME:      %{{[^:]*}}: tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>},
// CHECK-SAME:      %{{[^:]*}}: tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>},
// CHECK-SAME:      %{{[^:]*}}: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>})
// CHECK-SAME:      -> (tensor<2x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>},
// CHECK-SAME:          tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>},
// CHECK-SAME:          tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>}) {
// CHECK-NEXT:      sdy.sharding_constraint %{{.*}} <@mesh, [{"data"}, {}]> : tensor<2x4xf32>
// CHECK-NOT:       sdy.reshard
// CHECK:         func.func private @stage0_bwd(
// CHECK-SAME:      %{{[^:]*}}: tensor<2x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {"model"}]>},
// CHECK-SAME:      %{{[^:]*}}: tensor<2x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>},
// CHECK-SAME:      %{{[^:]*}}: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>},
// CHECK-SAME:      %{{[^:]*}}: tensor<2x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>},
// CHECK-SAME:      %{{[^:]*}}: tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>},
// CHECK-SAME:      %{{[^:]*}}: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>})
// CHECK-SAME:      -> (tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>},
// CHECK-SAME:          tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>}) {
// CHECK-NOT:       sdy.reshard
// CHECK:           sdy.sharding_constraint %{{.*}} <@mesh, [{"data"}, {}]> : tensor<2x4xf32>
// CHECK-NOT:       sdy.reshard

// The outer code: the same closed shardings on the accumulators, the
// losses and the weights.

// CHECK:         func.func private @pre0_r0() -> (tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}, tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>}) {
// CHECK:         func.func private @pre0_r1() -> (tensor<2xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}, tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}, tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>}) {
// CHECK:         func.func private @post0_r0(
// CHECK-SAME:      %{{[^:]*}}: tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}, %{{[^:]*}}: tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>},
// CHECK-SAME:      %{{[^:]*}}: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>}, %{{[^:]*}}: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>})
// CHECK-SAME:      -> (tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}, tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>}) {
// CHECK:         func.func private @post0_r1(
// CHECK-SAME:      -> (tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}, tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>}) {
// CHECK-NOT:     sdy.reshard
