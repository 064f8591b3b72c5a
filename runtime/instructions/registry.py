"""The one table of instruction kinds: each kind's module, by the ``kind`` its instructions
carry.

Everything that treats instructions by kind goes through here: slot resolution
(``resolve``), dispatch code (``generate``), and whatever counts or selects instructions
(``count``; compare ``inst.kind`` with a module's ``KIND``), never through an
instruction's class. A kind's module defines its instruction (a frozen dataclass
answering ``plan.Instruction``), its resolved step (with ``inst`` and ``consumed``),
``resolve(resolver, at, inst) -> step`` and ``generate(codegen, steps, at) -> next``.
``copy`` is the one step kind no plan holds: slot resolution makes it for readers that
need another layout (see ``copy``).

A new kind: its module here, added to ``KINDS``; its op in the compiler's dialect and
the plan builder's op table (``jaxpp_mlir/plan/instructions.py``); the pass that
creates it; tests.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from types import ModuleType
from typing import Any

from ..errors import PlanError
from ..plan import Instruction
from . import receive, run, send

KINDS: dict[str, ModuleType] = {module.KIND: module for module in (run, send, receive)}


def kind_of(inst: Any, at: int) -> ModuleType:
    """The module of instruction ``at``'s kind; ``PlanError`` for anything else."""
    module = KINDS.get(getattr(inst, "kind", None))
    if module is None:
        raise PlanError(f"instruction {at} is not an instruction: {inst!r}")
    return module


def count(instructions: Iterable[Instruction]) -> Counter[str]:
    """How many instructions of each kind."""
    return Counter(inst.kind for inst in instructions)
