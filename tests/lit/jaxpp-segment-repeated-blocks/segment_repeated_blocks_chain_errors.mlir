// RUN: jaxpp-opt %s --verify-diagnostics --pass-pipeline='builtin.module(jaxpp-assign-segments{chained=true optional=true},jaxpp-segment-layer-scans{chained=true optional=true},jaxpp-segment-repeated-blocks{chained=true optional=false})'

// The segment slot's chain as partition runs it: no markers, no layer scan, no repeated
// blocks. The last segmenter says everything the chain looked for, in its order.
module @nothing_to_segment {
  // expected-error @+1 {{no stage markers found in the step (nothing_to_segment): mark the end of every stage with jaxpp_mlir.pipeline_enter_stage (the last one after the last layer), or pass split_points=(...) naming the modules where stages start; looked for stage markers at the top level of the step (of the function treduce applies to each microbatch); stage markers at the end of the body of a layer scan (jax.lax.scan, flax nn.scan or nnx.scan over stacked layer parameters); a layer scan without markers (a stablehlo.while of 2 or more iterations reading a stacked parameter [L, ...] a row at a time at its counter); repeated blocks without markers}}
  func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.tanh %x : tensor<2x4xf32> loc("jit(step)/jvp(Model)/layers_0/tanh")
    %1 = stablehlo.sine %0 : tensor<2x4xf32> loc("jit(step)/jvp(Model)/head/sin")
    return %1 : tensor<2x4xf32>
  }
}
