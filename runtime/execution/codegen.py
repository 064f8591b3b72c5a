"""Dispatch code: straight-line Python functions over the slot list, and what each does.

Each instruction kind (``runtime/instructions``) turns its resolved steps into
operations through a ``CodeGen``: an ``OpShape`` (written once per kind and shape by
``CodeGen.shape``) is a few statements over the slot list ``env``, compiled once, and
``OpShape.make`` binds one operation's slots and constants (executables, result handlers,
shardings) into ``op(env)``; ``add`` appends it with the facts the tracer reads
(``OpFacts``), so tracing never asks what produced an operation.
"""

from __future__ import annotations

import functools
import re
import threading
import types
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Sharding

from .. import _jax_compat as jc
from ..executable import Executable
from ..plan import ExecutionPlan, Instruction
from .slot_table import Slot

Op = Callable[[list], None]


class OpFacts:
    """What one generated operation does, for the tracer (made with the operation, so
    kept to references: the tracer works out the rest when a trace is recorded).

    ``name`` is its dispatch kind (``run``, ``send``, ``copy``, ``reshard``,
    ``free``); ``device`` says what device work it starts (``task``: a launch, whose
    run is ``instructions[0]``; ``transfer``; or None for host bookkeeping only);
    ``outputs`` are the slots it fills; ``instructions`` the ones it carries out (a
    run, a send, a group of receives) and ``flows`` the receives whose transfers it
    completes (each group's first operation only).
    """

    __slots__ = ("device", "flows", "instructions", "name", "outputs", "rank")

    def __init__(
        self,
        name: str,
        rank: int,
        device: str | None,
        outputs: tuple[int, ...],
        instructions: tuple[Instruction, ...],
        flows: tuple[Instruction, ...] = (),
    ):
        self.name = name
        self.rank = rank
        self.device = device
        self.outputs = outputs
        self.instructions = instructions
        self.flows = flows


class CodeGen:
    """The operations of one resolved plan, as its kinds generate them, in order."""

    def __init__(
        self,
        plan: ExecutionPlan,
        slots: list[Slot],
        free_after: list[list[int]],
        executables: Mapping[str, Executable],
    ):
        self.plan = plan
        self.slots = slots
        self.free_after = free_after
        self.executables = executables
        self.ops: list[Op] = []
        self.ends: list[int] = []  # per operation, how many instructions are done after it
        # One result handler per (shape, dtype, sharding): runs of a stage share them.
        self.result_handler = functools.cache(_result_handler)
        self._handlers: dict[tuple, list] = {}  # (executable, *output shardings) -> handlers
        self._shapes: dict[Hashable, OpShape] = {}

    def shape(self, key: Hashable, write: Callable[[], OpShape]) -> OpShape:
        """The operation shape of ``key`` (a kind's own), written by ``write`` once."""
        shape = self._shapes.get(key)
        if shape is None:
            shape = self._shapes[key] = write()
        return shape

    def result_handlers(self, executable: str, outputs: Sequence[int]) -> list:
        """The result handlers of a run of ``executable`` into slots ``outputs`` (one list
        per executable and output shardings, shared by its runs)."""
        slots = self.slots
        key = (executable, *[slots[s].sharding for s in outputs])
        handlers = self._handlers.get(key)
        if handlers is None:
            specs = self.plan.executables[executable].output_specs
            handlers = self._handlers[key] = [
                self.result_handler(tuple(spec.shape), spec.dtype, sharding)
                for spec, sharding in zip(specs, key[1:], strict=True)
            ]
        return handlers

    def add(self, op: Op, end: int, facts: OpFacts) -> None:
        """Appends ``op``; ``end`` instructions are done after it."""
        op.facts = facts  # type: ignore[attr-defined]
        self.ops.append(op)
        self.ends.append(end)


_COMMENT = re.compile(r"  # [^\n]*")
# Op factories by template (the op's statements with its slots and constants as
# parameters): operations of the same shape share one compile.
_FACTORIES: dict[tuple[str, tuple[str, ...]], Callable[..., Op]] = {}
_FACTORIES_LOCK = threading.Lock()


