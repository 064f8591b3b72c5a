// RUN: jaxpp-opt %inputs/mlp_forward.mlir --pass-pipeline='builtin.module(jaxpp-check-attributes,jaxpp-inline-calls{max-depth=64},jaxpp-materialize-replica-groups,jaxpp-check-host-callbacks,jaxpp-verify-markers{num-stages=0 mpmd-dim=3 merge-parallel=false},jaxpp-check-shardings{mpmd-axis= submesh-size=0},jaxpp-normalize-loop,jaxpp-assign-segments{chained=true optional=true merge-parallel=false},jaxpp-segment-layer-scans{chained=true optional=true},jaxpp-segment-repeated-blocks{chained=true optional=false},jaxpp-choose-stages{schedule= mpmd-dim=3 stage-split= memory-limit=0 fuse-tasks=false parallel-ranks=0},jaxpp-split-layer-scans,jaxpp-split-stacked-values,jaxpp-split-accumulators,jaxpp-split-backward,jaxpp-outline-stages,jaxpp-place-stages{mpmd-dim=3},jaxpp-outline-outer-code{replicate-max-bytes=1024},jaxpp-share-constant-tasks{max-bytes=1024},jaxpp-insert-transfers,jaxpp-verify-program)' | filecheck %s

// The default pipeline on the captured forward-only 3-stage MLP (the loss, no
// gradient): three forward tasks, one per rank, chained by two transfers; the
// loss stays on rank 2.

// CHECK-LABEL: module @jit__loss attributes {jaxpp.calls_inlined, jaxpp.num_ranks = 3 : i64, jaxpp.num_segments = 3 : i64, jaxpp.num_stages = 3 : i64
// CHECK-NEXT:    func.func public @main(
// CHECK-NEXT:      %[[F0:.*]] = "jaxpp.task"(%{{.*}}) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64}
// CHECK-NEXT:      "jaxpp.send"(%[[F0]]) {jaxpp.channel = 0 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64}
// CHECK-NEXT:      %[[R0:.*]] = "jaxpp.recv"() {jaxpp.channel = 0 : i64, jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64}
// CHECK-NEXT:      %[[F1:.*]] = "jaxpp.task"(%[[R0]], %{{.*}}) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64}
// CHECK-NEXT:      "jaxpp.send"(%[[F1]]) {jaxpp.channel = 1 : i64, jaxpp.peer = 2 : i64, jaxpp.rank = 1 : i64}
// CHECK-NEXT:      %[[R1:.*]] = "jaxpp.recv"() {jaxpp.channel = 1 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 2 : i64}
// CHECK-NEXT:      %[[F2:.*]] = "jaxpp.task"(%[[R1]], %{{.*}}) {callee = @stage2_fwd, jaxpp.kind = "fwd", jaxpp.rank = 2 : i64, jaxpp.stage = 2 : i64} : ({{.*}}) -> tensor<f32>
// CHECK-NEXT:      return %[[F2]] : tensor<f32>
// CHECK-NEXT:    }
// CHECK-NOT:   stablehlo.custom_call
// CHECK-LABEL: func.func private @stage0_fwd(
// CHECK-NOT:   stablehlo.custom_call
// CHECK-LABEL: func.func private @stage1_fwd(
// CHECK-NOT:   stablehlo.custom_call
// CHECK-LABEL: func.func private @stage2_fwd(
// CHECK:         stablehlo.reduce
// CHECK-NOT:   stablehlo.custom_call
// CHECK-NOT:   func.func
