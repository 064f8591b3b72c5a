"""Standalone StableHLO modules for the runtime: one per stage function, or a fused group."""

from __future__ import annotations

import math
from collections.abc import Sequence

from jax.interpreters.mlir import ir

from jaxpp_mlir import _jax_compat
from jaxpp_mlir._jax_compat import func, sdy
from jaxpp_mlir.dialect.vocabulary import SHARDING_ATTR
from jaxpp_mlir.ir.utils import find_main
from jaxpp_mlir.runtime import records


@records.frozen(slots=True)
class PartInput:
    """A fused part's operand that is input ``index`` of the fused module."""

    index: int


@records.frozen(slots=True)
class PartResult:
    """A fused part's operand that is result ``index`` of the earlier part ``part``."""

    part: int
    index: int


# Where a fused part's operand comes from.
Source = PartInput | PartResult


# What the printer shows of an op without debug info: everything but its locations.
# None (jaxlib 0.10): no structural equivalence in the bindings, every module is printed.
_PRINTED_PARTS = _jax_compat.ignore_locations_equivalence()


class StageFunctions:
    """A partitioned module's functions, for printing many standalone modules from it.

    Its symbol table is built once, and one empty module with its meshes (see
    ``_new_module``) holds each function while it is printed. Stage functions are
    often copies of each other (one per rank, one per identical layer): a module whose
    ``@main`` is structurally equivalent to one printed before has that one's text.
    """

    def __init__(self, module: ir.Module):
        self.module = module
        self._symbols = ir.SymbolTable(module.operation)
        self._shell: ir.Module | None = None
        # Structural hash -> each printed @main (a detached clone) with its module's text.
        self._printed: dict[int, list[tuple[ir.Operation, str]]] = {}
        self._aliased_arg_attrs: dict[tuple[ir.Attribute, tuple], ir.Attribute] = {}

    def function(self, name: str) -> ir.Operation:
        return self._symbols[name].operation

    def standalone(self, callee: str, aliases: dict[int, int] | None) -> str:
        """See ``standalone_module``."""
        with self.module.context, ir.Location.unknown():
            if self._shell is None:
                self._shell = _new_module(self.module)
            clone = self.function(callee).clone(ip=ir.InsertionPoint(self._shell.body))
            clone = clone.operation
            try:
                clone.attributes["sym_name"] = ir.StringAttr.get("main")
                clone.attributes["sym_visibility"] = ir.StringAttr.get("public")
                if aliases:
                    clone.attributes["arg_attrs"] = self._with_aliases(clone, aliases)
                if _PRINTED_PARTS is None:
                    return self._shell.operation.get_asm(assume_verified=True)
                printed = self._printed.setdefault(clone.structural_hash(_PRINTED_PARTS), [])
                for main, text in printed:
                    if clone.is_structurally_equivalent(main, _PRINTED_PARTS):
                        return text
                # The function was verified in the partitioned module and the shell adds
                # only its meshes: the printer need not verify the module again.
                text = self._shell.operation.get_asm(assume_verified=True)
                clone.detach_from_parent()
                printed.append((clone, text))
                clone = None
                return text
            finally:
                if clone is not None:
                    clone.erase()

    def _with_aliases(self, function: ir.Operation, aliases: dict[int, int]) -> ir.Attribute:
        """``_with_aliases``, once per argument attributes (or function type) and aliases."""
        attributes = function.attributes
        if "arg_attrs" in attributes:
            key = (attributes["arg_attrs"], tuple(aliases.items()))
        else:
            key = (attributes["function_type"], tuple(aliases.items()))
        if key not in self._aliased_arg_attrs:
            self._aliased_arg_attrs[key] = _with_aliases(function, aliases)
        return self._aliased_arg_attrs[key]


def standalone_module(
    functions: StageFunctions, callee: str, aliases: dict[int, int] | None = None
) -> str:
    """``@callee`` of the partitioned module as the public ``@main`` of a new module.

    The function keeps its argument and result attributes (the ``sdy.sharding``
    of each boundary value on a sharded step). ``aliases`` maps an argument to
    the result that may reuse its buffer (``tf.aliasing_output``): XLA then
    writes that result in place and the runtime's input buffer is consumed.
    """
    return functions.standalone(callee, aliases)


def boundary_shardings(
    functions: StageFunctions, callee: str
) -> tuple[list[ir.Attribute | None], list[ir.Attribute | None]]:
    """The ``sdy.sharding`` of each argument and result of ``@callee`` (None where absent)."""
    function = functions.function(callee)
    attributes = function.attributes
    if "arg_attrs" in attributes:
        arguments = [a.get(SHARDING_ATTR) for a in _attr_dicts(function, "arg_attrs")]
    else:
        arguments = [None] * len(function.regions[0].blocks[0].arguments)
    if "res_attrs" in attributes:
        results = [r.get(SHARDING_ATTR) for r in _attr_dicts(function, "res_attrs")]
    else:
        results = [None] * len(ir.FunctionType(attributes["function_type"].value).results)
    return arguments, results


def donated_arguments(module: ir.Module) -> set[int]:
    """Arguments of ``@main`` that the lowering marked as donated."""
    main = find_main(module)
    if main is None or "arg_attrs" not in main.attributes:
        return set()
    donated = set()
    for index, attrs in enumerate(ir.ArrayAttr(main.attributes["arg_attrs"])):
        attrs = ir.DictAttr(attrs)
        if "tf.aliasing_output" in attrs or "jax.buffer_donor" in attrs:
            donated.add(index)
    return donated


