"""Dispatch code generation: each resolved operation as a small Python function.

Every operation of a ``ResolvedPlan`` becomes straight-line code over the slot
list ``env``, with its slots, executable, result handlers and shardings as
constants; consecutive receives share one batched copy.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import jax
import numpy as np
from jax.sharding import Sharding

from .. import _jax_compat as jc
from .. import transfer as _transfer
from ..executable import Executable
from ..plan import ExecutionPlan
from .slots import CopyStep, ResolvedPlan, RunStep, SendStep, Slot

Op = Callable[[list], None]


def make_ops(
    plan: ExecutionPlan, resolved: ResolvedPlan, executables: Mapping[str, Executable]
) -> tuple[list[Op], list[int]]:
    """One generated function per operation; consecutive recvs share one batched copy.

    Returns the functions and, per function, how many instructions are done
    after it.
    """
    steps, slots, free_after = resolved.steps, resolved.slots, resolved.free_after
    # One result handler per (shape, dtype, sharding): runs of a stage share them.
    handler = functools.cache(_result_handler)
    ops: list[Op] = []
    ends: list[int] = []
    at = 0
    while at < len(steps):
        step = steps[at]
        if isinstance(step, RunStep):
            stage = plan.executables[step.inst.executable]
            ops.append(
                _run_op(step, stage.output_specs, slots, free_after[at], executables, handler)
            )
            at += 1
        elif isinstance(step, SendStep):
            ops.append(_send_op(step, slots, free_after[at]))
            at += 1
        else:  # a run of recvs
            first = at
            while at < len(steps) and isinstance(steps[at], CopyStep):
                at += 1
            recv_ops = _recv_ops(steps[first:at], slots, free_after[first:at])
            ops += recv_ops
            ends += [at] * (len(recv_ops) - 1)
        ends.append(at)
    return ops, ends


def _run_op(
    step: RunStep,
    output_specs: Iterable[Any],
    slots: list[Slot],
    free_after: list[int],
    executables: Mapping[str, Executable],
    handler: Callable[[tuple[int, ...], str, Sharding], Any],
) -> Op:
    inst, ins, outs, reshards = step.inst, step.inputs, step.outputs, step.reshards
    handlers = [
        handler(tuple(spec.shape), spec.dtype, slots[s].sharding)
        for spec, s in zip(output_specs, outs, strict=True)
    ]
    dead = {s for s in outs if slots[s].last_use == -1}  # results nobody reads
    code = [
        *(
            f"env[{r.copy}] = device_put(env[{r.source}], reshard_{k})  # {slots[r.copy].name()}"
            for k, r in enumerate(reshards)
        ),
        f"r = execute(({_items(ins)})).consume_with_handlers(handlers)",
        *(f"env[{s}] = r[{k}]  # {slots[s].name()}" for k, s in enumerate(outs) if s not in dead),
    ]
    free = [s for s in free_after if s not in dead]
    namespace = {
        "execute": executables[inst.executable].execute_sharded,
        "handlers": handlers,
        "device_put": jax.device_put,
        **{f"reshard_{k}": r.sharding for k, r in enumerate(reshards)},
    }
    return generate("run", inst.describe(), code, free, namespace)


def _result_handler(shape: tuple[int, ...], dtype: str, sharding: Sharding) -> Any:
    return jc.result_handler(jax.core.ShapedArray(shape, np.dtype(dtype)), sharding)


def _send_op(step: SendStep, slots: list[Slot], free_after: list[int]) -> Op:
    code = [f"env[{step.channel}] = env[{step.source}]  # {slots[step.channel].name()}"]
    return generate("send", step.inst.describe(), code, free_after, {})


def _recv_ops(steps: list[CopyStep], slots: list[Slot], free_after: list[list[int]]) -> list[Op]:
    """The ops of consecutive recvs: reshards first, then one batched copy (or a free)."""
    ops: list[Op] = []
    batch: list[tuple[int, int, Sharding]] = []
    free: list[int] = []
    for step, dying in zip(steps, free_after, strict=True):
        recv, chan, dst = step.inst, step.channel, step.destination
        free += dying
        if slots[dst].last_use == -1:
            continue  # nobody reads it: no copy, the channel just drops it
        src_sh, dst_sh = slots[chan].sharding, slots[dst].sharding
        if _transfer.same_layout(src_sh, dst_sh, len(recv.spec.shape)):
            batch.append((chan, dst, dst_sh))
        else:
            code = [f"env[{dst}] = device_put(env[{chan}], sharding)  # {slots[dst].name()}"]
            namespace = {"device_put": jax.device_put, "sharding": dst_sh}
            ops.append(generate("reshard", recv.describe(), code, (), namespace))
    what = ", ".join(step.inst.describe() for step in steps)
    if not batch:
        ops.append(generate("free", what, [], free, {}))
        return ops
    code = [
        f"r = copy([{_items(c for c, _, _ in batch)}], lists, shardings, modes)",
        *(f"env[{d}] = r[{k}]  # {slots[d].name()}" for k, (_, d, _) in enumerate(batch)),
    ]
    namespace = {
        "copy": _transfer.batched_copy,
        "lists": [_transfer.device_list(sh) for _, _, sh in batch],
        "shardings": [sh for _, _, sh in batch],
        "modes": [_transfer.REUSE] * len(batch),
    }
    ops.append(generate("copy", what, code, free, namespace))
    return ops


def _items(slots: Iterable[int]) -> str:
    """``env[a], env[b], `` (a tuple's items, trailing comma included)."""
    return "".join(f"env[{s}], " for s in slots)


#: A slot read or written by generated code (``env[12]``).
_SLOT = re.compile(r"env\[(\d+)\]")
_COMMENT = re.compile(r"  # [^\n]*")
# Compiled op factories by template (the op's statements with its slots and constants
# as parameters): operations of the same shape share one compile.
_FACTORIES: dict[tuple[str, tuple[str, ...]], Callable[..., Op]] = {}
_FACTORIES_LOCK = threading.Lock()


def generate(
    kind: str, what: str, code: list[str], free: Iterable[int], namespace: dict[str, Any]
) -> Op:
    """Compiles ``code`` (statements over ``env``, then the frees) into ``op(env)``.

    Straight-line code with the slots bound in the function's closure: 3 times less
    Python time per operation than a loop interpreting operation tuples (measured: 20
    operations in 3.4 us against 11.5 us). Operations whose code differs only in slots
    and constants share one compiled template (compiling each op's source on its own cost
    about 120 us an operation, 0.35 s for W2 at 64 microbatches); ``op.source`` is the
    op's own code, slots and comments included.
    """
    body = "\n".join([*code, *(f"env[{s}] = None" for s in free)] or ["pass"])
    source = f"def op(env):  # {kind}: {what}\n    " + body.replace("\n", "\n    ") + "\n"
    # Alternating code and slot numbers: "env[12]" becomes the parameter "env[_s0]".
    pieces = _SLOT.split(_COMMENT.sub("", body))
    slots = [int(number) for number in pieces[1::2]]
    pieces[1::2] = [f"env[_s{k}]" for k in range(len(slots))]
    template = "".join(pieces)
    names = tuple(sorted(namespace))
    key = (template, names)
    factory = _FACTORIES.get(key)
    if factory is None:
        parameters = ", ".join([*names, *(f"_s{k}" for k in range(len(slots)))])
        factory_source = f"def make({parameters}):\n    def op(env):\n" + "".join(
            f"        {line}\n" for line in template.split("\n")
        )
        scope: dict[str, Any] = {}
        exec(compile(factory_source + "    return op\n", f"<jaxpp {kind}>", "exec"), scope)
        factory = scope["make"]
        with _FACTORIES_LOCK:
            factory = _FACTORIES.setdefault(key, factory)
    op = factory(*(namespace[n] for n in names), *slots)
    op.kind, op.what, op.source = kind, what, source
    return op
