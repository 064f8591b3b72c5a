"""Executing an ``ExecutionPlan`` in one process: compile once, then dispatch.

``compile_plan`` compiles every distinct stage module once per submesh and
turns the plan into a flat list of operations over numbered slots: a slot holds
one value on one rank (or one value in flight on a channel). Everything a call
needs is decided here, once: which executable, which slots feed it, the result
handlers of its outputs, the target shardings of transfers and which slots die
after each operation (the value's last use on its rank).

``CompiledPlan.__call__`` checks and places the arguments, then walks the
operations in the plan's global order. Nothing in the walk blocks: PJRT
executions and copies are asynchronous, ordered by their buffers' readiness.
Measured on the 2-core development machine (tiny stages): results wrapped by
``consume_with_handlers`` cost 5.0 us per execution against 7.4 us through
``disassemble_into_single_device_arrays``; a batched copy 7 us against 22 us
for ``jax.device_put``.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Sharding
from jaxlib import xla_client as xc

from jaxpp_mlir.errors import CallError, JaxppError, MeshError, RuntimeFailure, ScheduleError

from . import compile as _compile
from . import transfer as _transfer
from .plan import ExecutionPlan, Instruction, Recv, RunStage, Send, TensorSpec

# Operation kinds (first field of an operation tuple).
_RUN = 0  # (_RUN, exe, in_slots, out_slots, handlers, free, what)
_SEND = 1  # (_SEND, src_slot, channel_slot, free, what)
_COPY = 2  # (_COPY, src_slots, dst_slots, device_lists, shardings, semantics, free, what)
_RESHARD = 3  # (_RESHARD, src_slot, dst_slot, sharding, free, what)
_FREE = 4  # (_FREE, free, what): a received value nobody uses


@dataclasses.dataclass
class _Slot:
    """Compile-time facts about one slot."""

    key: tuple[int, int] | tuple[str, int]  # (rank, value) or ("channel", channel)
    spec: TensorSpec
    sharding: Sharding | None  # None: chosen by the first consumer
    defined_at: int  # instruction index; -1 for a program input
    last_use: int = -1  # instruction index; -1 while unused


@dataclasses.dataclass(frozen=True)
class _InputCheck:
    """How argument ``index`` is checked and where its copies go."""

    index: int
    spec: TensorSpec
    shape: tuple[int, ...]
    dtype: np.dtype
    targets: tuple[tuple[int, Sharding], ...]  # (slot, sharding) per rank that uses it


def _describe(inst: Instruction) -> str:
    if isinstance(inst, RunStage):
        label = f" ({inst.label})" if inst.label else ""
        return f"run {inst.executable!r}{label} on rank {inst.rank}"
    if isinstance(inst, Send):
        return f"send of value {inst.value} from rank {inst.rank} to rank {inst.peer}"
    return f"recv of value {inst.value} on rank {inst.rank} from rank {inst.peer}"


class CompiledPlan:
    """An ``ExecutionPlan`` compiled for concrete devices; call it with the flat inputs.

    Attributes:
      plan: the plan it executes.
      rank_devices: rank r's devices, in partition order.
      executables: executable name -> PJRT loaded executable (names that share a
        module text and a submesh share one executable).
      last_uses: ``(rank, value)`` -> index of the instruction after which the
        runtime drops its reference (``len(plan.instructions)`` for outputs).
    """

    def __init__(
        self,
        plan: ExecutionPlan,
        rank_devices: tuple[tuple[jax.Device, ...], ...],
        executables: dict[str, xc.LoadedExecutable],
        num_compiled: int,
    ):
        self.plan = plan
        self.rank_devices = rank_devices
        self.executables = executables
        self.num_compiled = num_compiled
        self._build()

    # ------------------------------------------------------------------ build
    def _build(self) -> None:
        plan = self.plan
        n_inst = len(plan.instructions)
        slots: list[_Slot] = []
        where: dict[tuple[int, int], int] = {}  # (rank, value) -> slot

        def define(rank: int, value: int, spec: TensorSpec, sharding, at: int) -> int:
            if (rank, value) in where:
                raise ScheduleError(
                    f"value {value} is defined twice on rank {rank} "
                    f"(again by instruction {at}: {_describe(plan.instructions[at])})"
                )
            where[(rank, value)] = len(slots)
            slots.append(_Slot((rank, value), spec, sharding, at))
            return len(slots) - 1

        def use(rank: int, value: int, at: int, spec: TensorSpec, sharding) -> int:
            slot = where.get((rank, value))
            if slot is None:
                raise ScheduleError(
                    f"instruction {at} ({_describe(plan.instructions[at])}) uses value "
                    f"{value}, which is not defined on rank {rank} before it"
                )
            info = slots[slot]
            if info.spec != spec:
                raise ScheduleError(
                    f"instruction {at} ({_describe(plan.instructions[at])}) takes value "
                    f"{value} as {spec} but it is {info.spec}"
                )
            if sharding is not None:
                if info.sharding is None:
                    info.sharding = sharding
                elif not _transfer.same_layout(info.sharding, sharding, len(spec.shape)):
                    raise ScheduleError(
                        f"instruction {at} ({_describe(plan.instructions[at])}) needs value "
                        f"{value} sharded as {sharding}, but rank {rank} holds it as "
                        f"{info.sharding}"
                    )
            info.last_use = at
            return slot

        # Program inputs: value i on every rank of its binding.
        for i, binding in enumerate(plan.inputs):
            if binding.index != i:
                raise ScheduleError(f"plan.inputs[{i}] binds input {binding.index}, not {i}")
            for rank in binding.ranks:
                self._check_rank(rank, f"input {i}")
                define(rank, i, binding.spec, None, -1)

        # Shardings each executable takes and gives.
        in_shardings: dict[str, list[Sharding]] = {}
        out_shardings: dict[str, list[Sharding]] = {}
        for name, stage in plan.executables.items():
            devices = self.rank_devices[stage.rank]
            exe = self.executables[name]
            in_shardings[name] = _transfer.executable_shardings(
                exe, devices, len(stage.input_specs), outputs=False
            )
            out_shardings[name] = _transfer.executable_shardings(
                exe, devices, len(stage.output_specs), outputs=True
            )

        # Instructions, in the global order.
        pending: dict[int, deque[tuple[Send, int]]] = {}
        channel_source: dict[int, int] = {}  # channel slot -> the sent slot
        steps: list[tuple] = []  # per instruction, slots resolved; ops come after
        for at, inst in enumerate(plan.instructions):
            self._check_rank(inst.rank, f"instruction {at}")
            if isinstance(inst, RunStage):
                stage = plan.executables.get(inst.executable)
                if stage is None:
                    raise ScheduleError(
                        f"instruction {at} runs unknown executable {inst.executable!r}"
                    )
                if stage.rank != inst.rank:
                    raise ScheduleError(
                        f"instruction {at} runs {inst.executable!r} on rank {inst.rank}, "
                        f"but it is compiled for rank {stage.rank}"
                    )
                if len(inst.inputs) != len(stage.input_specs) or len(inst.outputs) != len(
                    stage.output_specs
                ):
                    raise ScheduleError(
                        f"instruction {at} ({_describe(inst)}) has {len(inst.inputs)} inputs "
                        f"and {len(inst.outputs)} outputs; the executable takes "
                        f"{len(stage.input_specs)} and gives {len(stage.output_specs)}"
                    )
                ins = [
                    use(inst.rank, v, at, spec, sh)
                    for v, spec, sh in zip(
                        inst.inputs, stage.input_specs, in_shardings[inst.executable], strict=True
                    )
                ]
                outs = [
                    define(inst.rank, v, spec, sh, at)
                    for v, spec, sh in zip(
                        inst.outputs,
                        stage.output_specs,
                        out_shardings[inst.executable],
                        strict=True,
                    )
                ]
                steps.append((_RUN, inst, ins, outs))
            elif isinstance(inst, Send):
                self._check_rank(inst.peer, f"instruction {at}")
                src = where.get((inst.rank, inst.value))
                if src is None:
                    raise ScheduleError(
                        f"instruction {at} ({_describe(inst)}) sends a value that rank "
                        f"{inst.rank} does not hold"
                    )
                info = slots[src]
                use(inst.rank, inst.value, at, info.spec, None)
                chan = len(slots)
                slots.append(_Slot(("channel", inst.channel), info.spec, None, at))
                channel_source[chan] = src
                pending.setdefault(inst.channel, deque()).append((inst, chan))
                steps.append((_SEND, inst, src, chan))
            elif isinstance(inst, Recv):
                queue = pending.get(inst.channel)
                if not queue:
                    raise ScheduleError(
                        f"instruction {at} ({_describe(inst)}) waits on channel "
                        f"{inst.channel}, but no send on it precedes it"
                    )
                send, chan = queue.popleft()
                if send.rank != inst.peer or send.peer != inst.rank:
                    raise ScheduleError(
                        f"channel {inst.channel} carries a send from rank {send.rank} to "
                        f"rank {send.peer}, but instruction {at} receives on rank "
                        f"{inst.rank} from rank {inst.peer}"
                    )
                if slots[chan].spec != inst.spec:
                    raise ScheduleError(
                        f"instruction {at} ({_describe(inst)}) expects {inst.spec} on channel "
                        f"{inst.channel}, but the send carries {slots[chan].spec}"
                    )
                slots[chan].last_use = at
                dst = define(inst.rank, inst.value, inst.spec, None, at)
                steps.append((_COPY, inst, chan, dst))
            else:
                raise ScheduleError(f"instruction {at} is not an instruction: {inst!r}")
        for channel, queue in pending.items():
            if queue:
                send, _ = queue[0]
                raise ScheduleError(
                    f"the send of value {send.value} from rank {send.rank} on channel "
                    f"{channel} is never received"
                )

        # Outputs stay alive to the end.
        output_slots = []
        for k, out in enumerate(plan.outputs):
            slot = where.get((out.rank, out.value))
            if slot is None:
                raise ScheduleError(
                    f"output {k} is value {out.value} on rank {out.rank}, which is never "
                    f"defined there"
                )
            if slots[slot].spec != out.spec:
                raise ScheduleError(
                    f"output {k} is declared {out.spec} but value {out.value} is {slots[slot].spec}"
                )
            slots[slot].last_use = n_inst
            output_slots.append(slot)

        # Values nobody consumed: replicated over their rank's devices.
        for info in slots:
            if info.sharding is None and info.key[0] != "channel":
                info.sharding = _transfer.replicated_sharding(self.rank_devices[info.key[0]])
        for chan, src in channel_source.items():
            slots[chan].sharding = slots[src].sharding

        # Which slots die after each instruction (unused values die where defined).
        free_after: list[list[int]] = [[] for _ in range(n_inst)]
        for s, info in enumerate(slots):
            if info.last_use == -1 and info.defined_at >= 0:
                free_after[info.defined_at].append(s)
            elif 0 <= info.last_use < n_inst:
                free_after[info.last_use].append(s)

        self._ops, self._op_end = self._make_ops(steps, slots, free_after)
        self._slots = where
        self._num_slots = len(slots)
        self._output_slots = tuple(output_slots)
        self._inputs = tuple(
            _InputCheck(
                index=i,
                spec=b.spec,
                shape=tuple(b.spec.shape),
                dtype=np.dtype(b.spec.dtype),
                targets=tuple(
                    (where[(r, i)], slots[where[(r, i)]].sharding)
                    for r in b.ranks
                    if slots[where[(r, i)]].last_use >= 0  # an input no one reads stays home
                ),
            )
            for i, b in enumerate(plan.inputs)
        )
        self.last_uses: Mapping[tuple[int, int], int] = {
            key: slots[s].last_use if slots[s].last_use >= 0 else slots[s].defined_at
            for key, s in where.items()
        }

    def _check_rank(self, rank: int, what: str) -> None:
        if not 0 <= rank < len(self.rank_devices):
            raise ScheduleError(
                f"{what} refers to rank {rank}, but the plan runs on {len(self.rank_devices)} ranks"
            )

    def _make_ops(
        self, steps: list[tuple], slots: list[_Slot], free_after: list[list[int]]
    ) -> tuple[list[tuple], list[int]]:
        """Operation tuples for the dispatch loop; consecutive recvs share one batched copy."""
        ops: list[tuple] = []
        ends: list[int] = []  # instruction count covered after each op
        at = 0
        while at < len(steps):
            kind, inst = steps[at][0], steps[at][1]
            if kind == _RUN:
                _, _, ins, outs = steps[at]
                stage = self.plan.executables[inst.executable]
                handlers = [
                    xc.array_result_handler(
                        jax.core.ShapedArray(tuple(spec.shape), np.dtype(spec.dtype)),
                        slots[s].sharding,
                        committed=True,
                        _skip_checks=True,
                    )
                    for spec, s in zip(stage.output_specs, outs, strict=True)
                ]
                ops.append(
                    (
                        _RUN,
                        self.executables[inst.executable],
                        tuple(ins),
                        tuple(outs),
                        handlers,
                        tuple(free_after[at]),
                        _describe(inst),
                    )
                )
                at += 1
            elif kind == _SEND:
                _, _, src, chan = steps[at]
                ops.append((_SEND, src, chan, tuple(free_after[at]), _describe(inst)))
                at += 1
            else:  # a run of recvs
                first = at
                while at < len(steps) and steps[at][0] == _COPY:
                    at += 1
                batch: list[tuple[int, int, Sharding]] = []
                free: list[int] = []
                for k in range(first, at):
                    _, recv, chan, dst = steps[k]
                    free += free_after[k]
                    if slots[dst].last_use == -1:
                        continue  # nobody reads it: no copy, the channel just drops it
                    src_sh, dst_sh = slots[chan].sharding, slots[dst].sharding
                    if _transfer.same_layout(src_sh, dst_sh, len(recv.spec.shape)):
                        batch.append((chan, dst, dst_sh))
                    else:
                        ops.append((_RESHARD, chan, dst, dst_sh, (), _describe(recv)))
                        ends.append(at)
                what = ", ".join(_describe(steps[k][1]) for k in range(first, at))
                if batch:
                    ops.append(
                        (
                            _COPY,
                            tuple(c for c, _, _ in batch),
                            tuple(d for _, d, _ in batch),
                            [_transfer.device_list(sh) for _, _, sh in batch],
                            [sh for _, _, sh in batch],
                            [_transfer.REUSE] * len(batch),
                            tuple(free),
                            what,
                        )
                    )
                else:
                    ops.append((_FREE, tuple(free), what))
            ends.append(at)
        return ops, ends

    # ------------------------------------------------------------------- call
    def __call__(self, *args: Any) -> list[jax.Array]:
        """Runs the plan on flat ``args``; returns the outputs in ``plan.outputs`` order."""
        return self._run(args, [None] * self._num_slots)

    def _run(self, args: Sequence[Any], env: list, stop: int | None = None) -> list[jax.Array]:
        """Places ``args`` into ``env`` and dispatches; ``stop`` ends after that many
        instructions (for tests, which then inspect ``env``)."""
        if len(args) != len(self._inputs):
            raise CallError(
                f"the program takes {len(self._inputs)} arguments, but {len(args)} were given"
            )
        self._place(args, env)
        ops = self._ops
        if stop is not None:
            ops = ops[: bisect.bisect_right(self._op_end, stop)]
        op: tuple = ()
        try:
            for op in ops:
                kind = op[0]
                if kind == _RUN:
                    outs = (
                        op[1].execute_sharded([env[s] for s in op[2]]).consume_with_handlers(op[4])
                    )
                    for s, value in zip(op[3], outs, strict=True):
                        env[s] = value
                elif kind == _COPY:
                    moved = _transfer.batched_copy([env[s] for s in op[1]], op[3], op[4], op[5])
                    for s, value in zip(op[2], moved, strict=True):
                        env[s] = value
                elif kind == _SEND:
                    env[op[2]] = env[op[1]]
                elif kind == _RESHARD:
                    env[op[2]] = jax.device_put(env[op[1]], op[3])
                for s in op[-2]:
                    env[s] = None
        except JaxppError:
            raise
        except Exception as e:
            raise RuntimeFailure(f"{op[-1]} failed: {e}") from e
        return [env[s] for s in self._output_slots]

    def _place(self, args: Sequence[Any], env: list) -> None:
        """Checks each argument against its spec and puts a copy on every rank that reads it."""
        values: list[Any] = []
        shardings: list[Sharding] = []
        dests: list[int] = []
        for x, check in zip(args, self._inputs, strict=True):
            if isinstance(x, jax.Array):
                if isinstance(x, jax.core.Tracer):
                    raise CallError(
                        f"argument {check.index} is a tracer: a compiled plan runs on "
                        f"concrete arrays and cannot be called inside jax transformations"
                    )
                if x.shape != check.shape or x.dtype != check.dtype:
                    raise _mismatch(check, x.shape, x.dtype)
                for slot, sharding in check.targets:
                    if x.committed and x.sharding == sharding:
                        env[slot] = x
                    else:
                        values.append(x)
                        shardings.append(sharding)
                        dests.append(slot)
                continue
            if isinstance(x, np.ndarray | np.generic):
                if x.shape != check.shape or x.dtype != check.dtype:
                    raise _mismatch(check, x.shape, x.dtype)
            elif isinstance(x, bool | int | float | complex):
                x = _scalar(check, x)
            else:
                raise CallError(
                    f"argument {check.index} is a {type(x).__name__}; expected an array "
                    f"of shape {check.shape} and dtype {check.dtype} (a jax or numpy array)"
                )
            for slot, sharding in check.targets:
                values.append(x)
                shardings.append(sharding)
                dests.append(slot)
        if values:
            for slot, value in zip(dests, jax.device_put(values, shardings), strict=True):
                env[slot] = value

    # ------------------------------------------------------------------- show
    def __repr__(self) -> str:
        plan = self.plan
        lines = [
            f"CompiledPlan({plan.num_ranks} ranks, {len(plan.executables)} executables "
            f"({self.num_compiled} compiled), {len(plan.instructions)} instructions, "
            f"{len(plan.inputs)} inputs, {len(plan.outputs)} outputs)"
        ]
        for rank, devices in enumerate(self.rank_devices):
            names = sorted(n for n, s in plan.executables.items() if s.rank == rank)
            runs = sum(
                1 for inst in plan.instructions if isinstance(inst, RunStage) and inst.rank == rank
            )
            device_text = ", ".join(f"{d.platform}:{d.id}" for d in devices)
            lines.append(
                f"  rank {rank} on [{device_text}]: {runs} runs of {', '.join(names) or '-'}"
            )
        return "\n".join(lines)


def _mismatch(check: _InputCheck, shape: tuple[int, ...], dtype: Any) -> CallError:
    return CallError(
        f"argument {check.index} has shape {tuple(shape)} and dtype {np.dtype(dtype).name}, "
        f"but the program expects shape {check.shape} and dtype {check.dtype.name}"
    )


def _scalar(check: _InputCheck, x: bool | int | float | complex) -> np.ndarray:
    """A python scalar as a 0-d array of the argument's dtype (weakly typed, like jax)."""
    dtype = check.dtype
    if isinstance(x, bool):
        ok = dtype == np.bool_
    elif isinstance(x, int):
        ok = jax.numpy.issubdtype(dtype, np.number)
    elif isinstance(x, float):
        ok = jax.numpy.issubdtype(dtype, np.inexact)
    else:
        ok = jax.numpy.issubdtype(dtype, np.complexfloating)
    if check.shape != () or not ok:
        raise CallError(
            f"argument {check.index} is a python {type(x).__name__}, but the program expects "
            f"shape {check.shape} and dtype {dtype.name}"
        )
    try:
        return np.asarray(x, dtype=dtype)
    except (OverflowError, ValueError) as e:
        raise CallError(f"argument {check.index}: {x!r} does not fit in {dtype.name}") from e