def fused_module(
    functions: StageFunctions,
    callees: Sequence[str],
    wiring: Sequence[Sequence[Source]],
    input_types: Sequence[ir.Type],
    aliases: dict[int, int] | None = None,
    kept: Sequence[int] | None = None,
) -> str:
    """A module whose ``@main`` calls ``callees`` in order and returns all their results
    (only those at the positions ``kept`` of the parts' results in order, if given).

    XLA compiles it as one executable, so it can fuse across the parts. On a
    sharded step ``@main`` carries the mesh and, on each argument, the
    ``sdy.sharding`` of the first part argument it feeds and, on each result,
    that of the part result it returns: the same boundary layouts the parts
    have as standalone modules, so the runtime moves values exactly as it
    would between unfused tasks. ``aliases`` is as for ``standalone_module``.
    """
    with functions.module.context, ir.Location.unknown():
        fused = _new_module(functions.module)
        for callee in dict.fromkeys(callees):
            functions.function(callee).clone(ip=ir.InsertionPoint(fused.body))
        parts = [functions.function(callee) for callee in callees]
        result_types = [
            t for f in parts for t in ir.FunctionType(f.attributes["function_type"].value).results
        ]
        kept = range(len(result_types)) if kept is None else kept
        with ir.InsertionPoint(fused.body):
            main = func.FuncOp("main", (list(input_types), [result_types[i] for i in kept]))
        argument_shardings, result_shardings = fused_boundary_shardings(
            functions, callees, wiring, len(input_types), kept
        )
        arg_attrs = [{SHARDING_ATTR: s} if s is not None else {} for s in argument_shardings]
        res_attrs = [{SHARDING_ATTR: s} if s is not None else {} for s in result_shardings]
        _set_aliases(arg_attrs, aliases or {})
        if any(arg_attrs):
            main.attributes["arg_attrs"] = _attr_array(arg_attrs)
        if any(res_attrs):
            main.attributes["res_attrs"] = _attr_array(res_attrs)
        entry = main.add_entry_block()
        with ir.InsertionPoint(entry):
            part_results: list[list[ir.Value]] = []
            for callee, function, sources in zip(callees, parts, wiring, strict=True):
                operands = [
                    entry.arguments[s.index]
                    if isinstance(s, PartInput)
                    else part_results[s.part][s.index]
                    for s in sources
                ]
                types = ir.FunctionType(function.attributes["function_type"].value).results
                call = func.CallOp(list(types), ir.FlatSymbolRefAttr.get(callee), operands)
                part_results.append(list(call.results))
            returned = [v for results in part_results for v in results]
            func.ReturnOp([returned[i] for i in kept])
        return str(fused)


def fused_boundary_shardings(
    functions: StageFunctions,
    callees: Sequence[str],
    wiring: Sequence[Sequence[Source]],
    num_inputs: int,
    kept: Sequence[int] | None = None,
) -> tuple[list[ir.Attribute | None], list[ir.Attribute | None]]:
    """The ``sdy.sharding`` of each argument and result of a fused group's ``@main``.

    Input ``i`` takes the sharding of the first part argument wired to it;
    the results are the parts' results, in order (those at positions ``kept``).
    """
    arguments: list[ir.Attribute | None] = [None] * num_inputs
    results: list[ir.Attribute | None] = []
    for callee, sources in zip(callees, wiring, strict=True):
        part_arguments, part_results = boundary_shardings(functions, callee)
        for source, sharding in zip(sources, part_arguments, strict=True):
            if isinstance(source, PartInput) and arguments[source.index] is None:
                arguments[source.index] = sharding
        results += part_results
    if kept is not None:
        results = [results[i] for i in kept]
    return arguments, results


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


def _attr_dicts(function: ir.Operation, key: str) -> list[dict[str, ir.Attribute]]:
    """``function``'s ``arg_attrs`` or ``res_attrs`` (present) as one dict per argument or
    result."""
    return [
        {named.name: named.attr for named in ir.DictAttr(attrs)}
        for attrs in ir.ArrayAttr(function.attributes[key])
    ]


def _attr_array(dicts: Sequence[dict[str, ir.Attribute]]) -> ir.Attribute:
    return ir.ArrayAttr.get([ir.DictAttr.get(d) for d in dicts])


def _with_aliases(function: ir.Operation, aliases: dict[int, int]) -> ir.Attribute:
    """``function``'s ``arg_attrs`` with argument ``a`` marked as reusable for result
    ``aliases[a]`` (``tf.aliasing_output``); the other arguments' dicts are kept as they are."""
    if "arg_attrs" in function.attributes:
        arg_attrs = list(ir.ArrayAttr(function.attributes["arg_attrs"]))
    else:
        num_args = len(ir.FunctionType(function.attributes["function_type"].value).inputs)
        arg_attrs = [ir.DictAttr.get({})] * num_args
    i32 = ir.IntegerType.get_signless(32)
    for argument, result in aliases.items():
        attrs = {named.name: named.attr for named in ir.DictAttr(arg_attrs[argument])}
        attrs["tf.aliasing_output"] = ir.IntegerAttr.get(i32, result)
        arg_attrs[argument] = ir.DictAttr.get(attrs)
    return ir.ArrayAttr.get(arg_attrs)


def _set_aliases(arg_attrs: list[dict[str, ir.Attribute]], aliases: dict[int, int]) -> None:
    """Marks argument ``a`` as reusable for result ``aliases[a]`` (``tf.aliasing_output``)."""
    i32 = ir.IntegerType.get_signless(32)
    for argument, result in aliases.items():
        arg_attrs[argument]["tf.aliasing_output"] = ir.IntegerAttr.get(i32, result)
