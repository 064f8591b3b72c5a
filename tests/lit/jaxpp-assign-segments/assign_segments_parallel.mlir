// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-assign-segments)' | filecheck %s --check-prefix=SEPARATE
// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-assign-segments{merge-parallel=true})' | filecheck %s --check-prefix=MERGE

// value_and_grad of two branches, a = mark(tanh(x @ w1)) and b = mark(sin(x @ w2)), then
// c = mark((a + b) @ w3) (JaxPP's test_parallel_stage_merge_transpose_order). Each marker
// ends its own segment, in program order: a 0, b 1, c 2; a + b reads both, so it runs in
// segment 2. Autodiff places the transposes in reverse order (c, b, a): the gradient code
// after b's opens the backward of segment 1, after a's that of segment 0. With
// merge-parallel, a and b end one segment (0), c the next.

// SEPARATE-LABEL: module @two_branches attributes {jaxpp.num_segments = 3 : i64}
// SEPARATE:         %[[A0:.*]] = stablehlo.dot_general %[[X:.*]], %[[W1:.*]], {{.*}} {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64}
// SEPARATE-NEXT:    %[[TANH:.*]] = stablehlo.tanh %[[A0]] {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64}
// SEPARATE-NEXT:    %[[DTANH:.*]] = stablehlo.subtract {{.*}} {jaxpp.kind = "bwd", jaxpp.segment = 0 : i64}
// SEPARATE-NEXT:    %[[A:.*]] = stablehlo.optimization_barrier {jaxpp.kind = "fwd", jaxpp.marker = "fwd", jaxpp.segment = 0 : i64} %[[TANH]]
// SEPARATE-NEXT:    %[[B0:.*]] = stablehlo.dot_general %[[X]], %[[W2:.*]], {{.*}} {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64}
// SEPARATE-NEXT:    %[[SIN:.*]] = stablehlo.sine %[[B0]] {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64}
// SEPARATE-NEXT:    %[[COS:.*]] = stablehlo.cosine %[[B0]] {jaxpp.kind = "bwd", jaxpp.segment = 1 : i64}
// SEPARATE-NEXT:    %[[B:.*]] = stablehlo.optimization_barrier {jaxpp.kind = "fwd", jaxpp.marker = "fwd", jaxpp.segment = 1 : i64} %[[SIN]]
// SEPARATE-NEXT:    %[[SUM:.*]] = stablehlo.add %[[A]], %[[B]] {jaxpp.kind = "fwd", jaxpp.segment = 2 : i64}
// SEPARATE-NEXT:    %[[C0:.*]] = stablehlo.dot_general %[[SUM]], %[[W3:.*]], {{.*}} {jaxpp.kind = "fwd", jaxpp.segment = 2 : i64}
// SEPARATE-NEXT:    %[[C:.*]] = stablehlo.optimization_barrier {jaxpp.kind = "fwd", jaxpp.marker = "fwd", jaxpp.segment = 2 : i64} %[[C0]]
// SEPARATE-NEXT:    %[[ZERO:.*]] = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.segment = 2 : i64}
// SEPARATE-NEXT:    %[[LOSS:.*]] = stablehlo.reduce(%[[C]] init: %[[ZERO]]) {{.*}} {jaxpp.kind = "fwd", jaxpp.segment = 2 : i64}
// SEPARATE-NEXT:    %[[SEED:.*]] = stablehlo.constant {jaxpp.kind = "fwd", jaxpp.segment = 2 : i64}
// SEPARATE-NEXT:    %[[CT_C:.*]] = stablehlo.optimization_barrier {jaxpp.kind = "fwd", jaxpp.marker = "bwd", jaxpp.segment = 2 : i64} %[[SEED]]
// SEPARATE-NEXT:    %[[DW3:.*]] = stablehlo.dot_general %[[CT_C]], %[[SUM]], {{.*}} {jaxpp.kind = "bwd", jaxpp.segment = 2 : i64}
// SEPARATE-NEXT:    %[[CT_SUM:.*]] = stablehlo.dot_general %[[CT_C]], %[[W3]], {{.*}} {jaxpp.kind = "bwd", jaxpp.segment = 2 : i64}
// SEPARATE-NEXT:    %[[CT_B:.*]] = stablehlo.optimization_barrier {jaxpp.kind = "bwd", jaxpp.marker = "bwd", jaxpp.segment = 2 : i64} %[[CT_SUM]]
// SEPARATE-NEXT:    %[[DB:.*]] = stablehlo.multiply %[[CT_B]], %[[COS]] {jaxpp.kind = "bwd", jaxpp.segment = 1 : i64}
// SEPARATE-NEXT:    %[[DW2:.*]] = stablehlo.dot_general %[[DB]], %[[X]], {{.*}} {jaxpp.kind = "bwd", jaxpp.segment = 1 : i64}
// SEPARATE-NEXT:    %[[CT_A:.*]] = stablehlo.optimization_barrier {jaxpp.kind = "bwd", jaxpp.marker = "bwd", jaxpp.segment = 2 : i64} %[[CT_SUM]]
// SEPARATE-NEXT:    %[[DA:.*]] = stablehlo.multiply %[[CT_A]], %[[DTANH]] {jaxpp.kind = "bwd", jaxpp.segment = 0 : i64}
// SEPARATE-NEXT:    %[[DW1:.*]] = stablehlo.dot_general %[[DA]], %[[X]], {{.*}} {jaxpp.kind = "bwd", jaxpp.segment = 0 : i64}
// SEPARATE-NEXT:    return %[[LOSS]], %[[DW1]], %[[DW2]], %[[DW3]]

