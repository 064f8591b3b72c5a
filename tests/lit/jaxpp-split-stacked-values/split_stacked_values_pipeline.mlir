// RUN: jaxpp-opt %S/inputs/adamw_clip_two_stages.mlir --pass-pipeline='builtin.module(jaxpp-split-stacked-values,jaxpp-split-accumulators,jaxpp-split-backward,jaxpp-outline-stages,jaxpp-place-stages{mpmd-dim=2},jaxpp-outline-outer-code{replicate-max-bytes=1024},jaxpp-insert-transfers,jaxpp-verify-program)' | filecheck %s

// The rest of the default pipeline, from this pass on, on a step lowered by JAX
// (inputs/regenerate.py; tests/py/passes/test_split_stacked_values.py checks its
// numbers against jax.jit): two stages of a stacked parameter w[4, 4, 4], stage 0 a
// lax.scan over w[0:1], stage 1 over w[1:4], treduce over 3 microbatches, then
// optax.clip_by_global_norm and optax.adamw (arguments: head, w, count, mu and nu of
// head and w, the batch).
//
// Each rank receives its rows of w and of w's Adam moments as chunks (rank 0 rows
// [0, 1), rank 1 rows [1, 4)) and reads them in its tasks; it accumulates its rows of
// w's gradient (jaxpp.state_ranks [.., .., 0, 1]); after the loop each rank updates
// its rows in its own post tasks. Only scalars cross ranks after the loop: rank 1's
// partial sum of squares of the gradient (w's rows [1, 4) and head's), the global
// norm, the clipping decision. The new w, mu and nu are assembled from both ranks.

