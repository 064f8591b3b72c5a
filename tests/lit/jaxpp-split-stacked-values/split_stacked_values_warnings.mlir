// RUN: jaxpp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-split-stacked-values)' | filecheck %s

// What no rule computes per piece still computes the right value, with a located
// warning naming the op: it reads the concatenation of the pieces (which moves them to
// one rank), or the rows it needs sliced from a whole value.

// A reverse along the layers: its operand is the concatenation of the accumulators'
// pieces, made before it; the sum of squares next to it stays per piece.

// CHECK-LABEL: module @reverse_along_the_layers
// CHECK:           %[[LOOP:.*]]:2 = "jaxpp.loop"
// CHECK:           %[[WHOLE:.*]] = stablehlo.concatenate %[[LOOP]]#0, %[[LOOP]]#1, dim = 0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:      %[[REV:.*]] = stablehlo.reverse %[[WHOLE]], dims = [0] : tensor<4x3xf32>
// CHECK-NEXT:      stablehlo.multiply %[[LOOP]]#0, %[[LOOP]]#0 : tensor<2x3xf32>
// CHECK-NEXT:      stablehlo.multiply %[[LOOP]]#1, %[[LOOP]]#1 : tensor<2x3xf32>
// CHECK:           return %[[REV]]
module @reverse_along_the_layers attributes {jaxpp.num_stages = 2 : i64} {
  func.func @main(%w: tensor<4x3xf32>, %zeros: tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>) {
    %acc = "jaxpp.loop"(%zeros) ({
    ^bb0(%i: tensor<i32>, %g: tensor<4x3xf32>):
      %w0 = stablehlo.slice %w [0:2, 0:3] {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
      %g0 = stablehlo.while(%a = %w0) : tensor<2x3xf32> attributes {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64}
      cond {
        %t = stablehlo.constant dense<false> : tensor<i1>
        stablehlo.return %t : tensor<i1>
      } do {
        stablehlo.return %a : tensor<2x3xf32>
      }
      %w1 = stablehlo.slice %w [2:4, 0:3] {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
      %g1 = stablehlo.while(%a = %w1) : tensor<2x3xf32> attributes {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64}
      cond {
        %t = stablehlo.constant dense<false> : tensor<i1>
        stablehlo.return %t : tensor<i1>
      } do {
        stablehlo.return %a : tensor<2x3xf32>
      }
      %whole = stablehlo.concatenate %g0, %g1, dim = 0 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
      %sum = stablehlo.add %g, %whole {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4x3xf32>
      "jaxpp.yield"(%sum) : (tensor<4x3xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    // expected-warning @+1 {{'stablehlo.reverse' reads the stacked value(s) tensor<4x3xf32> whole: no rule computes it per piece, so the pieces, held by the stages that own their rows, are concatenated here, which moves them to one rank}}
    %rev = stablehlo.reverse %acc, dims = [0] : tensor<4x3xf32>
    %sq = stablehlo.multiply %acc, %acc : tensor<4x3xf32>
    return %rev, %sq : tensor<4x3xf32>, tensor<4x3xf32>
  }
}

// -----

// A sum over the layers whose init is not 0: each piece's partial sum would add it
// again, so the reduce reads the concatenation.

// CHECK-LABEL: module @sum_with_an_init
// CHECK:           %[[LOOP:.*]]:2 = "jaxpp.loop"
// CHECK:           %[[WHOLE:.*]] = stablehlo.concatenate %[[LOOP]]#0, %[[LOOP]]#1, dim = 0
// CHECK-NEXT:      stablehlo.reduce(%[[WHOLE]] init: %{{.*}}) applies stablehlo.add across dimensions = [0, 1] : (tensor<4x3xf32>, tensor<f32>) -> tensor<f32>
module @sum_with_an_init attributes {jaxpp.num_stages = 2 : i64} {
  func.func @main(%w: tensor<4x3xf32>, %zeros: tensor<4x3xf32>) -> tensor<f32> {
    %acc = "jaxpp.loop"(%zeros) ({
    ^bb0(%i: tensor<i32>, %g: tensor<4x3xf32>):
      %w0 = stablehlo.slice %w [0:2, 0:3] {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
      %g0 = stablehlo.while(%a = %w0) : tensor<2x3xf32> attributes {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64}
      cond {
        %t = stablehlo.constant dense<false> : tensor<i1>
        stablehlo.return %t : tensor<i1>
      } do {
        stablehlo.return %a : tensor<2x3xf32>
      }
      %w1 = stablehlo.slice %w [2:4, 0:3] {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
      %g1 = stablehlo.while(%a = %w1) : tensor<2x3xf32> attributes {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64}
      cond {
        %t = stablehlo.constant dense<false> : tensor<i1>
        stablehlo.return %t : tensor<i1>
      } do {
        stablehlo.return %a : tensor<2x3xf32>
      }
      %whole = stablehlo.concatenate %g0, %g1, dim = 0 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
      %sum = stablehlo.add %g, %whole {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4x3xf32>
      "jaxpp.yield"(%sum) : (tensor<4x3xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    %one = stablehlo.constant dense<1.0> : tensor<f32>
    // expected-warning @+1 {{'stablehlo.reduce' reads the stacked value(s) tensor<4x3xf32> whole}}
    %total = stablehlo.reduce(%acc init: %one) applies stablehlo.add across dimensions = [0, 1] : (tensor<4x3xf32>, tensor<f32>) -> tensor<f32>
    return %total : tensor<f32>
  }
}

// -----

// A per-layer scale computed whole (an iota along the layers): each piece's add reads
// its rows, sliced from it.

// CHECK-LABEL: module @whole_value_next_to_pieces
// CHECK:           %[[LOOP:.*]]:2 = "jaxpp.loop"
// CHECK:           %[[IOTA:.*]] = stablehlo.iota dim = 0 : tensor<4x3xf32>
// CHECK-NEXT:      %[[ROWS0:.*]] = stablehlo.slice %[[IOTA]] [0:2, 0:3] : (tensor<4x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:      %[[ROWS1:.*]] = stablehlo.slice %[[IOTA]] [2:4, 0:3] : (tensor<4x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:      stablehlo.add %[[LOOP]]#0, %[[ROWS0]] : tensor<2x3xf32>
// CHECK-NEXT:      stablehlo.add %[[LOOP]]#1, %[[ROWS1]] : tensor<2x3xf32>
module @whole_value_next_to_pieces attributes {jaxpp.num_stages = 2 : i64} {
  func.func @main(%w: tensor<4x3xf32>, %zeros: tensor<4x3xf32>) -> tensor<4x3xf32> {
    %acc = "jaxpp.loop"(%zeros) ({
    ^bb0(%i: tensor<i32>, %g: tensor<4x3xf32>):
      %w0 = stablehlo.slice %w [0:2, 0:3] {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
      %g0 = stablehlo.while(%a = %w0) : tensor<2x3xf32> attributes {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64}
      cond {
        %t = stablehlo.constant dense<false> : tensor<i1>
        stablehlo.return %t : tensor<i1>
      } do {
        stablehlo.return %a : tensor<2x3xf32>
      }
      %w1 = stablehlo.slice %w [2:4, 0:3] {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
      %g1 = stablehlo.while(%a = %w1) : tensor<2x3xf32> attributes {jaxpp.kind = "bwd", jaxpp.stage = 1 : i64}
      cond {
        %t = stablehlo.constant dense<false> : tensor<i1>
        stablehlo.return %t : tensor<i1>
      } do {
        stablehlo.return %a : tensor<2x3xf32>
      }
      %whole = stablehlo.concatenate %g0, %g1, dim = 0 {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
      %sum = stablehlo.add %g, %whole {jaxpp.kind = "bwd", jaxpp.stage = 0 : i64} : tensor<4x3xf32>
      "jaxpp.yield"(%sum) : (tensor<4x3xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    %scale = stablehlo.iota dim = 0 : tensor<4x3xf32>
    // expected-warning @+1 {{'stablehlo.add' reads stacked pieces with a whole tensor<4x3xf32> ('stablehlo.iota' at}}
    %shifted = stablehlo.add %acc, %scale : tensor<4x3xf32>
    return %shifted : tensor<4x3xf32>
  }
}

// -----

// A stage reads the whole parameter besides its rows: it reads the concatenation of
// the chunks, made once at the top of @main.

// CHECK-LABEL: module @whole_read_in_a_stage
// CHECK:           %[[W0:.*]] = "jaxpp.chunk"(%arg0) {jaxpp.rows = 2 : i64, jaxpp.stage = 0 : i64, jaxpp.start = 0 : i64}
// CHECK-NEXT:      %[[W1:.*]] = "jaxpp.chunk"(%arg0) {jaxpp.rows = 2 : i64, jaxpp.stage = 1 : i64, jaxpp.start = 2 : i64}
// CHECK-NEXT:      %[[W:.*]] = stablehlo.concatenate %[[W0]], %[[W1]], dim = 0
// CHECK:           stablehlo.cosine %[[W]] {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64}
module @whole_read_in_a_stage attributes {jaxpp.num_stages = 2 : i64} {
  func.func @main(%w: tensor<4x3xf32>, %start: tensor<4x3xf32>) -> tensor<4x3xf32> {
    %acc = "jaxpp.loop"(%start) ({
    ^bb0(%i: tensor<i32>, %g: tensor<4x3xf32>):
      %w0 = stablehlo.slice %w [0:2, 0:3] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
      %g0 = stablehlo.while(%a = %w0) : tensor<2x3xf32> attributes {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64}
      cond {
        %t = stablehlo.constant dense<false> : tensor<i1>
        stablehlo.return %t : tensor<i1>
      } do {
        stablehlo.return %a : tensor<2x3xf32>
      }
      %w1 = stablehlo.slice %w [2:4, 0:3] {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
      %g1 = stablehlo.while(%a = %w1) : tensor<2x3xf32> attributes {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64}
      cond {
        %t = stablehlo.constant dense<false> : tensor<i1>
        stablehlo.return %t : tensor<i1>
      } do {
        stablehlo.return %a : tensor<2x3xf32>
      }
      // expected-warning @+1 {{'stablehlo.cosine' reads the stacked argument tensor<4x3xf32> whole, while stages hold its rows as chunks: it reads their concatenation, which moves them to one rank}}
      %c = stablehlo.cosine %w {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<4x3xf32>
      %whole = stablehlo.concatenate %g0, %g1, dim = 0 {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
      %x = stablehlo.multiply %whole, %c {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : tensor<4x3xf32>
      "jaxpp.yield"(%x) : (tensor<4x3xf32>) -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    return %acc : tensor<4x3xf32>
  }
}

// -----

// Two stages read overlapping rows: the argument stays whole (no chunk), each stage
// slicing its rows.

// CHECK-LABEL: module @overlapping_rows
// CHECK-NOT:     jaxpp.chunk
// CHECK:         stablehlo.slice %arg0 [0:3, 0:3]
// CHECK:         stablehlo.slice %arg0 [2:4, 0:3]
module @overlapping_rows attributes {jaxpp.num_stages = 2 : i64} {
  func.func @main(%w: tensor<4x3xf32>) -> (tensor<3x3xf32>, tensor<2x3xf32>) {
    %r:2 = "jaxpp.loop"() ({
    ^bb0(%i: tensor<i32>):
      %w0 = stablehlo.slice %w [0:3, 0:3] {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64} : (tensor<4x3xf32>) -> tensor<3x3xf32>
      %g0 = stablehlo.while(%a = %w0) : tensor<3x3xf32> attributes {jaxpp.kind = "fwd", jaxpp.stage = 0 : i64}
      cond {
        %t = stablehlo.constant dense<false> : tensor<i1>
        stablehlo.return %t : tensor<i1>
      } do {
        stablehlo.return %a : tensor<3x3xf32>
      }
      // expected-warning @+1 {{rows [2, 4) of a stacked argument (tensor<4x3xf32>) overlap rows [0, 3) read at}}
      %w1 = stablehlo.slice %w [2:4, 0:3] {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
      %g1 = stablehlo.while(%a = %w1) : tensor<2x3xf32> attributes {jaxpp.kind = "fwd", jaxpp.stage = 1 : i64}
      cond {
        %t = stablehlo.constant dense<false> : tensor<i1>
        stablehlo.return %t : tensor<i1>
      } do {
        stablehlo.return %a : tensor<2x3xf32>
      }
      "jaxpp.yield"() : () -> ()
    }) {jaxpp.num_microbatches = 2 : i64} : () -> (tensor<3x3xf32>, tensor<2x3xf32>)
    return %r#0, %r#1 : tensor<3x3xf32>, tensor<2x3xf32>
  }
}