// MERGE-LABEL: module @two_branches attributes {jaxpp.num_segments = 2 : i64}
// MERGE:         stablehlo.optimization_barrier {jaxpp.kind = "fwd", jaxpp.marker = "fwd", jaxpp.segment = 0 : i64}
// MERGE:         stablehlo.sine {{.*}} {jaxpp.kind = "fwd", jaxpp.segment = 0 : i64}
// MERGE:         stablehlo.optimization_barrier {jaxpp.kind = "fwd", jaxpp.marker = "fwd", jaxpp.segment = 0 : i64}
// MERGE-NEXT:    stablehlo.add {{.*}} {jaxpp.kind = "fwd", jaxpp.segment = 1 : i64}
// MERGE:         %[[CT_B:.*]] = stablehlo.optimization_barrier {jaxpp.kind = "bwd", jaxpp.marker = "bwd", jaxpp.segment = 1 : i64}
// MERGE-NEXT:    stablehlo.multiply %[[CT_B]], {{.*}} {jaxpp.kind = "bwd", jaxpp.segment = 0 : i64}
module @two_branches {
  func.func @main(%w1: tensor<4x4xf32>, %w2: tensor<4x4xf32>, %w3: tensor<4x4xf32>, %x: tensor<2x4xf32>) -> (tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
    %0 = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %1 = stablehlo.tanh %0 : tensor<2x4xf32>
    %2 = stablehlo.subtract %x, %1 : tensor<2x4xf32>
    %3 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %1 : tensor<2x4xf32>
    %4 = stablehlo.dot_general %x, %w2, contracting_dims = [1] x [0] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %5 = stablehlo.sine %4 : tensor<2x4xf32>
    %6 = stablehlo.cosine %4 : tensor<2x4xf32>
    %7 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %5 : tensor<2x4xf32>
    %8 = stablehlo.add %3, %7 : tensor<2x4xf32>
    %9 = stablehlo.dot_general %8, %w3, contracting_dims = [1] x [0] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %10 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %9 : tensor<2x4xf32>
    %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %11 = stablehlo.reduce(%10 init: %zero) applies stablehlo.add across dimensions = [0, 1] : (tensor<2x4xf32>, tensor<f32>) -> tensor<f32>
    %seed = stablehlo.constant dense<1.000000e+00> : tensor<2x4xf32>
    %12 = stablehlo.optimization_barrier {jaxpp.marker = "bwd"} %seed : tensor<2x4xf32>
    %13 = stablehlo.dot_general %12, %8, contracting_dims = [0] x [0] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %14 = stablehlo.dot_general %12, %w3, contracting_dims = [1] x [1] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %15 = stablehlo.optimization_barrier {jaxpp.marker = "bwd"} %14 : tensor<2x4xf32>
    %16 = stablehlo.multiply %15, %6 : tensor<2x4xf32>
    %17 = stablehlo.dot_general %16, %x, contracting_dims = [0] x [0] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %18 = stablehlo.optimization_barrier {jaxpp.marker = "bwd"} %14 : tensor<2x4xf32>
    %19 = stablehlo.multiply %18, %2 : tensor<2x4xf32>
    %20 = stablehlo.dot_general %19, %x, contracting_dims = [0] x [0] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    return %11, %20, %17, %13 : tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
  }
}