// CHECK-LABEL:   func.func public @main(
// CHECK-SAME:      %{{.*}}: tensor<4x2xf32>, %[[W:.*]]: tensor<4x4x4xf32>, %{{.*}}: tensor<i32>, %{{.*}}: tensor<4x2xf32>, %[[MU:.*]]: tensor<4x4x4xf32>, %{{.*}}: tensor<4x2xf32>, %[[NU:.*]]: tensor<4x4x4xf32>
// CHECK-NEXT:      %[[W0:.*]] = "jaxpp.chunk"(%[[W]]) {jaxpp.rank = 0 : i64, jaxpp.rows = 1 : i64, jaxpp.stage = 0 : i64, jaxpp.start = 0 : i64} : (tensor<4x4x4xf32>) -> tensor<1x4x4xf32>
// CHECK-NEXT:      %[[W1:.*]] = "jaxpp.chunk"(%[[W]]) {jaxpp.rank = 1 : i64, jaxpp.rows = 3 : i64, jaxpp.stage = 1 : i64, jaxpp.start = 1 : i64} : (tensor<4x4x4xf32>) -> tensor<3x4x4xf32>
// CHECK-NEXT:      %[[MU0:.*]] = "jaxpp.chunk"(%[[MU]]) {jaxpp.rank = 0 : i64, jaxpp.rows = 1 : i64, jaxpp.stage = 0 : i64, jaxpp.start = 0 : i64}
// CHECK-NEXT:      %[[MU1:.*]] = "jaxpp.chunk"(%[[MU]]) {jaxpp.rank = 1 : i64, jaxpp.rows = 3 : i64, jaxpp.stage = 1 : i64, jaxpp.start = 1 : i64}
// CHECK-NEXT:      %[[NU0:.*]] = "jaxpp.chunk"(%[[NU]]) {jaxpp.rank = 0 : i64, jaxpp.rows = 1 : i64, jaxpp.stage = 0 : i64, jaxpp.start = 0 : i64}
// CHECK-NEXT:      %[[NU1:.*]] = "jaxpp.chunk"(%[[NU]]) {jaxpp.rank = 1 : i64, jaxpp.rows = 3 : i64, jaxpp.stage = 1 : i64, jaxpp.start = 1 : i64}
// CHECK-NEXT:      "jaxpp.task"() {callee = @pre0_r0, {{.*}}jaxpp.rank = 0 : i64{{.*}}} : () -> tensor<1x4x4xf32>
// CHECK-NEXT:      "jaxpp.task"() {callee = @pre0_r1, {{.*}}jaxpp.rank = 1 : i64{{.*}}} : () -> (tensor<3xf32>, tensor<4x2xf32>, tensor<3x4x4xf32>)
// CHECK-NEXT:      %[[LOOP:.*]]:4 = "jaxpp.loop"
// CHECK-NEXT:      ^bb0(
// CHECK-NEXT:        "jaxpp.task"({{.*}}, %[[W0]]) {callee = @stage0_fwd
// CHECK:             "jaxpp.task"({{.*}}, %[[W1]], {{.*}}) {callee = @stage1_fwd
// CHECK-NEXT:        "jaxpp.task"({{.*}}, %[[W1]], {{.*}}) {callee = @stage1_bwd
// CHECK:             "jaxpp.task"(%[[W0]], {{.*}}) {callee = @stage0_bwd
// CHECK:           }) {jaxpp.num_microbatches = 3 : i64, jaxpp.state_ranks = [1, 1, 0, 1]} : (tensor<3xf32>, tensor<4x2xf32>, tensor<1x4x4xf32>, tensor<3x4x4xf32>)
// CHECK-NEXT:      %[[P0:.*]]:7 = "jaxpp.task"(%[[LOOP]]#2, %[[MU0]], %[[NU0]], %{{.*}}, %[[W0]]) {callee = @post0_r0, {{.*}}jaxpp.rank = 0 : i64
// CHECK-NEXT:      %[[P1:.*]]:13 = "jaxpp.task"(%[[LOOP]]#1, %[[LOOP]]#3, %{{.*}}, %[[MU1]], %{{.*}}, %[[NU1]], %{{.*}}, %{{.*}}, %[[W1]]) {callee = @post0_r1, {{.*}}jaxpp.rank = 1 : i64
// CHECK-NEXT:      "jaxpp.send"(%[[P1]]#0) {jaxpp.channel = 2 : i64, jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64} : (tensor<f32>) -> ()
// CHECK-NEXT:      %[[PARTIAL:.*]] = "jaxpp.recv"() {jaxpp.channel = 2 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64} : () -> tensor<f32>
// CHECK-NEXT:      %[[SUM:.*]] = "jaxpp.task"(%[[P0]]#0, %[[PARTIAL]]) {callee = @post1_r0, {{.*}}jaxpp.rank = 0 : i64{{.*}}} : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT:      "jaxpp.send"(%[[SUM]]) {jaxpp.channel = 3 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64} : (tensor<f32>) -> ()
// CHECK-NEXT:      "jaxpp.recv"() {jaxpp.channel = 3 : i64, jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64} : () -> tensor<f32>
// CHECK-NEXT:      %[[P2:.*]]:8 = "jaxpp.task"({{.*}}) {callee = @post2_r1, {{.*}}jaxpp.rank = 1 : i64
// CHECK-NEXT:      "jaxpp.send"(%[[P2]]#0) {jaxpp.channel = 4 : i64, jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64} : (tensor<f32>) -> ()
// CHECK-NEXT:      "jaxpp.send"(%[[P2]]#1) {jaxpp.channel = 5 : i64, jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64} : (tensor<i1>) -> ()
// CHECK-NEXT:      "jaxpp.recv"() {jaxpp.channel = 4 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64} : () -> tensor<f32>
// CHECK-NEXT:      "jaxpp.recv"() {jaxpp.channel = 5 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64} : () -> tensor<i1>
// CHECK-NEXT:      %[[P3:.*]]:3 = "jaxpp.task"({{.*}}, %[[W0]]) {callee = @post3_r0, {{.*}}jaxpp.rank = 0 : i64{{.*}}} : ({{.*}}) -> (tensor<1x4x4xf32>, tensor<1x4x4xf32>, tensor<1x4x4xf32>)
// CHECK-NEXT:      %[[NEW_W:.*]] = "jaxpp.assemble"(%[[P3]]#2, %[[P2]]#7) : (tensor<1x4x4xf32>, tensor<3x4x4xf32>) -> tensor<4x4x4xf32>
// CHECK-NEXT:      %[[NEW_MU:.*]] = "jaxpp.assemble"(%[[P3]]#0, %[[P2]]#3) : (tensor<1x4x4xf32>, tensor<3x4x4xf32>) -> tensor<4x4x4xf32>
// CHECK-NEXT:      %[[NEW_NU:.*]] = "jaxpp.assemble"(%[[P3]]#1, %[[P2]]#5) : (tensor<1x4x4xf32>, tensor<3x4x4xf32>) -> tensor<4x4x4xf32>
// CHECK-NEXT:      %[[COUNT:.*]] = "jaxpp.replicated"
// CHECK-NEXT:      return %{{.*}}, %[[NEW_W]], %[[COUNT]], %{{.*}}, %[[NEW_MU]], %{{.*}}, %[[NEW_NU]], %[[LOOP]]#0
