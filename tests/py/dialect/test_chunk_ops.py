"""jaxpp.chunk and jaxpp.assemble: built, read back and printed through the dialect."""

from jax.extend.mlir import ir

from jaxpp_mlir import ir_context
from jaxpp_mlir.dialect import ops

MAIN = """func.func public @main(%a: tensor<8x4xf32>) -> tensor<8x4xf32> {
  return %a : tensor<8x4xf32>
}"""


def test_pieces_of_an_argument_put_back_together():
    module = ir_context.parse_module(MAIN)
    with module.context, ir.Location.unknown():
        block = module.body.operations[0].regions[0].blocks[0]
        ret = block.operations[0]
        at = ir.InsertionPoint(ret)
        first = ops.create_chunk(block.arguments[0], 0, 3)
        second = ops.create_chunk(block.arguments[0], 3, 5)
        at.insert(first)
        at.insert(second)
        whole = ops.create_assemble([first.results[0], second.results[0]])
        at.insert(whole)
        ret.operands[0] = whole.results[0]
        module.operation.verify()
        assert [ops.chunk_rows(first), ops.chunk_rows(second)] == [(0, 3), (3, 5)]
        assert str(first.results[0].type) == "tensor<3x4xf32>"
        assert str(whole.results[0].type) == "tensor<8x4xf32>"
        assert ops.is_chunk(first) and ops.is_assemble(whole) and not ops.is_chunk(whole)
        assert ops.is_jaxpp_op(first) and ops.is_jaxpp_op(whole)
        reparsed = ir_context.parse_module(str(module))
    assert str(reparsed) == str(module)