// -----

// The same with b frozen (stop_gradient): only a's marker has a transpose. The gradient
// code after it reads a's own forward code (the derivative of its tanh), so it opens the
// backward of a's segment (0), not of b's (1), although b's marker is the later one.

// SEPARATE-LABEL: module @frozen_branch attributes {jaxpp.num_segments = 3 : i64}
// SEPARATE:         %[[CT_A:.*]] = stablehlo.optimization_barrier {jaxpp.kind = "bwd", jaxpp.marker = "bwd", jaxpp.segment = 2 : i64}
// SEPARATE-NEXT:    stablehlo.multiply %[[CT_A]], {{.*}} {jaxpp.kind = "bwd", jaxpp.segment = 0 : i64}
// SEPARATE-NEXT:    stablehlo.dot_general {{.*}} {jaxpp.kind = "bwd", jaxpp.segment = 0 : i64}
// MERGE-LABEL: module @frozen_branch attributes {jaxpp.num_segments = 2 : i64}
module @frozen_branch {
  func.func @main(%w1: tensor<4x4xf32>, %w2: tensor<4x4xf32>, %w3: tensor<4x4xf32>, %x: tensor<2x4xf32>) -> (tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>) {
    %0 = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %1 = stablehlo.tanh %0 : tensor<2x4xf32>
    %2 = stablehlo.subtract %x, %1 : tensor<2x4xf32>
    %3 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %1 : tensor<2x4xf32>
    %4 = stablehlo.dot_general %x, %w2, contracting_dims = [1] x [0] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %5 = stablehlo.sine %4 : tensor<2x4xf32>
    %7 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %5 : tensor<2x4xf32>
    %8 = stablehlo.add %3, %7 : tensor<2x4xf32>
    %9 = stablehlo.dot_general %8, %w3, contracting_dims = [1] x [0] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %10 = stablehlo.optimization_barrier {jaxpp.marker = "fwd"} %9 : tensor<2x4xf32>
    %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %11 = stablehlo.reduce(%10 init: %zero) applies stablehlo.add across dimensions = [0, 1] : (tensor<2x4xf32>, tensor<f32>) -> tensor<f32>
    %seed = stablehlo.constant dense<1.000000e+00> : tensor<2x4xf32>
    %12 = stablehlo.optimization_barrier {jaxpp.marker = "bwd"} %seed : tensor<2x4xf32>
    %13 = stablehlo.dot_general %12, %8, contracting_dims = [0] x [0] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %14 = stablehlo.dot_general %12, %w3, contracting_dims = [1] x [1] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %18 = stablehlo.optimization_barrier {jaxpp.marker = "bwd"} %14 : tensor<2x4xf32>
    %19 = stablehlo.multiply %18, %2 : tensor<2x4xf32>
    %20 = stablehlo.dot_general %19, %x, contracting_dims = [0] x [0] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    return %11, %20, %13 : tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>
  }
}
