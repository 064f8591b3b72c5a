// RUN: jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-outline-stages)' | filecheck %s
// RUN: jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-outline-stages)' --mlir-print-debuginfo | filecheck %s --check-prefix=LOC

// JAX passes a closed-over array (a position table, np.arange) into the
// microbatch loop from the top of @main. Each stage function that reads such a
// constant, or a cheap op computed from constants alone (the broadcast of 0.5),
// gets its own copy, forward and backward alike; no task takes it as an
// argument and @main keeps only the constant that is the loop's initial state.
// Each copy is located at "jaxpp.copied_constant" around its original's location.

// CHECK-LABEL: module @loop_reads_constants_of_main
// CHECK-NEXT:    func.func @main(%[[X:.*]]: tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:      %[[ZERO:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK-NEXT:      %[[LOOP:.*]] = "jaxpp.loop"(%[[ZERO]]) ({
// CHECK-NEXT:      ^bb0(%{{.*}}: tensor<i32>, %[[ACC:.*]]: tensor<4xf32>):
// CHECK-NEXT:        %[[F0:.*]]:2 = "jaxpp.task"(%[[X]]) {callee = @stage0_fwd, jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
// CHECK-NEXT:        %[[F1:.*]] = "jaxpp.task"(%[[F0]]#1) {callee = @stage1_fwd, jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:        %[[B1:.*]] = "jaxpp.task"(%[[F1]]) {callee = @stage1_bwd, jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:        %[[B0:.*]] = "jaxpp.task"(%[[F0]]#0, %[[B1]], %[[ACC]]) {callee = @stage0_bwd, jaxpp.kind = "bwd", jaxpp.stage = 0 : i64}
// CHECK-NEXT:        "jaxpp.yield"(%[[B0]]) : (tensor<4xf32>) -> ()
// CHECK-NEXT:      }) {jaxpp.num_microbatches = 2 : i64} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:      return %[[LOOP]] : tensor<4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage0_fwd(%[[S0X:.*]]: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
// CHECK-NEXT:      %[[T0:.*]] = stablehlo.constant dense<[0.000000e+00, 1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<4xf32>
// CHECK-NEXT:      %[[ADD0:.*]] = stablehlo.add %[[S0X]], %[[T0]] : tensor<4xf32>
// CHECK-NEXT:      %[[SIN:.*]] = stablehlo.sine %[[ADD0]] : tensor<4xf32>
// CHECK-NEXT:      return %[[ADD0]], %[[SIN]] : tensor<4xf32>, tensor<4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage1_fwd(%[[S1X:.*]]: tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:      %[[HALF:.*]] = stablehlo.constant dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT:      %[[HALVES:.*]] = stablehlo.broadcast_in_dim %[[HALF]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:      %[[T1:.*]] = stablehlo.constant dense<[0.000000e+00, 1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<4xf32>
// CHECK-NEXT:      %[[MUL1:.*]] = stablehlo.multiply %[[S1X]], %[[HALVES]] : tensor<4xf32>
// CHECK-NEXT:      %[[ADD1:.*]] = stablehlo.add %[[MUL1]], %[[T1]] : tensor<4xf32>
// CHECK-NEXT:      return %[[ADD1]] : tensor<4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage1_bwd(%[[B1X:.*]]: tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:      %[[T2:.*]] = stablehlo.constant dense<[0.000000e+00, 1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<4xf32>
// CHECK-NEXT:      %[[MUL2:.*]] = stablehlo.multiply %[[B1X]], %[[T2]] : tensor<4xf32>
// CHECK-NEXT:      return %[[MUL2]] : tensor<4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func private @stage0_bwd(

// LOC-LABEL: func.func private @stage0_fwd(
// LOC-NEXT:    stablehlo.constant dense<[0.000000e+00, 1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<4xf32> loc(#[[COPY:loc[0-9]+]])
// LOC-LABEL: func.func private @stage1_bwd(
// LOC-NEXT:    stablehlo.constant dense<[0.000000e+00, 1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<4xf32> loc(#[[COPY]])
// LOC:       #[[TABLE:loc[0-9]+]] = loc("model.py":3:9)
// LOC:       #[[COPY]] = loc("jaxpp.copied_constant"(#[[TABLE]]))
module @loop_reads_constants_of_main attributes {jaxpp.num_stages = 2 : i64} {
  func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %table = stablehlo.constant dense<[0.0, 1.0, 2.0, 3.0]> : tensor<4xf32> loc("model.py":3:9)
    %half = stablehlo.constant dense<5.0e-01> : tensor<f32>
    %halves = stablehlo.broadcast_in_dim %half, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %zero = stablehlo.constant dense<0.0> : tensor<4xf32>
    %0 = "jaxpp.loop"(%zero) ({
    ^bb0(%i: tensor<i32>, %acc: tensor<4xf32>):
      %1 = stablehlo.add %arg0, %table {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<4xf32>
      %2 = stablehlo.sine %1 {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : tensor<4xf32>
      %3 = stablehlo.cosine %1 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4xf32>
      %4 = stablehlo.optimization_barrier {jaxpp.kind = "fwd", jaxpp.marker = "fwd", jaxpp.stage = 0 : i64} %2 : tensor<4xf32>
      %5 = stablehlo.multiply %4, %halves {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<4xf32>
      %6 = stablehlo.add %5, %table {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<4xf32>
      %7 = stablehlo.optimization_barrier {jaxpp.kind = "fwd", jaxpp.marker = "fwd", jaxpp.stage = 1 : i64} %6 : tensor<4xf32>
      %8 = stablehlo.multiply %7, %table {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : tensor<4xf32>
      %9 = stablehlo.optimization_barrier {jaxpp.kind = "bwd", jaxpp.marker = "bwd", jaxpp.stage = 1 : i64} %8 : tensor<4xf32>
      %10 = stablehlo.multiply %9, %3 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4xf32>
      %11 = stablehlo.add %acc, %10 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4xf32>
      "jaxpp.yield"(%11) : (tensor<4xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
