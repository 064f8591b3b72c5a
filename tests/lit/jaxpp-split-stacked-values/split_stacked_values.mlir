// RUN: jaxpp-opt %s --split-input-file --pass-pipeline='builtin.module(jaxpp-split-stacked-values)' | filecheck %s

// A stacked parameter %w of 4 layers, split in two stages of 2 layers: the form the
// loop split of a layer scan leaves. Each stage's loop reads its rows of %w as a static
// slice; its gradient rows come out of the loop, concatenated for the accumulator. After
// the loop: optax.clip_by_global_norm (sum of squares, sqrt, select of a scaled
// gradient) and an Adam-like update of %w and its moments %mu, %nu.
//
// The pass makes the chunks of %w the stages read and, for the update, of %mu and %nu
// (at the top of @main, each tagged with its stage); the accumulator becomes one per
// stage, each updated by the stage computing its piece; the update runs per piece (the
// constants and broadcasts of scalars too); the global norm's sum of squares is one
// partial sum per piece and one add, read by both pieces' clipping; the results are
// jaxpp.assemble of the pieces.

// CHECK-LABEL: module @adam_clip_two_stages
// CHECK-NEXT:    func.func @main(%[[W:.*]]: tensor<4x3xf32>, %[[MU:.*]]: tensor<4x3xf32>, %[[NU:.*]]: tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>) {
// CHECK-NEXT:      %[[W0:.*]] = "jaxpp.chunk"(%[[W]]) {jaxpp.rows = 2 : i64, jaxpp.stage = 0 : i64, jaxpp.start = 0 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:      %[[W1:.*]] = "jaxpp.chunk"(%[[W]]) {jaxpp.rows = 2 : i64, jaxpp.stage = 1 : i64, jaxpp.start = 2 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:      %[[MU0:.*]] = "jaxpp.chunk"(%[[MU]]) {jaxpp.rows = 2 : i64, jaxpp.stage = 0 : i64, jaxpp.start = 0 : i64}
// CHECK-NEXT:      %[[MU1:.*]] = "jaxpp.chunk"(%[[MU]]) {jaxpp.rows = 2 : i64, jaxpp.stage = 1 : i64, jaxpp.start = 2 : i64}
// CHECK-NEXT:      %[[NU0:.*]] = "jaxpp.chunk"(%[[NU]]) {jaxpp.rows = 2 : i64, jaxpp.stage = 0 : i64, jaxpp.start = 0 : i64}
// CHECK-NEXT:      %[[NU1:.*]] = "jaxpp.chunk"(%[[NU]]) {jaxpp.rows = 2 : i64, jaxpp.stage = 1 : i64, jaxpp.start = 2 : i64}
// CHECK-NEXT:      %[[ZERO:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:      %[[Z0:.*]] = stablehlo.broadcast_in_dim %[[ZERO]], dims = [] : (tensor<f32>) -> tensor<2x3xf32>
// CHECK-NEXT:      %[[Z1:.*]] = stablehlo.broadcast_in_dim %[[ZERO]], dims = [] : (tensor<f32>) -> tensor<2x3xf32>
// CHECK-NEXT:      %[[LOOP:.*]]:2 = "jaxpp.loop"(%[[Z0]], %[[Z1]]) ({
// CHECK-NEXT:      ^bb0(%{{.*}}: tensor<i32>, %[[ACC0:.*]]: tensor<2x3xf32>, %[[ACC1:.*]]: tensor<2x3xf32>):
// CHECK-NEXT:        %[[L0:.*]] = stablehlo.while(%[[A0:.*]] = %[[W0]]) : tensor<2x3xf32> attributes {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64}
// CHECK:             %[[L1:.*]] = stablehlo.while(%[[A1:.*]] = %[[W1]]) : tensor<2x3xf32> attributes {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64}
// CHECK:             %[[U0:.*]] = stablehlo.add %[[ACC0]], %[[L0]] {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<2x3xf32>
// CHECK-NEXT:        %[[U1:.*]] = stablehlo.add %[[ACC1]], %[[L1]] {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : tensor<2x3xf32>
// CHECK-NEXT:        "jaxpp.yield"(%[[U0]], %[[U1]]) : (tensor<2x3xf32>, tensor<2x3xf32>) -> ()
// CHECK-NEXT:      }) {jaxpp.num_microbatches = 2 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
// The global norm: a partial sum of squares per piece, one add.
// CHECK-NEXT:      %[[SQ0:.*]] = stablehlo.multiply %[[LOOP]]#0, %[[LOOP]]#0 : tensor<2x3xf32>
// CHECK-NEXT:      %[[SQ1:.*]] = stablehlo.multiply %[[LOOP]]#1, %[[LOOP]]#1 : tensor<2x3xf32>
// CHECK-NEXT:      %[[INIT:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:      %[[SUM0:.*]] = stablehlo.reduce(%[[SQ0]] init: %[[INIT]]) applies stablehlo.add across dimensions = [0, 1] : (tensor<2x3xf32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT:      %[[SUM1:.*]] = stablehlo.reduce(%[[SQ1]] init: %[[INIT]]) applies stablehlo.add across dimensions = [0, 1] : (tensor<2x3xf32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT:      %[[SUM:.*]] = stablehlo.add %[[SUM0]], %[[SUM1]] : tensor<f32>
// CHECK-NEXT:      %[[NORM:.*]] = stablehlo.sqrt %[[SUM]] : tensor<f32>
// CHECK-NEXT:      %[[MAX:.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:      %[[SMALL:.*]] = stablehlo.compare LT, %[[NORM]], %[[MAX]], FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
// CHECK-NEXT:      %[[NB0:.*]] = stablehlo.broadcast_in_dim %[[NORM]], dims = [] : (tensor<f32>) -> tensor<2x3xf32>
// CHECK-NEXT:      %[[NB1:.*]] = stablehlo.broadcast_in_dim %[[NORM]], dims = [] : (tensor<f32>) -> tensor<2x3xf32>
// CHECK-NEXT:      %[[S0:.*]] = stablehlo.divide %[[LOOP]]#0, %[[NB0]] : tensor<2x3xf32>
// CHECK-NEXT:      %[[S1:.*]] = stablehlo.divide %[[LOOP]]#1, %[[NB1]] : tensor<2x3xf32>
// CHECK-NEXT:      %[[C0:.*]] = stablehlo.select %[[SMALL]], %[[LOOP]]#0, %[[S0]] : tensor<i1>, tensor<2x3xf32>
// CHECK-NEXT:      %[[C1:.*]] = stablehlo.select %[[SMALL]], %[[LOOP]]#1, %[[S1]] : tensor<i1>, tensor<2x3xf32>
// The first moment b1 * mu + 0.1 * g: the splat constant per piece; b1 * mu, read only
// with a piece, per piece too, on the moment's chunks.
// CHECK-NEXT:      %[[B1:.*]] = stablehlo.constant dense<0.899999976> : tensor<f32>
// CHECK-NEXT:      %[[K0:.*]] = stablehlo.constant dense<1.000000e-01> : tensor<2x3xf32>
// CHECK-NEXT:      %[[K1:.*]] = stablehlo.constant dense<1.000000e-01> : tensor<2x3xf32>
// CHECK-NEXT:      %[[G0:.*]] = stablehlo.multiply %[[K0]], %[[C0]] : tensor<2x3xf32>
// CHECK-NEXT:      %[[G1:.*]] = stablehlo.multiply %[[K1]], %[[C1]] : tensor<2x3xf32>
// CHECK-NEXT:      %[[B1B0:.*]] = stablehlo.broadcast_in_dim %[[B1]], dims = [] : (tensor<f32>) -> tensor<2x3xf32>
// CHECK-NEXT:      %[[B1B1:.*]] = stablehlo.broadcast_in_dim %[[B1]], dims = [] : (tensor<f32>) -> tensor<2x3xf32>
// CHECK-NEXT:      %[[D0:.*]] = stablehlo.multiply %[[B1B0]], %[[MU0]] : tensor<2x3xf32>
// CHECK-NEXT:      %[[D1:.*]] = stablehlo.multiply %[[B1B1]], %[[MU1]] : tensor<2x3xf32>
// CHECK-NEXT:      %[[M0:.*]] = stablehlo.add %[[D0]], %[[G0]] : tensor<2x3xf32>
// CHECK-NEXT:      %[[M1:.*]] = stablehlo.add %[[D1]], %[[G1]] : tensor<2x3xf32>
// The second moment 0.999 * nu + 0.001 * g * g, on the moment's chunks.
// CHECK-NEXT:      %[[GG0:.*]] = stablehlo.multiply %[[C0]], %[[C0]] : tensor<2x3xf32>
// CHECK-NEXT:      %[[GG1:.*]] = stablehlo.multiply %[[C1]], %[[C1]] : tensor<2x3xf32>
// CHECK:           stablehlo.multiply %{{.*}}, %[[NU0]] : tensor<2x3xf32>
// CHECK-NEXT:      stablehlo.multiply %{{.*}}, %[[NU1]] : tensor<2x3xf32>
// CHECK-NEXT:      %[[N0:.*]] = stablehlo.add %{{.*}}, %{{.*}} : tensor<2x3xf32>
// CHECK-NEXT:      %[[N1:.*]] = stablehlo.add %{{.*}}, %{{.*}} : tensor<2x3xf32>
// CHECK-NEXT:      stablehlo.sqrt %[[N0]] : tensor<2x3xf32>
// CHECK-NEXT:      stablehlo.sqrt %[[N1]] : tensor<2x3xf32>
// The update, per piece, of the parameter's chunks.
// CHECK:           %[[UPD0:.*]] = stablehlo.divide %[[M0]], %{{.*}} : tensor<2x3xf32>
// CHECK-NEXT:      %[[UPD1:.*]] = stablehlo.divide %[[M1]], %{{.*}} : tensor<2x3xf32>
// CHECK:           %[[NEW0:.*]] = stablehlo.add %[[W0]], %{{.*}} : tensor<2x3xf32>
// CHECK-NEXT:      %[[NEW1:.*]] = stablehlo.add %[[W1]], %{{.*}} : tensor<2x3xf32>
// CHECK-NEXT:      %[[RW:.*]] = "jaxpp.assemble"(%[[NEW0]], %[[NEW1]]) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:      %[[RMU:.*]] = "jaxpp.assemble"(%[[M0]], %[[M1]]) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:      %[[RNU:.*]] = "jaxpp.assemble"(%[[N0]], %[[N1]]) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:      return %[[RW]], %[[RMU]], %[[RNU]] : tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>
// CHECK-NEXT:    }
module @adam_clip_two_stages attributes {jaxpp.num_stages = 2 : i64} {
  func.func @main(%w: tensor<4x3xf32>, %mu: tensor<4x3xf32>, %nu: tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>) {
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %zeros = stablehlo.broadcast_in_dim %zero, dims = [] : (tensor<f32>) -> tensor<4x3xf32>
    %acc = "jaxpp.loop"(%zeros) ({
    ^bb0(%i: tensor<i32>, %g: tensor<4x3xf32>):
      %w0 = stablehlo.slice %w [0:2, 0:3] {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
      %g0 = stablehlo.while(%a = %w0) : tensor<2x3xf32> attributes {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64}
      cond {
        %t = stablehlo.constant dense<false> : tensor<i1>
        stablehlo.return %t : tensor<i1>
      } do {
        %s = stablehlo.sine %a : tensor<2x3xf32>
        stablehlo.return %s : tensor<2x3xf32>
      }
      %w1 = stablehlo.slice %w [2:4, 0:3] {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
      %g1 = stablehlo.while(%a = %w1) : tensor<2x3xf32> attributes {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64}
      cond {
        %t = stablehlo.constant dense<false> : tensor<i1>
        stablehlo.return %t : tensor<i1>
      } do {
        %s = stablehlo.cosine %a : tensor<2x3xf32>
        stablehlo.return %s : tensor<2x3xf32>
      }
      %whole = stablehlo.concatenate %g0, %g1, dim = 0 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
      %sum = stablehlo.add %g, %whole {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4x3xf32>
      "jaxpp.yield"(%sum) : (tensor<4x3xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    %sq = stablehlo.multiply %acc, %acc : tensor<4x3xf32>
    %init = stablehlo.constant dense<0.0> : tensor<f32>
    %sumsq = stablehlo.reduce(%sq init: %init) applies stablehlo.add across dimensions = [0, 1] : (tensor<4x3xf32>, tensor<f32>) -> tensor<f32>
    %norm = stablehlo.sqrt %sumsq : tensor<f32>
    %max = stablehlo.constant dense<1.0> : tensor<f32>
    %small = stablehlo.compare LT, %norm, %max, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %normb = stablehlo.broadcast_in_dim %norm, dims = [] : (tensor<f32>) -> tensor<4x3xf32>
    %scaled = stablehlo.divide %acc, %normb : tensor<4x3xf32>
    %clipped = stablehlo.select %small, %acc, %scaled : tensor<i1>, tensor<4x3xf32>
    %b1 = stablehlo.constant dense<0.9> : tensor<f32>
    %b1b = stablehlo.broadcast_in_dim %b1, dims = [] : (tensor<f32>) -> tensor<4x3xf32>
    %mu_decayed = stablehlo.multiply %b1b, %mu : tensor<4x3xf32>
    %k1 = stablehlo.constant dense<0.1> : tensor<4x3xf32>
    %mu_g = stablehlo.multiply %k1, %clipped : tensor<4x3xf32>
    %mu_new = stablehlo.add %mu_decayed, %mu_g : tensor<4x3xf32>
    %g2 = stablehlo.multiply %clipped, %clipped : tensor<4x3xf32>
    %b2 = stablehlo.constant dense<0.999> : tensor<4x3xf32>
    %nu_decayed = stablehlo.multiply %b2, %nu : tensor<4x3xf32>
    %k2 = stablehlo.constant dense<0.001> : tensor<4x3xf32>
    %nu_g = stablehlo.multiply %k2, %g2 : tensor<4x3xf32>
    %nu_new = stablehlo.add %nu_decayed, %nu_g : tensor<4x3xf32>
    %root = stablehlo.sqrt %nu_new : tensor<4x3xf32>
    %eps = stablehlo.constant dense<1.0e-8> : tensor<f32>
    %epsb = stablehlo.broadcast_in_dim %eps, dims = [] : (tensor<f32>) -> tensor<4x3xf32>
    %den = stablehlo.add %root, %epsb : tensor<4x3xf32>
    %u = stablehlo.divide %mu_new, %den : tensor<4x3xf32>
    %lr = stablehlo.constant dense<-0.01> : tensor<f32>
    %lrb = stablehlo.broadcast_in_dim %lr, dims = [] : (tensor<f32>) -> tensor<4x3xf32>
    %step = stablehlo.multiply %lrb, %u : tensor<4x3xf32>
    %w_new = stablehlo.add %w, %step : tensor<4x3xf32>
    return %w_new, %mu_new, %nu_new : tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>
  }
}

// -----

// An uneven split (1 + 3 layers) of a 3-d stacked value, read after the loop by the
// other rules: a reduction within each layer (per piece), a transpose keeping the
// layers first (per piece), a reshape to one dimension (pieces of 6 and 18 elements)
// and its dot product with itself (a partial product per piece, added), a batched
// matmul over the layers (per piece), a maximum over everything (a partial maximum per
// piece: any init will do).

// CHECK-LABEL: module @row_rules
// CHECK:           %[[LOOP:.*]]:2 = "jaxpp.loop"
// CHECK:           }) {jaxpp.num_microbatches = 2 : i64} : (tensor<1x2x3xf32>, tensor<3x2x3xf32>) -> (tensor<1x2x3xf32>, tensor<3x2x3xf32>)
// CHECK-NEXT:      %[[INIT:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:      %[[ROW0:.*]] = stablehlo.reduce(%[[LOOP]]#0 init: %[[INIT]]) applies stablehlo.add across dimensions = [1, 2] : (tensor<1x2x3xf32>, tensor<f32>) -> tensor<1xf32>
// CHECK-NEXT:      %[[ROW1:.*]] = stablehlo.reduce(%[[LOOP]]#1 init: %[[INIT]]) applies stablehlo.add across dimensions = [1, 2] : (tensor<3x2x3xf32>, tensor<f32>) -> tensor<3xf32>
// CHECK-NEXT:      %[[T0:.*]] = stablehlo.transpose %[[LOOP]]#0, dims = [0, 2, 1] : (tensor<1x2x3xf32>) -> tensor<1x3x2xf32>
// CHECK-NEXT:      %[[T1:.*]] = stablehlo.transpose %[[LOOP]]#1, dims = [0, 2, 1] : (tensor<3x2x3xf32>) -> tensor<3x3x2xf32>
// CHECK-NEXT:      %[[F0:.*]] = stablehlo.reshape %[[LOOP]]#0 : (tensor<1x2x3xf32>) -> tensor<6xf32>
// CHECK-NEXT:      %[[F1:.*]] = stablehlo.reshape %[[LOOP]]#1 : (tensor<3x2x3xf32>) -> tensor<18xf32>
// CHECK-NEXT:      %[[DOT0:.*]] = stablehlo.dot_general %[[F0]], %[[F0]], contracting_dims = [0] x [0] : (tensor<6xf32>, tensor<6xf32>) -> tensor<f32>
// CHECK-NEXT:      %[[DOT1:.*]] = stablehlo.dot_general %[[F1]], %[[F1]], contracting_dims = [0] x [0] : (tensor<18xf32>, tensor<18xf32>) -> tensor<f32>
// CHECK-NEXT:      %[[DOT:.*]] = stablehlo.add %[[DOT0]], %[[DOT1]] : tensor<f32>
// CHECK-NEXT:      %[[MM0:.*]] = stablehlo.dot_general %[[LOOP]]#0, %[[T0]], batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<1x2x3xf32>, tensor<1x3x2xf32>) -> tensor<1x2x2xf32>
// CHECK-NEXT:      %[[MM1:.*]] = stablehlo.dot_general %[[LOOP]]#1, %[[T1]], batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<3x2x3xf32>, tensor<3x3x2xf32>) -> tensor<3x2x2xf32>
// CHECK-NEXT:      %[[LOW:.*]] = stablehlo.constant dense<-1.000000e+00> : tensor<f32>
// CHECK-NEXT:      %[[MAX0:.*]] = stablehlo.reduce(%[[LOOP]]#0 init: %[[LOW]]) applies stablehlo.maximum across dimensions = [0, 1, 2] : (tensor<1x2x3xf32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT:      %[[MAX1:.*]] = stablehlo.reduce(%[[LOOP]]#1 init: %[[LOW]]) applies stablehlo.maximum across dimensions = [0, 1, 2] : (tensor<3x2x3xf32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT:      %[[MAX:.*]] = stablehlo.maximum %[[MAX0]], %[[MAX1]] : tensor<f32>
// CHECK-NEXT:      %[[RROW:.*]] = "jaxpp.assemble"(%[[ROW0]], %[[ROW1]]) : (tensor<1xf32>, tensor<3xf32>) -> tensor<4xf32>
// CHECK-NEXT:      %[[RMM:.*]] = "jaxpp.assemble"(%[[MM0]], %[[MM1]]) : (tensor<1x2x2xf32>, tensor<3x2x2xf32>) -> tensor<4x2x2xf32>
// CHECK-NEXT:      return %[[RROW]], %[[DOT]], %[[RMM]], %[[MAX]] : tensor<4xf32>, tensor<f32>, tensor<4x2x2xf32>, tensor<f32>
module @row_rules attributes {jaxpp.num_stages = 2 : i64} {
  func.func @main(%w: tensor<4x2x3xf32>, %zeros: tensor<4x2x3xf32>) -> (tensor<4xf32>, tensor<f32>, tensor<4x2x2xf32>, tensor<f32>) {
    %acc = "jaxpp.loop"(%zeros) ({
    ^bb0(%i: tensor<i32>, %g: tensor<4x2x3xf32>):
      %w0 = stablehlo.slice %w [0:1, 0:2, 0:3] {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<4x2x3xf32>) -> tensor<1x2x3xf32>
      %g0 = stablehlo.while(%a = %w0) : tensor<1x2x3xf32> attributes {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64}
      cond {
        %t = stablehlo.constant dense<false> : tensor<i1>
        stablehlo.return %t : tensor<i1>
      } do {
        stablehlo.return %a : tensor<1x2x3xf32>
      }
      %w1 = stablehlo.slice %w [1:4, 0:2, 0:3] {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : (tensor<4x2x3xf32>) -> tensor<3x2x3xf32>
      %g1 = stablehlo.while(%a = %w1) : tensor<3x2x3xf32> attributes {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64}
      cond {
        %t = stablehlo.constant dense<false> : tensor<i1>
        stablehlo.return %t : tensor<i1>
      } do {
        stablehlo.return %a : tensor<3x2x3xf32>
      }
      %whole = stablehlo.concatenate %g0, %g1, dim = 0 {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : (tensor<1x2x3xf32>, tensor<3x2x3xf32>) -> tensor<4x2x3xf32>
      %sum = stablehlo.add %whole, %g {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : tensor<4x2x3xf32>
      "jaxpp.yield"(%sum) : (tensor<4x2x3xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<4x2x3xf32>) -> tensor<4x2x3xf32>
    %init = stablehlo.constant dense<0.0> : tensor<f32>
    %rows = stablehlo.reduce(%acc init: %init) applies stablehlo.add across dimensions = [1, 2] : (tensor<4x2x3xf32>, tensor<f32>) -> tensor<4xf32>
    %t = stablehlo.transpose %acc, dims = [0, 2, 1] : (tensor<4x2x3xf32>) -> tensor<4x3x2xf32>
    %flat = stablehlo.reshape %acc : (tensor<4x2x3xf32>) -> tensor<24xf32>
    %dot = stablehlo.dot_general %flat, %flat, contracting_dims = [0] x [0] : (tensor<24xf32>, tensor<24xf32>) -> tensor<f32>
    %mm = stablehlo.dot_general %acc, %t, batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<4x2x3xf32>, tensor<4x3x2xf32>) -> tensor<4x2x2xf32>
    %low = stablehlo.constant dense<-1.0> : tensor<f32>
    %max = stablehlo.reduce(%acc init: %low) applies stablehlo.maximum across dimensions = [0, 1, 2] : (tensor<4x2x3xf32>, tensor<f32>) -> tensor<f32>
    return %rows, %dot, %mm, %max : tensor<4xf32>, tensor<f32>, tensor<4x2x2xf32>, tensor<f32>
  }
}

// -----

// The stages read their rows of a bf16 copy of the parameter (a convert of the whole
// argument before the slices): each converts its chunk. The accumulator's start value
// is an argument: its chunks.

// CHECK-LABEL: module @convert_before_the_slices
// CHECK-NEXT:    func.func @main(%[[W:.*]]: tensor<4x3xf32>, %[[START:.*]]: tensor<4x3xbf16>) -> tensor<4x3xbf16> {
// CHECK-NEXT:      %[[W0:.*]] = "jaxpp.chunk"(%[[W]]) {jaxpp.rows = 2 : i64, jaxpp.stage = 0 : i64, jaxpp.start = 0 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:      %[[W1:.*]] = "jaxpp.chunk"(%[[W]]) {jaxpp.rows = 2 : i64, jaxpp.stage = 1 : i64, jaxpp.start = 2 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:      %[[S0:.*]] = "jaxpp.chunk"(%[[START]]) {jaxpp.rows = 2 : i64, jaxpp.stage = 0 : i64, jaxpp.start = 0 : i64} : (tensor<4x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT:      %[[S1:.*]] = "jaxpp.chunk"(%[[START]]) {jaxpp.rows = 2 : i64, jaxpp.stage = 1 : i64, jaxpp.start = 2 : i64} : (tensor<4x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT:      %[[LOOP:.*]]:2 = "jaxpp.loop"(%[[S0]], %[[S1]]) ({
// CHECK-NEXT:      ^bb0(
// CHECK-NEXT:        %[[H0:.*]] = stablehlo.convert %[[W0]] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xbf16>
// CHECK-NEXT:        stablehlo.while(%{{.*}} = %[[H0]])
// CHECK:             %[[H1:.*]] = stablehlo.convert %[[W1]] {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xbf16>
// CHECK-NEXT:        stablehlo.while(%{{.*}} = %[[H1]])
// CHECK-NOT:         stablehlo.convert
// CHECK:           %[[OUT:.*]] = "jaxpp.assemble"(%[[LOOP]]#0, %[[LOOP]]#1) : (tensor<2x3xbf16>, tensor<2x3xbf16>) -> tensor<4x3xbf16>
// CHECK-NEXT:      return %[[OUT]] : tensor<4x3xbf16>
module @convert_before_the_slices attributes {jaxpp.num_stages = 2 : i64} {
  func.func @main(%w: tensor<4x3xf32>, %start: tensor<4x3xbf16>) -> tensor<4x3xbf16> {
    %acc = "jaxpp.loop"(%start) ({
    ^bb0(%i: tensor<i32>, %g: tensor<4x3xbf16>):
      %half = stablehlo.convert %w {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<4x3xf32>) -> tensor<4x3xbf16>
      %w0 = stablehlo.slice %half [0:2, 0:3] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<4x3xbf16>) -> tensor<2x3xbf16>
      %g0 = stablehlo.while(%a = %w0) : tensor<2x3xbf16> attributes {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64}
      cond {
        %t = stablehlo.constant dense<false> : tensor<i1>
        stablehlo.return %t : tensor<i1>
      } do {
        stablehlo.return %a : tensor<2x3xbf16>
      }
      %w1 = stablehlo.slice %half [2:4, 0:3] {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<4x3xbf16>) -> tensor<2x3xbf16>
      %g1 = stablehlo.while(%a = %w1) : tensor<2x3xbf16> attributes {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64}
      cond {
        %t = stablehlo.constant dense<false> : tensor<i1>
        stablehlo.return %t : tensor<i1>
      } do {
        stablehlo.return %a : tensor<2x3xbf16>
      }
      %whole = stablehlo.concatenate %g0, %g1, dim = 0 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<2x3xbf16>, tensor<2x3xbf16>) -> tensor<4x3xbf16>
      %sum = stablehlo.add %g, %whole {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4x3xbf16>
      "jaxpp.yield"(%sum) : (tensor<4x3xbf16>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<4x3xbf16>) -> tensor<4x3xbf16>
    return %acc : tensor<4x3xbf16>
  }
}

// -----

// Left alone (the pass says UNCHANGED): no slice of an argument feeds a while loop, so
// this is no split layer scan. The slice feeds a sine, and the concatenation summed by
// the accumulator stays as it is.

// CHECK-LABEL: module @no_split_layer_scan
// CHECK-NOT:     jaxpp.chunk
// CHECK:           %[[W0:.*]] = stablehlo.slice %arg0 [0:2, 0:3] {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64}
// CHECK:           %[[WHOLE:.*]] = stablehlo.concatenate
// CHECK-NEXT:      stablehlo.add %{{.*}}, %[[WHOLE]]
// CHECK-NOT:     jaxpp.assemble
module @no_split_layer_scan attributes {jaxpp.num_stages = 2 : i64} {
  func.func @main(%w: tensor<4x3xf32>) -> tensor<4x3xf32> {
    %acc = "jaxpp.loop"(%w) ({
    ^bb0(%i: tensor<i32>, %g: tensor<4x3xf32>):
      %w0 = stablehlo.slice %w [0:2, 0:3] {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
      %g0 = stablehlo.sine %w0 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<2x3xf32>
      %w1 = stablehlo.slice %w [2:4, 0:3] {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
      %g1 = stablehlo.sine %w1 {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : tensor<2x3xf32>
      %whole = stablehlo.concatenate %g0, %g1, dim = 0 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
      %sum = stablehlo.add %g, %whole {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4x3xf32>
      "jaxpp.yield"(%sum) : (tensor<4x3xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    return %acc : tensor<4x3xf32>
  }
}

// -----

// Mixed precision: the stages compute bf16 gradient rows, cast to f32 (the whole
// concatenation) for the f32 accumulator. Each stage casts its own piece before
// adding it to its accumulator.

// CHECK-LABEL: module @cast_gradient
// CHECK:           ^bb0(%{{.*}}: tensor<i32>, %[[ACC0:.*]]: tensor<2x3xf32>, %[[ACC1:.*]]: tensor<2x3xf32>):
// CHECK-NEXT:        %[[G0:.*]] = stablehlo.while
// CHECK:             %[[G1:.*]] = stablehlo.while
// CHECK:             %[[F0:.*]] = stablehlo.convert %[[G0]] {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<2x3xbf16>) -> tensor<2x3xf32>
// CHECK-NEXT:        %[[U0:.*]] = stablehlo.add %[[ACC0]], %[[F0]] {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<2x3xf32>
// CHECK-NEXT:        %[[F1:.*]] = stablehlo.convert %[[G1]] {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : (tensor<2x3xbf16>) -> tensor<2x3xf32>
// CHECK-NEXT:        %[[U1:.*]] = stablehlo.add %[[ACC1]], %[[F1]] {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : tensor<2x3xf32>
// CHECK-NEXT:        "jaxpp.yield"(%[[U0]], %[[U1]])
module @cast_gradient attributes {jaxpp.num_stages = 2 : i64} {
  func.func @main(%w: tensor<4x3xbf16>, %zeros: tensor<4x3xf32>) -> tensor<4x3xf32> {
    %acc = "jaxpp.loop"(%zeros) ({
    ^bb0(%i: tensor<i32>, %g: tensor<4x3xf32>):
      %w0 = stablehlo.slice %w [0:2, 0:3] {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<4x3xbf16>) -> tensor<2x3xbf16>
      %g0 = stablehlo.while(%a = %w0) : tensor<2x3xbf16> attributes {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64}
      cond {
        %t = stablehlo.constant dense<false> : tensor<i1>
        stablehlo.return %t : tensor<i1>
      } do {
        stablehlo.return %a : tensor<2x3xbf16>
      }
      %w1 = stablehlo.slice %w [2:4, 0:3] {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : (tensor<4x3xbf16>) -> tensor<2x3xbf16>
      %g1 = stablehlo.while(%a = %w1) : tensor<2x3xbf16> attributes {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64}
      cond {
        %t = stablehlo.constant dense<false> : tensor<i1>
        stablehlo.return %t : tensor<i1>
      } do {
        stablehlo.return %a : tensor<2x3xbf16>
      }
      %whole = stablehlo.concatenate %g0, %g1, dim = 0 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<2x3xbf16>, tensor<2x3xbf16>) -> tensor<4x3xbf16>
      %wide = stablehlo.convert %whole {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<4x3xbf16>) -> tensor<4x3xf32>
      %sum = stablehlo.add %g, %wide {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4x3xf32>
      "jaxpp.yield"(%sum) : (tensor<4x3xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    return %acc : tensor<4x3xf32>
  }
}

// -----

// A sharded step: Shardy's propagation made its constants sdy.constant. The reduce's
// start value and a splat constant read with the pieces count as constants alike: one
// partial sum of squares per piece and one add, the splat made per piece.

// CHECK-LABEL: module @sharded_constants
// CHECK:           %[[LOOP:.*]]:2 = "jaxpp.loop"
// CHECK:           %[[K0:.*]] = stablehlo.constant dense<2.000000e+00> : tensor<2x3xf32>
// CHECK-NEXT:      %[[K1:.*]] = stablehlo.constant dense<2.000000e+00> : tensor<2x3xf32>
// CHECK-NEXT:      %[[SQ0:.*]] = stablehlo.multiply %[[K0]], %[[LOOP]]#0 : tensor<2x3xf32>
// CHECK-NEXT:      %[[SQ1:.*]] = stablehlo.multiply %[[K1]], %[[LOOP]]#1 : tensor<2x3xf32>
// CHECK-NEXT:      %[[INIT:.*]] = sdy.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:      %[[SUM0:.*]] = stablehlo.reduce(%[[SQ0]] init: %[[INIT]]) applies stablehlo.add across dimensions = [0, 1] : (tensor<2x3xf32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT:      %[[SUM1:.*]] = stablehlo.reduce(%[[SQ1]] init: %[[INIT]]) applies stablehlo.add across dimensions = [0, 1] : (tensor<2x3xf32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT:      %[[SUM:.*]] = stablehlo.add %[[SUM0]], %[[SUM1]] : tensor<f32>
// CHECK-NOT:       stablehlo.concatenate
module @sharded_constants attributes {jaxpp.num_stages = 2 : i64} {
  func.func @main(%w: tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<f32>) {
    %zero = sdy.constant dense<0.0> : tensor<f32>
    %zeros = stablehlo.broadcast_in_dim %zero, dims = [] : (tensor<f32>) -> tensor<4x3xf32>
    %acc = "jaxpp.loop"(%zeros) ({
    ^bb0(%i: tensor<i32>, %g: tensor<4x3xf32>):
      %w0 = stablehlo.slice %w [0:2, 0:3] {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
      %g0 = stablehlo.while(%a = %w0) : tensor<2x3xf32> attributes {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64}
      cond {
        %t = stablehlo.constant dense<false> : tensor<i1>
        stablehlo.return %t : tensor<i1>
      } do {
        %s = stablehlo.sine %a : tensor<2x3xf32>
        stablehlo.return %s : tensor<2x3xf32>
      }
      %w1 = stablehlo.slice %w [2:4, 0:3] {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
      %g1 = stablehlo.while(%a = %w1) : tensor<2x3xf32> attributes {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64}
      cond {
        %t = stablehlo.constant dense<false> : tensor<i1>
        stablehlo.return %t : tensor<i1>
      } do {
        %s = stablehlo.cosine %a : tensor<2x3xf32>
        stablehlo.return %s : tensor<2x3xf32>
      }
      %whole = stablehlo.concatenate %g0, %g1, dim = 0 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
      %sum = stablehlo.add %g, %whole {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4x3xf32>
      "jaxpp.yield"(%sum) : (tensor<4x3xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    %two = sdy.constant dense<2.0> : tensor<4x3xf32>
    %sq = stablehlo.multiply %two, %acc : tensor<4x3xf32>
    %init = sdy.constant dense<0.0> : tensor<f32>
    %sumsq = stablehlo.reduce(%sq init: %init) applies stablehlo.add across dimensions = [0, 1] : (tensor<4x3xf32>, tensor<f32>) -> tensor<f32>
    %new = stablehlo.subtract %w, %sq : tensor<4x3xf32>
    return %new, %sumsq : tensor<4x3xf32>, tensor<f32>
  }
}