class Fields:
    """Writes the statements of an operation shape (``OpShape``): each slot and each
    comment a numbered format field, filled per operation (in the order written)."""

    def __init__(self) -> None:
        self.count = 0
        self.slot_fields: list[int] = []  # the fields that are slots

    def slot(self) -> str:
        """``env[{k}]``: a slot read or written."""
        self.slot_fields.append(self.count)
        return f"env[{{{self._next()}}}]"

    def slots(self, n: int) -> str:
        """``n`` slots as a tuple's items (``env[{k}], `` each, trailing comma included)."""
        return "".join(f"{self.slot()}, " for _ in range(n))

    def comment(self) -> str:
        """``  # {k}``: a comment naming what a slot holds."""
        return f"  # {{{self._next()}}}"

    def _next(self) -> str:
        self.count += 1
        return str(self.count - 1)


class OpShape:
    """Operations whose code differs only in slots, comments and constants, compiled once.

    ``code`` are the statements as ``Fields`` wrote them (format strings: literal braces
    doubled); ``free`` how many slots die after them. ``make`` gives one operation without
    writing, parsing or compiling any code for it; its ``source`` is its own code, slots
    and comments filled in. Straight-line code is 3 times less Python time per operation
    than a loop interpreting operation tuples (measured: 20 operations in 3.4 us against
    11.5 us), and compiling each operation's code on its own cost about 120 us an
    operation (0.35 s for W2 at 64 microbatches).
    """

    def __init__(self, kind: str, code: list[str], fields: Fields, free: int, names: Iterable[str]):
        free_lines = [f"env[{{{fields.count + k}}}] = None" for k in range(free)]
        body = "\n".join([*code, *free_lines] or ["pass"])
        self.kind = kind
        self.names = tuple(sorted(names))
        self.num_fields = fields.count + free
        # "{what}" stands for the operation's description.
        self.source = (
            f"def op(env):  # {kind}: {{what}}\n    " + body.replace("\n", "\n    ") + "\n"
        )
        slot_fields = {*fields.slot_fields, *range(fields.count, fields.count + free)}
        self.slot_fields = sorted(slot_fields)
        parameters = [""] * self.num_fields
        for n, k in enumerate(self.slot_fields):
            parameters[k] = f"_s{n}"
        template = _COMMENT.sub("", body.format(*parameters))
        self.factory = _factory(kind, template, self.names, len(self.slot_fields))

    def make(self, what: str, fields: list, namespace: Mapping[str, Any]) -> Op:
        """The operation with ``fields`` (slots and comments, in the order written, then
        the freed slots) and the constants of ``namespace``."""
        if len(fields) != self.num_fields:
            raise ValueError(f"{self.kind} operation: {len(fields)} fields for {self.num_fields}")
        slots = [fields[k] for k in self.slot_fields]
        op = self.factory(*[namespace[n] for n in self.names], *slots)
        op.kind, op.what = self.kind, what
        op.op_shape, op.fields = self, fields  # its source, written when asked (``source``)
        return op


def source(op: Op) -> str:
    """The code an operation made by ``OpShape.make`` runs, its slots and comments filled
    in (written on demand: a build makes thousands of operations, read for debugging)."""
    return op.op_shape.source.format(*op.fields, what=op.what)


def _factory(kind: str, template: str, names: tuple[str, ...], slots: int) -> Callable[..., Op]:
    """``make(*constants, *slots)``: an operation running ``template``, its constants and
    slots bound as its parameters' defaults (one compile per template; no closure cells,
    which the garbage collector would walk, and faster reads than a closure's)."""
    key = (template, names)
    factory = _FACTORIES.get(key)
    if factory is None:
        parameters = ", ".join(["env", *names, *(f"_s{k}" for k in range(slots))])
        lines = "".join(f"    {line}\n" for line in template.split("\n"))
        source = f"def op({parameters}):\n{lines}"
        scope: dict[str, Any] = {}
        exec(compile(source, f"<jaxpp {kind}>", "exec"), scope)
        code = scope["op"].__code__

        def factory(*defaults: Any) -> Op:
            return types.FunctionType(code, scope, "op", defaults)

        with _FACTORIES_LOCK:
            factory = _FACTORIES.setdefault(key, factory)
    return factory


def _result_handler(shape: tuple[int, ...], dtype: str, sharding: Sharding) -> Any:
    return jc.result_handler(jax.core.ShapedArray(shape, np.dtype(dtype)), sharding)
