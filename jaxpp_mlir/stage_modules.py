"""Standalone StableHLO modules for the runtime: one per stage function, or a fused group."""

from __future__ import annotations

import math
from collections.abc import Sequence

from jax.extend.mlir import ir
from jax.extend.mlir.dialects import func, sdy

# Where a fused part's operand comes from: ("input", i) is input i of the fused
# module, ("part", j, r) is result r of the earlier part j.
Source = tuple[str, int] | tuple[str, int, int]


def standalone_module(module: ir.Module, callee: str, aliases: dict[int, int] | None = None) -> str:
    """``@callee`` of the partitioned module as the public ``@main`` of a new module.

    ``aliases`` maps an argument to the result that may reuse its buffer
    (``tf.aliasing_output``): XLA then writes that result in place and the
    runtime's input buffer is consumed.
    """
    with module.context, ir.Location.unknown():
        standalone = _new_module(module)
        clone = _function(module, callee).clone(ip=ir.InsertionPoint(standalone.body))
        clone.attributes["sym_name"] = ir.StringAttr.get("main")
        clone.attributes["sym_visibility"] = ir.StringAttr.get("public")
        if aliases:
            num_args = len(clone.regions[0].blocks[0].arguments)
            i32 = ir.IntegerType.get_signless(32)
            arg_attrs = [
                ir.DictAttr.get(
                    {"tf.aliasing_output": ir.IntegerAttr.get(i32, aliases[i])}
                    if i in aliases
                    else {}
                )
                for i in range(num_args)
            ]
            clone.attributes["arg_attrs"] = ir.ArrayAttr.get(arg_attrs)
        return str(standalone)


def donated_arguments(module: ir.Module) -> set[int]:
    """Arguments of ``@main`` that the lowering marked as donated."""
    main = _function(module, "main")
    if "arg_attrs" not in main.attributes:
        return set()
    donated = set()
    for index, attrs in enumerate(ir.ArrayAttr(main.attributes["arg_attrs"])):
        attrs = ir.DictAttr(attrs)
        if "tf.aliasing_output" in attrs or "jax.buffer_donor" in attrs:
            donated.add(index)
    return donated


def fused_module(
    module: ir.Module,
    callees: Sequence[str],
    wiring: Sequence[Sequence[Source]],
    input_types: Sequence[ir.Type],
) -> str:
    """A module whose ``@main`` calls ``callees`` in order and returns all their results.

    XLA compiles it as one executable, so it can fuse across the parts.
    """
    with module.context, ir.Location.unknown():
        fused = _new_module(module)
        for callee in dict.fromkeys(callees):
            _function(module, callee).clone(ip=ir.InsertionPoint(fused.body))
        functions = [_function(module, callee) for callee in callees]
        result_types = [
            t
            for f in functions
            for t in ir.FunctionType(f.attributes["function_type"].value).results
        ]
        with ir.InsertionPoint(fused.body):
            main = func.FuncOp("main", (list(input_types), result_types))
        entry = main.add_entry_block()
        with ir.InsertionPoint(entry):
            part_results: list[list[ir.Value]] = []
            for callee, function, sources in zip(callees, functions, wiring, strict=True):
                operands = [
                    entry.arguments[s[1]] if s[0] == "input" else part_results[s[1]][s[2]]
                    for s in sources
                ]
                types = ir.FunctionType(function.attributes["function_type"].value).results
                call = func.CallOp(list(types), ir.FlatSymbolRefAttr.get(callee), operands)
                part_results.append(list(call.results))
            func.ReturnOp([v for results in part_results for v in results])
        return str(fused)


def _new_module(source: ir.Module) -> ir.Module:
    """An empty module with ``source``'s meshes, for ``num_partitions`` devices."""
    module = ir.Module.create()
    num_partitions = 1
    for op in source.body.operations:
        if op.operation.name == "sdy.mesh":
            op.operation.clone(ip=ir.InsertionPoint(module.body))
            mesh = sdy.MeshAttr(op.operation.attributes["mesh"])
            sizes = [sdy.MeshAxisAttr(axis).size for axis in mesh.axes]
            num_partitions = max(num_partitions, math.prod(sizes))
    i32 = ir.IntegerType.get_signless(32)
    module.operation.attributes["mhlo.num_partitions"] = ir.IntegerAttr.get(i32, num_partitions)
    module.operation.attributes["mhlo.num_replicas"] = ir.IntegerAttr.get(i32, 1)
    return module


def _function(module: ir.Module, name: str) -> ir.Operation:
    return ir.SymbolTable(module.operation)[name].operation
