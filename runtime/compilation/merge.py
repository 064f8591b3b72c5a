"""One XLA compilation for several small stage programs: the union program.

XLA:CPU builds one LLVM kernel per distinct fusion of a compilation and reuses it
only within that compilation; each compilation also pays a fixed cost (HLO passes,
LLVM setup). A pipelined step of a small model is many small programs (each stage's
forward and backward, the update), most of whose fusions are the same fusions over
the same shapes: compiled one by one, W1's 8 stage programs build 25 kernels in 514 ms
of CPU, while ``jax.jit`` builds 15 for the whole step in 232 ms. Compiled as one
module, the same 8 programs build 15 kernels in 280 ms (``benchmarks/compile_floor.py``).

The union program of members ``P0 .. Pn`` takes a branch index and a union of their
parameters and returns a union of their results; its body is one ``stablehlo.case``
whose branch ``k`` calls ``Pk``'s functions. Parameters and results are shared among
members by type (slots), so the union is about as wide as its widest member:

- a parameter a member donates (``tf.aliasing_output``) takes a *donated slot* of its
  type, which the union donates to a result slot of its own; a member that does not use
  the slot returns the parameter unchanged there (XLA aliases it: no copy);
- any other parameter takes a *plain slot* of its type; a member that does not use one
  is given any array of its type (the runtime keeps one per type);
- any other result takes a *result slot* of its type; a member that does not fill one
  returns zeros there, which XLA writes at every run of that member: the filler.

``plan_merges`` groups the members: programs for the same number of devices (one,
today), small (``PROGRAM_LIMIT_BYTES``), without collectives, callbacks or custom calls,
into unions where no member returns more than ``MAX_EXTRA_RESULTS`` results beyond its
own or writes more than ``FILLER_LIMIT_BYTES`` of fillers per run (W1: the forwards in
one union, the backwards and the update in another, the code before the loop alone).
The runtime runs a member through ``BranchExecutable`` (``branch_executable.py``).

Off unless ``JAXPP_MLIR_MERGE_PROGRAMS`` is ``on`` or ``first-steps`` (``tier_up.py``):
a union is one compilation where its members would compile side by side on the pool's
threads (XLA:CPU builds a compilation's kernels on threads of its own, but runs its passes
once, serially), each rank loads the whole union (W2's: 7.5 ms where a member alone takes
1.2-2.5), and every run passes and returns the union's slots (W2's launch-bound step 10%
slower, S16's 20%). It pays on few cores (W1's first step 50 ms sooner). The numbers:
``benchmarks/union_programs.py``, ``benchmarks/first_step.py``, docs/performance.md.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from collections.abc import Sequence

import numpy as np
from jax.interpreters import mlir as jax_mlir
from jax.interpreters.mlir import ir

from .. import records
from ..dtypes import DTYPE_NAMES
from ..plan import TensorSpec

_logger = logging.getLogger("jaxpp_mlir.runtime.compilation.merge")

#: The most bytes of zeros a member may write per run into result slots it does not fill.
FILLER_LIMIT_BYTES = 64 * 1024
#: The most results a member's run may return beyond its own (each costs the launch an
#: output buffer and an array).
MAX_EXTRA_RESULTS = 2
#: The most bytes of parameters and results a member may have: a union program is for
#: programs whose compile costs more than their runs (larger ones compile alone).
PROGRAM_LIMIT_BYTES = 16 * 1024 * 1024

_ALIAS = "tf.aliasing_output"
_MODULE_ATTRIBUTES = {"mhlo.num_partitions", "mhlo.num_replicas", "sym_name"}
# Operations a union branch must not hold: their runs are not pure functions of their
# operands (collectives, host transfers, callbacks), or XLA treats them per program.
_REFUSED_OPERATIONS = {
    "stablehlo.custom_call",
    "stablehlo.all_reduce",
    "stablehlo.all_gather",
    "stablehlo.all_to_all",
    "stablehlo.reduce_scatter",
    "stablehlo.collective_permute",
    "stablehlo.collective_broadcast",
    "stablehlo.send",
    "stablehlo.recv",
    "stablehlo.infeed",
    "stablehlo.outfeed",
    "stablehlo.partition_id",
    "stablehlo.replica_id",
    "stablehlo.create_token",
    "stablehlo.after_all",
}
# Element types a union slot may have (not complex: no zeros made for those here).
_ELEMENT_DTYPES = {e: d for e, d in DTYPE_NAMES.items() if not d.startswith("complex")}


@records.frozen
class Candidate:
    """A program that may join a union: its text, its plan specs and donations."""

    name: str
    text: str
    input_specs: tuple[TensorSpec, ...]
    output_specs: tuple[TensorSpec, ...]
    aliases: tuple[tuple[int, int], ...]


@records.frozen
class Branch:
    """Member ``index`` of a union: where each of its parameters and results sits in the
    union's (positions count the branch index as parameter 0), and the donated slots
    it does not use, as ``(parameter, result)`` pairs (each run hands the result back
    as the next run's parameter)."""

    index: int
    parameters: tuple[int, ...]
    results: tuple[int, ...]
    passed_through: tuple[tuple[int, int], ...]


@records.frozen
class MergedProgram:
    """A union program: its text, its slots' specs (``parameters[0]`` is the branch
    index), its donations and its members' branches by member text."""

    name: str
    text: str
    parameters: tuple[TensorSpec, ...]
    results: tuple[TensorSpec, ...]
    donated: tuple[tuple[int, int], ...]
    branches: dict[str, Branch]

    @property
    def members(self) -> tuple[str, ...]:
        return tuple(self.branches)


@dataclasses.dataclass
class _Member:
    candidate: Candidate
    module: ir.Module
    params: list[tuple[str, bool]]  # (type, donated) of each parameter
    results: list[tuple[str, int | None]]  # (type, donating parameter or None)

    def counts(self) -> tuple[Counter, Counter, Counter]:
        """(plain parameters, donated parameters, plain results) by type."""
        plain = Counter(t for t, donated in self.params if not donated)
        donated = Counter(t for t, d in self.params if d)
        results = Counter(t for t, source in self.results if source is None)
        return plain, donated, results


def plan_merges(candidates: Sequence[Candidate]) -> list[MergedProgram]:
    """Union programs for ``candidates`` (programs for the same devices), each of at least
    two members; candidates in none compile alone. See the module docstring."""
    context = jax_mlir.make_ir_context()
    with context, ir.Location.unknown():
        members = [m for c in candidates if (m := _member(c)) is not None]
        return [_build(family) for family in _families(members)]


def _member(candidate: Candidate) -> _Member | None:
    """``candidate`` parsed, or None (logged) where it cannot join a union."""
    try:
        module = ir.Module.parse(candidate.text)
    except Exception as e:  # the normal compile reports bad text with its own error
        _logger.debug("%s compiles alone: its text does not parse (%s)", candidate.name, e)
        return None
    reason = _refusal(candidate, module)
    if reason is not None:
        _logger.debug("%s compiles alone: %s", candidate.name, reason)
        return None
    main = _main(module)
    function_type = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
    donated_to = {p: r for p, r in candidate.aliases}
    params = [(str(t), i in donated_to) for i, t in enumerate(function_type.inputs)]
    source_of = {r: p for p, r in candidate.aliases}
    results = [(str(t), source_of.get(i)) for i, t in enumerate(function_type.results)]
    return _Member(candidate, module, params, results)


def _refusal(candidate: Candidate, module: ir.Module) -> str | None:
    """Why ``candidate`` cannot join a union, or None."""
    specs = (*candidate.input_specs, *candidate.output_specs)
    size = sum(_spec_bytes(s) for s in specs)
    if size > PROGRAM_LIMIT_BYTES:
        return f"its parameters and results take {size} bytes"
    extra = set(module.operation.attributes) - _MODULE_ATTRIBUTES
    if extra:
        return f"its module has attributes {sorted(extra)}"
    if any(op.operation.name != "func.func" for op in module.body.operations):
        return "its module holds more than functions"
    main = _main(module)
    if main is None:
        return "it has no public @main"
    reason = _signature_refusal(candidate, main) or _attribute_refusal(candidate, main)
    if reason is not None:
        return reason
    refused = _refused_operation(module)
    return None if refused is None else f"it holds {refused}"


def _signature_refusal(candidate: Candidate, main: ir.OpView) -> str | None:
    """Where ``main``'s types are not the plan's specs of ``candidate``, or None."""
    function_type = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
    for what, types, specs in (
        ("parameter", function_type.inputs, candidate.input_specs),
        ("result", function_type.results, candidate.output_specs),
    ):
        if len(types) != len(specs):
            return f"it has {len(types)} {what}s, the plan {len(specs)}"
        for position, (t, spec) in enumerate(zip(types, specs, strict=True)):
            if _spec_of(t) != spec:
                return f"its {what} {position} is {t}, not the plan's {spec}"
    return None


def _attribute_refusal(candidate: Candidate, main: ir.OpView) -> str | None:
    """Where ``main``'s parameters or results carry more than the plan's donations."""
    if "res_attrs" in main.attributes and any(
        len(ir.DictAttr(a)) for a in ir.ArrayAttr(main.attributes["res_attrs"])
    ):
        return "its results carry attributes"
    declared = set()
    if "arg_attrs" in main.attributes:
        for position, attrs in enumerate(ir.ArrayAttr(main.attributes["arg_attrs"])):
            attrs = ir.DictAttr(attrs)
            names = {attrs[k].name for k in range(len(attrs))}
            if names - {_ALIAS}:
                return f"its parameter {position} carries attributes {sorted(names - {_ALIAS})}"
            if _ALIAS in attrs:
                declared.add((position, ir.IntegerAttr(attrs[_ALIAS]).value))
    if declared != set(candidate.aliases):
        return "its donations are not the plan's"
    return None


def _spec_bytes(spec: TensorSpec) -> int:
    return int(np.prod(spec.shape, dtype=np.int64)) * np.dtype(spec.dtype).itemsize


def _main(module: ir.Module) -> ir.OpView | None:
    for op in module.body.operations:
        if op.operation.name == "func.func" and _symbol(op) == "main":
            visibility = (
                op.attributes["sym_visibility"] if "sym_visibility" in op.attributes else None
            )
            if visibility is None or ir.StringAttr(visibility).value == "public":
                return op
    return None


def _symbol(op: ir.OpView | ir.Operation) -> str:
    return ir.StringAttr(op.attributes["sym_name"]).value


def _spec_of(t: ir.Type) -> TensorSpec | None:
    try:
        tensor = ir.RankedTensorType(t)
    except ValueError:
        return None
    if not tensor.has_static_shape:
        return None
    dtype = _ELEMENT_DTYPES.get(str(tensor.element_type))
    return None if dtype is None else TensorSpec(tuple(tensor.shape), dtype)


def _refused_operation(module: ir.Module) -> str | None:
    found: list[str] = []

    def visit(op):
        if op.operation.name in _REFUSED_OPERATIONS:
            found.append(op.operation.name)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found[0] if found else None


def _slots(members: Sequence[_Member]) -> tuple[Counter, Counter, Counter]:
    """The union's slots by type: (plain parameters, donated parameters, plain results)."""
    plain, donated, results = Counter(), Counter(), Counter()
    for member in members:
        p, d, r = member.counts()
        plain |= p
        donated |= d
        results |= r
    return plain, donated, results


def _filler_bytes(member: _Member, result_slots: Counter) -> int:
    own = member.counts()[2]
    return sum((result_slots[t] - own[t]) * _bytes(t) for t in result_slots)


def _bytes(type_text: str) -> int:
    spec = _spec_of(ir.Type.parse(type_text))
    assert spec is not None  # members are checked
    return _spec_bytes(spec)


def _extra_results(member: _Member, slots: tuple[Counter, Counter, Counter]) -> int:
    """The results a run of ``member`` returns beyond its own in a union of ``slots``."""
    _, donated, results = slots
    return sum(results.values()) + sum(donated.values()) - len(member.results)


def _fits(family: list[_Member]) -> bool:
    slots = _slots(family)
    return all(
        _extra_results(m, slots) <= MAX_EXTRA_RESULTS
        and _filler_bytes(m, slots[2]) <= FILLER_LIMIT_BYTES
        for m in family
    )


def _families(members: list[_Member]) -> list[list[_Member]]:
    """Members grouped into unions of at least two, each member returning at most
    ``MAX_EXTRA_RESULTS`` results beyond its own and writing at most
    ``FILLER_LIMIT_BYTES`` of zeros: the widest first, each into the first family it
    fits, or a family of its own (alone: compiled alone)."""
    families: list[list[_Member]] = []
    for member in sorted(members, key=lambda m: -len(m.results)):
        for family in families:
            if _fits([*family, member]):
                family.append(member)
                break
        else:
            families.append([member])
    for family in families:
        if len(family) == 1:
            _logger.debug("%s compiles alone: no union fits it", family[0].candidate.name)
    return [family for family in families if len(family) >= 2]


def _build(members: Sequence[_Member]) -> MergedProgram:
    """The union program of ``members`` (see the module docstring)."""
    plain_slots, donated_slots, result_slots = _slots(members)
    # Slot positions: parameter 0 is the branch index, then plain slots, then donated ones;
    # results: plain slots, then one per donated slot.
    param_types: list[str] = ["tensor<i32>"]
    plain_at: dict[str, list[int]] = {}
    for t, n in plain_slots.items():
        plain_at[t] = list(range(len(param_types), len(param_types) + n))
        param_types += [t] * n
    result_types: list[str] = []
    result_at: dict[str, list[int]] = {}
    for t, n in result_slots.items():
        result_at[t] = list(range(len(result_types), len(result_types) + n))
        result_types += [t] * n
    donated_at: dict[str, list[tuple[int, int]]] = {}
    for t, n in donated_slots.items():
        donated_at[t] = []
        for _ in range(n):
            donated_at[t].append((len(param_types), len(result_types)))
            param_types.append(t)
            result_types.append(t)
    donated = tuple(pair for pairs in donated_at.values() for pair in pairs)

    union = ir.Module.create()
    first = members[0].module.operation.attributes
    for name in ("mhlo.num_partitions", "mhlo.num_replicas"):
        if name in first:
            union.operation.attributes[name] = first[name]
    branches: dict[str, Branch] = {}
    for index, member in enumerate(members):
        _copy_functions(member.module, _member_prefix(index), union)
        parameters, results, used = _place(member, plain_at, result_at, donated_at)
        passed = tuple(pair for pair in donated if pair not in used)
        branches[member.candidate.text] = Branch(index, tuple(parameters), tuple(results), passed)
    types_in = [ir.Type.parse(t) for t in param_types]
    types_out = [ir.Type.parse(t) for t in result_types]
    _emit_main(union, types_in, types_out, dict(donated), list(branches.values()))
    union.operation.verify()
    return MergedProgram(
        name=union_name([m.candidate.name for m in members]),
        text=str(union),
        parameters=tuple(_spec_of(t) for t in types_in),
        results=tuple(_spec_of(t) for t in types_out),
        donated=donated,
        branches=branches,
    )


def _member_prefix(index: int) -> str:
    return f"member{index}_"


def _emit_main(
    union: ir.Module,
    types_in: list[ir.Type],
    types_out: list[ir.Type],
    donated_to: dict[int, int],
    branches: list[Branch],
) -> None:
    """The union's public ``@main``: a ``case`` on parameter 0 whose branch ``k`` calls
    member ``k``'s ``@main`` on its slots and returns its results in theirs, the donated
    slots it does not use unchanged, and zeros in the rest."""
    main = _function(union, "main", types_in, types_out)
    i32 = ir.IntegerType.get_signless(32)
    main.attributes["arg_attrs"] = ir.ArrayAttr.get(
        [
            ir.DictAttr.get({_ALIAS: ir.IntegerAttr.get(i32, donated_to[p])})
            if p in donated_to
            else ir.DictAttr.get({})
            for p in range(len(types_in))
        ]
    )
    block = main.regions[0].blocks.append(*types_in)
    with ir.InsertionPoint(block):
        case = ir.Operation.create(
            "stablehlo.case",
            results=types_out,
            operands=[block.arguments[0]],
            regions=len(branches),
        )
        for region, branch in zip(case.regions, branches, strict=True):
            with ir.InsertionPoint(region.blocks.append()):
                call = ir.Operation.create(
                    "func.call",
                    results=[types_out[r] for r in branch.results],
                    operands=[block.arguments[p] for p in branch.parameters],
                    attributes={
                        "callee": ir.FlatSymbolRefAttr.get(_member_prefix(branch.index) + "main")
                    },
                )
                returned: list[ir.Value | None] = [None] * len(types_out)
                for value, r in zip(call.results, branch.results, strict=True):
                    returned[r] = value
                for p, r in branch.passed_through:
                    returned[r] = block.arguments[p]
                ir.Operation.create(
                    "stablehlo.return",
                    operands=[
                        _zeros(types_out[r]) if value is None else value
                        for r, value in enumerate(returned)
                    ],
                )
        ir.Operation.create("func.return", operands=list(case.results))


def union_name(members: Sequence[str]) -> str:
    """``union(a,b,c)``, or ``union(a,b,c,+4)`` beyond three members: one word in logs."""
    shown = list(members[:3]) if len(members) > 4 else list(members)
    if len(shown) < len(members):
        shown.append(f"+{len(members) - len(shown)}")
    return "union(" + ",".join(shown) + ")"


def _place(
    member: _Member,
    plain_at: dict[str, list[int]],
    result_at: dict[str, list[int]],
    donated_at: dict[str, list[tuple[int, int]]],
) -> tuple[list[int], list[int], set[tuple[int, int]]]:
    """Member's (parameter positions, result positions, donated slots it uses)."""
    next_plain: Counter = Counter()
    next_result: Counter = Counter()
    next_donated: Counter = Counter()
    parameters: list[int] = []
    pair_of_param: dict[int, tuple[int, int]] = {}
    for i, (t, is_donated) in enumerate(member.params):
        if is_donated:
            pair = donated_at[t][next_donated[t]]
            next_donated[t] += 1
            pair_of_param[i] = pair
            parameters.append(pair[0])
        else:
            parameters.append(plain_at[t][next_plain[t]])
            next_plain[t] += 1
    results: list[int] = []
    for t, source in member.results:
        if source is not None:
            results.append(pair_of_param[source][1])
        else:
            results.append(result_at[t][next_result[t]])
            next_result[t] += 1
    return parameters, results, set(pair_of_param.values())


def _copy_functions(module: ir.Module, prefix: str, into: ir.Module) -> None:
    """Clones ``module``'s functions into ``into``, renamed ``prefix + name``, private."""
    for op in module.body.operations:
        clone = op.operation.clone(ir.InsertionPoint(into.body))
        clone.attributes["sym_name"] = ir.StringAttr.get(prefix + _symbol(clone))
        clone.attributes["sym_visibility"] = ir.StringAttr.get("private")
        for attr in ("arg_attrs", "res_attrs"):
            if attr in clone.attributes:
                del clone.attributes[attr]

        def rename(inner):
            if inner.operation.name == "func.call":
                callee = ir.FlatSymbolRefAttr(inner.attributes["callee"]).value
                inner.attributes["callee"] = ir.FlatSymbolRefAttr.get(prefix + callee)
            return ir.WalkResult.ADVANCE

        clone.walk(rename)


def _function(
    module: ir.Module, name: str, inputs: list[ir.Type], outputs: list[ir.Type]
) -> ir.Operation:
    with ir.InsertionPoint(module.body):
        function = ir.Operation.create(
            "func.func",
            attributes={
                "sym_name": ir.StringAttr.get(name),
                "function_type": ir.TypeAttr.get(ir.FunctionType.get(inputs, outputs)),
                "sym_visibility": ir.StringAttr.get("public"),
            },
            regions=1,
        )
    return function


def _zeros(t: ir.Type) -> ir.Value:
    tensor = ir.RankedTensorType(t)
    element = tensor.element_type
    dtype = _ELEMENT_DTYPES[str(element)]
    if dtype.startswith(("int", "uint")) or dtype == "bool":
        zero = ir.IntegerAttr.get(element, 0)
    else:
        zero = ir.FloatAttr.get(element, 0.0)
    value = ir.DenseElementsAttr.get_splat(tensor, zero)
    return ir.Operation.create(
        "stablehlo.constant", results=[t], attributes={"value": value}
    ).result
