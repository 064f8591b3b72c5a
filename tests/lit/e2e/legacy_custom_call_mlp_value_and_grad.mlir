// RUN: jaxpp-opt %S/../inputs/legacy_custom_call_mlp_value_and_grad.mlir --pass-pipeline='builtin.module(jaxpp-check-attributes,jaxpp-inline-calls{max-depth=64},jaxpp-materialize-replica-groups,jaxpp-check-host-callbacks,jaxpp-verify-markers{num-stages=0 mpmd-dim=3 merge-parallel=false},jaxpp-check-shardings{mpmd-axis= submesh-size=0},jaxpp-normalize-loop,jaxpp-assign-segments{chained=true optional=true merge-parallel=false},jaxpp-segment-layer-scans{chained=true optional=true},jaxpp-segment-repeated-blocks{chained=true optional=false},jaxpp-choose-stages{schedule= mpmd-dim=3 stage-split= memory-limit=0 fuse-tasks=false parallel-ranks=0},jaxpp-split-layer-scans,jaxpp-split-stacked-values,jaxpp-split-accumulators,jaxpp-split-backward,jaxpp-outline-stages,jaxpp-place-stages{mpmd-dim=3},jaxpp-outline-outer-code{replicate-max-bytes=1024},jaxpp-share-constant-tasks{max-bytes=1024},jaxpp-insert-transfers,jaxpp-verify-program)' | filecheck %s --check-prefixes=CHECK,JAX010

// A module saved before the markers became optimization barriers (jax 0.10.2's
// capture, with `stablehlo.custom_call @jaxpp.enter_stage` / `@jaxpp.loop_marker`
// markers): it still partitions, exactly as the barrier-form capture of mlp_value_and_grad.mlir.

// The default pipeline (default_pipeline_text(mpmd_dim=3)) on a captured
// 3-stage MLP training step (value_and_grad and an SGD update): forward
// tasks on ranks 0, 1, 2, then backward tasks on ranks 2, 1, 0; each
// activation and each gradient crosses one rank boundary once; every
// parameter update runs on the rank that holds the parameter.

// CHECK-LABEL: module @jit_step attributes {jaxpp.calls_inlined, jaxpp.num_ranks = 3 : i64, jaxpp.num_segments = 3 : i64, jaxpp.num_stages = 3 : i64
// CHECK-NEXT:    func.func public @main(
// CHECK-NEXT:      %[[F0:.*]] = "jaxpp.task"(%{{.*}}) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64}
// CHECK-NEXT:      "jaxpp.send"(%[[F0]]) {jaxpp.channel = 0 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64}
// CHECK-NEXT:      %[[R0:.*]] = "jaxpp.recv"() {jaxpp.channel = 0 : i64, jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64}
// CHECK-NEXT:      %[[F1:.*]]:2 = "jaxpp.task"(%[[R0]], %{{.*}}) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64}
// CHECK-NEXT:      "jaxpp.send"(%[[F1]]#0) {jaxpp.channel = 1 : i64, jaxpp.peer = 2 : i64, jaxpp.rank = 1 : i64}
// CHECK-NEXT:      %[[R1:.*]] = "jaxpp.recv"() {jaxpp.channel = 1 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 2 : i64}
// JAX010-NEXT:      %[[F2:.*]]:4 = "jaxpp.task"(%[[R1]], %{{.*}}) {callee = @stage2_fwd, jaxpp.kind = "fwd", jaxpp.rank = 2 : i64, jaxpp.stage = 2 : i64}
// JAX011-NEXT:      %[[F2:.*]]:3 = "jaxpp.task"(%[[R1]], %{{.*}}) {callee = @stage2_fwd, jaxpp.kind = "fwd", jaxpp.rank = 2 : i64, jaxpp.stage = 2 : i64}
// JAX010-NEXT:      %[[B2:.*]]:3 = "jaxpp.task"(%[[F2]]#3, %[[F2]]#1, %[[F2]]#0, %[[R1]], %{{.*}}) {callee = @stage2_bwd, jaxpp.kind = "bwd", jaxpp.rank = 2 : i64, jaxpp.stage = 2 : i64}
// JAX011-NEXT:      %[[B2:.*]]:3 = "jaxpp.task"(%[[F2]]#2, %[[F2]]#0, %[[R1]], %{{.*}}) {callee = @stage2_bwd, jaxpp.kind = "bwd", jaxpp.rank = 2 : i64, jaxpp.stage = 2 : i64}
// CHECK-NEXT:      "jaxpp.send"(%[[B2]]#0) {jaxpp.channel = 2 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 2 : i64}
// CHECK-NEXT:      %[[R2:.*]] = "jaxpp.recv"() {jaxpp.channel = 2 : i64, jaxpp.peer = 2 : i64, jaxpp.rank = 1 : i64}
// JAX010-NEXT:      %[[B1:.*]]:3 = "jaxpp.task"(%[[R2]], %[[F1]]#1, %[[F1]]#0, %[[R0]], %{{.*}}) {callee = @stage1_bwd, jaxpp.kind = "bwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64}
// JAX011-NEXT:      %[[B1:.*]]:3 = "jaxpp.task"(%[[R2]], %[[F1]]#1, %[[R0]], %{{.*}}) {callee = @stage1_bwd, jaxpp.kind = "bwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64}
// CHECK-NEXT:      "jaxpp.send"(%[[B1]]#0) {jaxpp.channel = 3 : i64, jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64}
// CHECK-NEXT:      %[[R3:.*]] = "jaxpp.recv"() {jaxpp.channel = 3 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64}
// CHECK-NEXT:      %[[B0:.*]]:2 = "jaxpp.task"(%[[F0]], %[[R3]], %{{.*}}) {callee = @stage0_bwd, jaxpp.kind = "bwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64}
// JAX010-NEXT:      return %[[B0]]#0, %[[B0]]#1, %[[B1]]#1, %[[B1]]#2, %[[B2]]#1, %[[B2]]#2, %[[F2]]#2 :
// JAX011-NEXT:      return %[[B0]]#0, %[[B0]]#1, %[[B1]]#1, %[[B1]]#2, %[[B2]]#1, %[[B2]]#2, %[[F2]]#1 :
// CHECK-NEXT:    }

// Stage functions hold plain StableHLO: no marker is left.
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
// CHECK-NOT:   func.func
