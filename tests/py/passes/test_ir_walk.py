"""``ir_utils.walk`` (MLIR's pre-order walk): every nested op once, parents before their
regions' ops, regions and blocks in order, the walked op itself left out."""

from jax.extend.mlir import ir

from jaxpp_mlir import ir_context
from jaxpp_mlir.ir import utils as ir_utils

NESTED = """
module {
  func.func private @helper(%arg0: tensor<f32>) -> tensor<f32> {
    %0 = stablehlo.negate %arg0 : tensor<f32>
    return %0 : tensor<f32>
  }
  func.func public @main(%arg0: tensor<f32>, %arg1: tensor<i32>) -> tensor<f32> {
    %c = stablehlo.constant dense<3> : tensor<i32>
    %0:2 = stablehlo.while(%iterArg = %arg0, %iterArg_0 = %arg1) : tensor<f32>, tensor<i32>
    cond {
      %1 = stablehlo.compare LT, %iterArg_0, %c : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %1:2 = stablehlo.while(%a = %iterArg, %b = %iterArg_0) : tensor<f32>, tensor<i32>
      cond {
        %3 = stablehlo.compare LT, %b, %c : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %3 : tensor<i1>
      } do {
        %3 = func.call @helper(%a) : (tensor<f32>) -> tensor<f32>
        stablehlo.return %3, %b : tensor<f32>, tensor<i32>
      }
      %2 = stablehlo.add %1#1, %c : tensor<i32>
      stablehlo.return %1#0, %2 : tensor<f32>, tensor<i32>
    }
    return %0#0 : tensor<f32>
  }
}
"""


def _recursive_preorder(op: ir.Operation) -> list[ir.Operation]:
    found = []
    for region in op.regions:
        for block in region.blocks:
            for nested in block.operations:
                found.append(nested.operation)
                found.extend(_recursive_preorder(nested.operation))
    return found


def test_walk_is_the_recursive_preorder():
    module = ir_context.parse_module(NESTED)
    walked = list(ir_utils.walk(module.operation))
    assert walked == _recursive_preorder(module.operation)
    assert module.operation not in walked
    names = [op.name for op in walked]
    assert names == [
        "func.func",
        "stablehlo.negate",
        "func.return",
        "func.func",
        "stablehlo.constant",
        "stablehlo.while",
        "stablehlo.compare",
        "stablehlo.return",
        "stablehlo.while",
        "stablehlo.compare",
        "stablehlo.return",
        "func.call",
        "stablehlo.return",
        "stablehlo.add",
        "stablehlo.return",
        "func.return",
    ]


def test_walk_of_an_op_without_regions_is_empty():
    module = ir_context.parse_module(NESTED)
    negate = next(op for op in ir_utils.walk(module.operation) if op.name == "stablehlo.negate")
    assert list(ir_utils.walk(negate)) == []


def test_collect_ops_finds_every_nested_op_of_a_name():
    module = ir_context.parse_module(NESTED)
    loops = ir_utils.collect_ops(module.operation, "stablehlo.while")
    assert len(loops) == 2
    assert ir_utils.is_inside(loops[1], loops[0])
