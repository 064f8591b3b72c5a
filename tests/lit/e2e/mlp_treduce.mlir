// RUN: jaxpp-opt %inputs/mlp_treduce.mlir --pass-pipeline='builtin.module(jaxpp-check-attributes,jaxpp-inline-calls{max-depth=64},jaxpp-materialize-replica-groups,jaxpp-check-host-callbacks,jaxpp-verify-markers{num-stages=0 mpmd-dim=3 merge-parallel=false},jaxpp-check-shardings{mpmd-axis= submesh-size=0},jaxpp-normalize-loop,jaxpp-assign-segments{chained=true optional=true merge-parallel=false},jaxpp-segment-layer-scans{chained=true optional=true},jaxpp-segment-repeated-blocks{chained=true optional=false},jaxpp-choose-stages{schedule= mpmd-dim=3 stage-split= memory-limit=0 fuse-tasks=false parallel-ranks=0},jaxpp-split-layer-scans,jaxpp-split-stacked-values,jaxpp-split-accumulators,jaxpp-split-backward,jaxpp-outline-stages,jaxpp-place-stages{mpmd-dim=3},jaxpp-outline-outer-code{replicate-max-bytes=1024},jaxpp-share-constant-tasks{max-bytes=1024},jaxpp-insert-transfers,jaxpp-verify-program)' | filecheck %s %jaxchecks

// The default pipeline on the captured 3-stage MLP step with a microbatch
// loop (treduce of value_and_grad over 2 microbatches, then SGD): each rank
// initializes its own accumulators before the loop; the loop body is one
// microbatch's forward and backward, with every transfer inside it; each
// rank updates its own parameters after the loop, so nothing crosses ranks
// outside the loop.

