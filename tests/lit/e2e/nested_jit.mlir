// RUN: jaxpp-opt %inputs/nested_jit.mlir --pass-pipeline='builtin.module(jaxpp-check-attributes,jaxpp-inline-calls{max-depth=64},jaxpp-materialize-replica-groups,jaxpp-check-host-callbacks,jaxpp-verify-markers{num-stages=0 mpmd-dim=3 merge-parallel=false},jaxpp-check-shardings{mpmd-axis= submesh-size=0},jaxpp-normalize-loop,jaxpp-assign-segments{chained=true optional=true merge-parallel=false},jaxpp-segment-layer-scans{chained=true optional=true},jaxpp-segment-repeated-blocks{chained=true optional=false},jaxpp-choose-stages{schedule= mpmd-dim=3 stage-split= memory-limit=0 fuse-tasks=false parallel-ranks=0},jaxpp-split-layer-scans,jaxpp-split-stacked-values,jaxpp-split-accumulators,jaxpp-split-backward,jaxpp-outline-stages,jaxpp-place-stages{mpmd-dim=3},jaxpp-outline-outer-code{replicate-max-bytes=1024},jaxpp-share-constant-tasks{max-bytes=1024},jaxpp-insert-transfers,jaxpp-verify-program)' | filecheck %s

// The default pipeline on a captured 2-stage model whose first stage, marker
// included, is a nested jax.jit (@first_stage): the call is inlined and its
// function erased, so the marker splits the stages. Two stages on a mesh of
// three ranks leave rank 2 idle.

// CHECK-LABEL: module @jit_model attributes {jaxpp.calls_inlined, jaxpp.num_ranks = 3 : i64, jaxpp.num_segments = 2 : i64, jaxpp.num_stages = 2 : i64
// CHECK-NEXT:    func.func public @main(%[[W0:.*]]: tensor<4x4xf32>, %[[W1:.*]]: tensor<4x4xf32>, %[[X:.*]]: tensor<2x4xf32>)
// CHECK-NEXT:      %[[F0:.*]] = "jaxpp.task"(%[[X]], %[[W0]]) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.rank = 0 : i64, jaxpp.stage = 0 : i64}
// CHECK-NEXT:      "jaxpp.send"(%[[F0]]) {jaxpp.channel = 0 : i64, jaxpp.peer = 1 : i64, jaxpp.rank = 0 : i64}
// CHECK-NEXT:      %[[R0:.*]] = "jaxpp.recv"() {jaxpp.channel = 0 : i64, jaxpp.peer = 0 : i64, jaxpp.rank = 1 : i64}
// CHECK-NEXT:      %[[F1:.*]] = "jaxpp.task"(%[[R0]], %[[W1]]) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.rank = 1 : i64, jaxpp.stage = 1 : i64}
// CHECK-NEXT:      return %[[F1]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage0_fwd(%[[A0:.*]]: tensor<2x4xf32>, %[[A1:.*]]: tensor<4x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[DOT0:.*]] = stablehlo.dot_general %[[A0]], %[[A1]], contracting_dims = [1] x [0]
// CHECK-NEXT:      %[[TANH:.*]] = stablehlo.tanh %[[DOT0]] : tensor<2x4xf32>
// CHECK-NEXT:      return %[[TANH]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage1_fwd(%[[A0:.*]]: tensor<2x4xf32>, %[[A1:.*]]: tensor<4x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[DOT1:.*]] = stablehlo.dot_general %[[A0]], %[[A1]], contracting_dims = [1] x [0]
// CHECK-NEXT:      %[[SIN:.*]] = stablehlo.sine %[[DOT1]] : tensor<2x4xf32>
// CHECK-NEXT:      return %[[SIN]] : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