def compile_plan(plan: ExecutionPlan, rank_devices: Sequence[Sequence[jax.Device]]) -> CompiledPlan:
    """Compiles every executable of ``plan`` for the submesh of its rank.

    ``rank_devices[r]`` lists rank r's devices in partition order. A module text
    shared by several executables of one rank compiles once.
    """
    devices = tuple(tuple(d) for d in rank_devices)
    if len(devices) != plan.num_ranks:
        raise MeshError(
            f"the plan runs on {plan.num_ranks} ranks, but devices were given for "
            f"{len(devices)} ranks"
        )
    for rank, ds in enumerate(devices):
        if not ds:
            raise MeshError(f"rank {rank} has no devices")
    for name, stage in plan.executables.items():
        if not 0 <= stage.rank < len(devices):
            raise ScheduleError(
                f"executable {name!r} is for rank {stage.rank}, but the plan has "
                f"{len(devices)} ranks"
            )
    # One compilation per distinct (module text, devices).
    keys: dict[tuple[str, tuple[int, ...]], int] = {}
    jobs: list[tuple[str, str, tuple[jax.Device, ...]]] = []
    job_of: dict[str, int] = {}
    for name, stage in plan.executables.items():
        ds = devices[stage.rank]
        key = (stage.mlir_module, tuple(d.id for d in ds))
        if key not in keys:
            keys[key] = len(jobs)
            jobs.append((name, stage.mlir_module, ds))
        job_of[name] = keys[key]
    compiled = _compile.compile_stages(jobs)
    executables = {name: compiled[job] for name, job in job_of.items()}
    for name, stage in plan.executables.items():
        _compile.check_signature(
            name,
            executables[name],
            stage.input_specs,
            stage.output_specs,
            len(devices[stage.rank]),
        )
    return CompiledPlan(plan, devices, executables, len(jobs))