// CHECK-LABEL: module @jit_step attributes {jaxpp.calls_inlined, jaxpp.num_ranks = 3 : i64, jaxpp.num_segments = 3 : i64, jaxpp.num_stages = 3 : i64
// CHECK-NEXT:    func.func public @main(
// CHECK-NEXT:      %[[PRE0:.*]]:3 = "jaxpp.task"() {callee = @pre0_r0, jaxpp.kind = "pre", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64}
// CHECK-NEXT:      %[[PRE1:.*]]:3 = "jaxpp.task"() {callee = @pre0_r1, jaxpp.kind = "pre", jaxpp.rank = 1 : i64, jaxpp.stage = 0 : i64}
// CHECK-NEXT:      %[[PRE2:.*]]:3 = "jaxpp.task"() {callee = @pre0_r2, jaxpp.kind = "pre", jaxpp.rank = 2 : i64, jaxpp.stage = 0 : i64}
// CHECK-NEXT:      %[[LOOP:.*]]:7 = "jaxpp.loop"(%[[PRE2]]#2, %[[PRE0]]#0, %[[PRE0]]#1, %[[PRE1]]#0, %[[PRE1]]#1, %[[PRE2]]#0, %[[PRE2]]#1) ({
// CHECK-NEXT:      ^bb0(%[[I:[^:]*]]: tensor<i32>,
// CHECK-NEXT:        %[[F0:.*]]:2 = "jaxpp.task"(%[[I]], {{.*}}) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64}
// CHECK-NEXT:        "jaxpp.send"(%[[F0]]#1) {jaxpp.channel = 0 : i64, jaxpp.for_task = [0, "fwd"], jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64}
// CHECK-NEXT:        %[[R0:.*]] = "jaxpp.recv"() {jaxpp.channel = 0 : i64, jaxpp.for_task = [1, "fwd"], jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64}
// CHECK-NEXT:        %[[F1:.*]]:2 = "jaxpp.task"(%[[R0]], {{.*}}) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64}
// CHECK-NEXT:        "jaxpp.send"(%[[F1]]#0) {jaxpp.channel = 1 : i64, jaxpp.for_task = [1, "fwd"], jaxpp.peer = 2 : i64, jaxpp.rank = 1 : i64}
// CHECK-NEXT:        %[[R1:.*]] = "jaxpp.recv"() {jaxpp.channel = 1 : i64, jaxpp.for_task = [2, "fwd"], jaxpp.peer = 1 : i64, jaxpp.rank = 2 : i64}
// JAX010-NEXT:        %[[F2:.*]]:4 = "jaxpp.task"(%[[I]], %{{.*}}, %[[R1]], {{.*}}) {callee = @stage2_fwd, jaxpp.kind = "fwd", jaxpp.rank = 2 : i64, jaxpp.stage = 2 : i64}
// JAX011-NEXT:        %[[F2:.*]]:3 = "jaxpp.task"(%[[I]], %{{.*}}, %[[R1]], {{.*}}) {callee = @stage2_fwd, jaxpp.kind = "fwd", jaxpp.rank = 2 : i64, jaxpp.stage = 2 : i64}
// CHECK-NEXT:        %[[B2:.*]]:3 = "jaxpp.task"({{.*}}) {callee = @stage2_bwd, jaxpp.kind = "bwd", jaxpp.rank = 2 : i64, jaxpp.stage = 2 : i64}
// CHECK-NEXT:        "jaxpp.send"(%[[B2]]#0) {jaxpp.channel = 2 : i64, jaxpp.for_task = [2, "bwd"], jaxpp.peer = 1 : i64, jaxpp.rank = 2 : i64}
// CHECK-NEXT:        %[[R2:.*]] = "jaxpp.recv"() {jaxpp.channel = 2 : i64, jaxpp.for_task = [1, "bwd"], jaxpp.peer = 2 : i64, jaxpp.rank = 1 : i64}
// CHECK-NEXT:        %[[B1:.*]]:3 = "jaxpp.task"(%[[R2]], {{.*}}) {callee = @stage1_bwd, jaxpp.kind = "bwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64}
// CHECK-NEXT:        "jaxpp.send"(%[[B1]]#0) {jaxpp.channel = 3 : i64, jaxpp.for_task = [1, "bwd"], jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64}
// CHECK-NEXT:        %[[R3:.*]] = "jaxpp.recv"() {jaxpp.channel = 3 : i64, jaxpp.for_task = [0, "bwd"], jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64}
// CHECK-NEXT:        %[[B0:.*]]:2 = "jaxpp.task"(%{{.*}}, %[[R3]], {{.*}}) {callee = @stage0_bwd, jaxpp.kind = "bwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64}
// JAX010-NEXT:        "jaxpp.yield"(%[[F2]]#3, %[[B0]]#0, %[[B0]]#1, %[[B1]]#1, %[[B1]]#2, %[[B2]]#1, %[[B2]]#2)
// JAX011-NEXT:        "jaxpp.yield"(%[[F2]]#2, %[[B0]]#0, %[[B0]]#1, %[[B1]]#1, %[[B1]]#2, %[[B2]]#1, %[[B2]]#2)
// CHECK-NEXT:      }) {jaxpp.num_microbatches = 2 : i64, jaxpp.state_ranks = [2, 0, 0, 1, 1, 2, 2]}
// CHECK-NEXT:      %[[P0:.*]]:2 = "jaxpp.task"(%[[LOOP]]#1, %{{.*}}, %[[LOOP]]#2, %{{.*}}) {callee = @post0_r0, jaxpp.kind = "post", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64}
// CHECK-NEXT:      %[[P1:.*]]:2 = "jaxpp.task"(%[[LOOP]]#3, %{{.*}}, %[[LOOP]]#4, %{{.*}}) {callee = @post0_r1, jaxpp.kind = "post", jaxpp.rank = 1 : i64, jaxpp.stage = 0 : i64}
// CHECK-NEXT:      %[[P2:.*]]:2 = "jaxpp.task"(%[[LOOP]]#5, %{{.*}}, %[[LOOP]]#6, %{{.*}}) {callee = @post0_r2, jaxpp.kind = "post", jaxpp.rank = 2 : i64, jaxpp.stage = 0 : i64}
// CHECK-NEXT:      return %[[P0]]#0, %[[P0]]#1, %[[P1]]#0, %[[P1]]#1, %[[P2]]#0, %[[P2]]#1, %[[LOOP]]#0 :
// CHECK-NEXT:    }

// No marker (stage or loop) is left in any function.
// CHECK-NOT:   stablehlo.custom_call
// CHECK-LABEL: func.func private @stage0_fwd(
// CHECK-NOT:   stablehlo.custom_call
// CHECK-LABEL: func.func private @stage1_fwd(
// CHECK-NOT:   stablehlo.custom_call
// CHECK-LABEL: func.func private @stage2_fwd(
// CHECK-NOT:   stablehlo.custom_call
// CHECK-LABEL: func.func private @stage2_bwd(
// CHECK-NOT:   stablehlo.custom_call
// CHECK-LABEL: func.func private @stage1_bwd(
// CHECK-NOT:   stablehlo.custom_call
// CHECK-LABEL: func.func private @stage0_bwd(
// CHECK-NOT:   stablehlo.custom_call
// CHECK-LABEL: func.func private @pre0_r0(
// CHECK-NOT:   stablehlo.custom_call
// CHECK-LABEL: func.func private @pre0_r1(
// CHECK-NOT:   stablehlo.custom_call
// CHECK-LABEL: func.func private @pre0_r2(
// CHECK-NOT:   stablehlo.custom_call
// CHECK-LABEL: func.func private @post0_r0(
// CHECK-NOT:   stablehlo.custom_call
// CHECK-LABEL: func.func private @post0_r1(
// CHECK-NOT:   stablehlo.custom_call
// CHECK-LABEL: func.func private @post0_r2(
// CHECK-NOT:   stablehlo.custom_call
// CHECK-NOT:   func.func
