"""Executing an ``ExecutionPlan`` whose ranks live in several processes (``jax.distributed``).

Every process runs the same script, so every process holds the same plan. A
process compiles and runs only the work of the ranks whose devices it owns
(every device of a rank must belong to one process):

- Its *local plan* is the global plan restricted to its ranks, in the global
  order, with each cross-process transfer replaced by a ``RunStage`` of a
  transfer executable (a compiled ``collective_permute`` over the sender's and
  the receiver's devices, see ``collectives``) at the point where this process
  issues it (see ``ordering``). The local plan runs on the single-process
  executor (``CompiledPlan``): transfers inside the process stay
  device-to-device copies, values are freed after their last use.
- Before anything runs: the cross-process order is checked for deadlocks, the
  processes compare plan fingerprints, every stage and transfer executable is
  compiled, all processes meet at a barrier, and every transfer executable
  runs once (connections are set up before the first step).
- Outputs held by another process come back as ``RemoteOutput`` placeholders;
  ``gather`` fetches any pytree of outputs to every process.
- An output passed back as an argument of the next call (a training loop) is
  forwarded to the processes that need it, when that input is needed on
  several processes (an optimizer step count): the processes agree on what is
  forwarded through the key-value store, then move it with the same
  transfer executables.

Every wait is bounded (``DistributedOptions``), and the watchdog thread ends
the process with a message naming the lost peer (see ``watchdog``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import os
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Sharding

from jaxpp_mlir.errors import CallError, JaxppError, MeshError, RuntimeFailure, ScheduleError

from . import _jax_compat as jc
from . import collectives, ordering
from . import compile as _compile
from . import transfer as _transfer
from . import watchdog as _watchdog
from .coordination import Exchange
from .executor import CompiledPlan
from .local_plan import Extra, Feed, LocalPlanBuilder
from .plan import ExecutionPlan, RunStage, TensorSpec

_program_serials = itertools.count()


@dataclasses.dataclass(frozen=True)
class DistributedOptions:
    """Limits of a multi-process run, in seconds.

    ``setup_timeout_s`` bounds each setup barrier (a peer still partitioning
    or compiling); the watchdog's options bound transfers and heartbeats.
    Environment variables override the defaults: ``JAXPP_SETUP_TIMEOUT``,
    ``JAXPP_TRANSFER_TIMEOUT``, ``JAXPP_PEER_TIMEOUT``, ``JAXPP_HEARTBEAT_INTERVAL``.
    """

    setup_timeout_s: float = 900.0
    watchdog: _watchdog.WatchdogOptions = dataclasses.field(
        default_factory=_watchdog.WatchdogOptions
    )

    @classmethod
    def from_env(cls) -> DistributedOptions:
        value = os.environ.get("JAXPP_SETUP_TIMEOUT")
        return cls(
            setup_timeout_s=float(value) if value else cls.setup_timeout_s,
            watchdog=_watchdog.WatchdogOptions.from_env(),
        )


class RemoteOutput:
    """An output of a distributed program that lives in another process.

    Its shape and dtype are known; using its data here raises ``CallError``.
    Pass it back to the same program (it is forwarded where needed) or fetch
    everything with ``gather``.
    """

    __slots__ = ("call", "index", "process", "program", "rank", "spec")

    def __init__(
        self, program: int, call: int, index: int, rank: int, process: int, spec: TensorSpec
    ):
        self.program, self.call, self.index = program, call, index
        self.rank, self.process, self.spec = rank, process, spec

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.spec.shape)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.spec.dtype)

    def _error(self) -> CallError:
        return CallError(
            f"output {self.index} ({self.spec}) is held by rank {self.rank} in process "
            f"{self.process}, not by this process ({jax.process_index()}); fetch it with "
            f"step.gather(outputs), called by every process"
        )

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise self._error()

    def __jax_array__(self) -> jax.Array:
        raise self._error()

    def __float__(self) -> float:
        raise self._error()

    def __int__(self) -> int:
        raise self._error()

    def __bool__(self) -> bool:
        raise self._error()

    def __getitem__(self, key: Any) -> Any:
        raise self._error()

    def item(self) -> Any:
        raise self._error()

    def block_until_ready(self) -> RemoteOutput:
        return self  # nothing to wait for in this process

    def is_ready(self) -> bool:
        return True

    def is_deleted(self) -> bool:
        return False

    def delete(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"RemoteOutput({self.spec} on rank {self.rank}, process {self.process})"


def plan_transfers(
    plan: ExecutionPlan, process_of: Sequence[int], num_processes: int
) -> list[ordering.TransferGroup]:
    """The plan's cross-process transfer groups, checked: pairing, held values, no deadlock.

    Pure (no jax.distributed needed): ``process_of[r]`` is rank r's process.
    Raises ``ScheduleError`` for a plan that cannot run on these processes.
    """
    transfers = ordering.cross_transfers(plan, process_of)
    groups = ordering.group_transfers(transfers)
    input_ranks = {b.index: set(b.ranks) for b in plan.inputs}
    ordering.check_sender_holds_values(plan, groups, input_ranks)
    ordering.check_deadlock(groups, num_processes)
    return groups


def rank_processes(rank_devices: Sequence[Sequence[jax.Device]]) -> tuple[int, ...]:
    """Rank r's process; raises ``MeshError`` if a rank's devices span processes."""
    result = []
    for rank, devices in enumerate(rank_devices):
        processes = sorted({d.process_index for d in devices})
        if len(processes) != 1:
            ids = [d.id for d in devices]
            raise MeshError(
                f"rank {rank}'s devices {ids} belong to processes {processes}; every device of "
                f"a rank must belong to one process (build the mesh so that each submesh is "
                f"in one process, e.g. with jaxpp_mlir.launch.pipeline_devices)"
            )
        result.append(processes[0])
    return tuple(result)


class DistributedPlan:
    """This process's part of a plan spread over processes; call it like ``CompiledPlan``.

    Attributes:
      plan: the global plan.
      local: the ``CompiledPlan`` of this process's ranks (empty if it owns none).
      process_of: each rank's process.
      serial: the program's number, the same in every process.
    """

    def __init__(
        self,
        plan: ExecutionPlan,
        rank_devices: Sequence[Sequence[jax.Device]],
        *,
        num_user_inputs: int | None = None,
        options: DistributedOptions | None = None,
    ):
        self.plan = plan
        self.options = options or DistributedOptions.from_env()
        self.rank_devices = tuple(tuple(d) for d in rank_devices)
        if len(self.rank_devices) != plan.num_ranks:
            raise MeshError(
                f"the plan runs on {plan.num_ranks} ranks, but devices were given for "
                f"{len(self.rank_devices)} ranks"
            )
        for rank, devices in enumerate(self.rank_devices):
            if not devices:
                raise MeshError(f"rank {rank} has no devices")
        self.process = jax.process_index()
        self.num_processes = jax.process_count()
        self.process_of = rank_processes(self.rank_devices)
        self.local_ranks = tuple(r for r, p in enumerate(self.process_of) if p == self.process)
        self.num_user_inputs = len(plan.inputs) if num_user_inputs is None else num_user_inputs
        self.serial = next(_program_serials)
        self.calls = 0
        self._zero_cache: dict[tuple, jax.Array] = {}
        self._placeholders: dict[int, np.ndarray] = {}
        self._forwardable: dict[int, Any] = {}  # output index -> this process's last value
        self._dog = _watchdog.ensure_started(self.options.watchdog)
        self._exchange = Exchange(
            f"program{self.serial}",
            self.process,
            self.num_processes,
            self.options.setup_timeout_s,
            check=self._dog.check,
        )
        for p in range(self.num_processes):
            ranks = [r for r, q in enumerate(self.process_of) if q == p]
            self._dog.peer_roles[p] = f"ranks {', '.join(map(str, ranks))}" if ranks else "no rank"
        self._dog.set_state(f"setting up program {self.serial}")
        try:
            self._setup()
        except BaseException as e:
            if not self._dog.kv_lost:  # its calls would hang
                self._exchange.fail(f"{type(e).__name__}: {e}")
            raise
        self._dog.set_state(f"program {self.serial} ready")

    # ------------------------------------------------------------------ setup
    def _setup(self) -> None:
        plan = self.plan
        self.groups = plan_transfers(plan, self.process_of, self.num_processes)
        self._check_fingerprints()
        local_stage_names = [n for n, s in plan.executables.items() if s.rank in self.local_ranks]
        stage_exes, compiled = self._compile_stages(local_stage_names)
        sharded = any(len(d) > 1 for d in self.rank_devices)
        src_shardings = self._transfer_shardings(stage_exes, sharded)
        self._feeds = self._find_feeds()
        feed_shardings = self._feed_shardings(stage_exes, sharded)
        local_plan, extra = self._local_plan(src_shardings, feed_shardings)
        extra_exes = self._compile_extra(extra)
        executables = {**stage_exes, **extra_exes}
        self.local = CompiledPlan(local_plan, self.rank_devices, executables, compiled + len(extra))
        self.local_plan = local_plan
        self._exchange.gather("compiled", "ok")  # nobody transfers before all have compiled
        self._warm_up()
        self._exchange.gather("ready", "ok")

    def _check_fingerprints(self) -> None:
        digest = hashlib.sha256()
        digest.update(repr(self.plan.inputs).encode())
        digest.update(repr(self.plan.outputs).encode())
        digest.update(repr(self.plan.instructions).encode())
        for name in sorted(self.plan.executables):
            stage = self.plan.executables[name]
            digest.update(f"{name}|{stage.rank}|{stage.input_specs}|{stage.output_specs}".encode())
            digest.update(hashlib.sha256(stage.mlir_module.encode()).digest())
        digest.update(repr([[d.id for d in ds] for ds in self.rank_devices]).encode())
        mine = digest.hexdigest()[:16]
        prints = self._exchange.gather("plan", mine)
        differ = [p for p, fp in enumerate(prints) if fp != prints[0]]
        if differ:
            raise RuntimeFailure(
                f"the processes partitioned different programs (program {self.serial}): plan "
                f"fingerprints {prints}; every process must lower and partition the same step "
                f"with the same arguments, mesh and schedule"
            )

    def _compile_stages(self, names: list[str]) -> tuple[dict[str, Any], int]:
        keys: dict[tuple[str, tuple[int, ...]], int] = {}
        jobs: list[tuple[str, str, tuple[jax.Device, ...]]] = []
        job_of: dict[str, int] = {}
        for name in names:
            stage = self.plan.executables[name]
            devices = self.rank_devices[stage.rank]
            key = (stage.mlir_module, tuple(d.id for d in devices))
            if key not in keys:
                keys[key] = len(jobs)
                jobs.append((name, stage.mlir_module, devices))
            job_of[name] = keys[key]
        compiled = _compile.compile_stages(jobs)
        exes = {name: compiled[job] for name, job in job_of.items()}
        for name in names:
            stage = self.plan.executables[name]
            _compile.check_signature(
                name,
                exes[name],
                stage.input_specs,
                stage.output_specs,
                len(self.rank_devices[stage.rank]),
            )
        return exes, len(jobs)

    # ------------------------------------------------------------- shardings
    def _value_sharding(self, exes: dict[str, Any], rank: int, value: int) -> Sharding:
        """How ``rank`` holds ``value``: its producer's output layout, else its first
        reader's input layout, else replicated."""
        devices = self.rank_devices[rank]
        if len(devices) == 1:
            return jax.sharding.SingleDeviceSharding(devices[0])
        for inst in self.plan.instructions:
            if isinstance(inst, RunStage) and inst.rank == rank and value in inst.outputs:
                shardings = _transfer.executable_shardings(
                    exes[inst.executable], devices, len(inst.outputs), outputs=True
                )
                return shardings[inst.outputs.index(value)]
        for inst in self.plan.instructions:
            if isinstance(inst, RunStage) and inst.rank == rank and value in inst.inputs:
                shardings = _transfer.executable_shardings(
                    exes[inst.executable], devices, len(inst.inputs), outputs=False
                )
                return shardings[inst.inputs.index(value)]
        return _transfer.replicated_sharding(devices)

    def _share(self, name: str, mine: dict[str, str], sharded: bool) -> dict[str, str]:
        """Merges every process's ``mine`` (HLO sharding strings) through the store."""
        if not sharded:
            return {}
        merged: dict[str, str] = {}
        for part in self._exchange.gather(name, json.dumps(mine)):
            merged.update(json.loads(part))
        return merged

    def _transfer_shardings(self, exes: dict[str, Any], sharded: bool) -> dict[str, str]:
        """Per transfer (key ``group/position``), the sender's layout as HLO sharding text."""
        mine = {}
        for group in self.groups:
            if group.src_process != self.process:
                continue
            for n, t in enumerate(group.transfers):
                sharding = self._value_sharding(exes, t.src_rank, t.value)
                mine[f"{group.index}/{n}"] = str(jc.hlo_sharding(sharding, len(t.spec.shape)))
        return self._share("transfer-shardings", mine, sharded)

    def _feed_shardings(self, exes: dict[str, Any], sharded: bool) -> dict[str, str]:
        mine = {}
        for feed in self._feeds:
            if feed.src_process == self.process:
                out = self.plan.outputs[feed.output]
                sharding = self._value_sharding(exes, out.rank, out.value)
                mine[str(feed.output)] = str(jc.hlo_sharding(sharding, len(out.spec.shape)))
        return self._share("feed-shardings", mine, sharded)

    def _sharding(self, rank: int, text: str | None) -> Sharding:
        devices = self.rank_devices[rank]
        if text is None or len(devices) == 1:
            return jax.sharding.SingleDeviceSharding(devices[0])
        return jc.sharding_from_hlo_text(devices, text)

    # ------------------------------------------------------------- feeds
    def _find_feeds(self) -> list[Feed]:
        """Outputs that may come back as an input needed on several processes."""
        feeds = []
        for k, binding in enumerate(self.plan.inputs[: self.num_user_inputs]):
            processes = {self.process_of[r] for r in binding.ranks}
            if len(processes) < 2:
                continue
            for j, out in enumerate(self.plan.outputs):
                src = self.process_of[out.rank]
                if out.spec != binding.spec or src not in processes:
                    continue
                for dst in sorted(processes - {src}):
                    dst_rank = next(r for r in binding.ranks if self.process_of[r] == dst)
                    feeds.append(Feed(j, k, out.rank, dst_rank, src, dst))
        return feeds

    # ------------------------------------------------------------- local plan
    def _local_plan(
        self, src_shardings: dict[str, str], feed_shardings: dict[str, str]
    ) -> tuple[ExecutionPlan, list[Extra]]:
        """This process's plan and the extra executables it needs (see ``local_plan``)."""
        builder = LocalPlanBuilder(
            self.plan, self.rank_devices, self.process, self.local_ranks, self._sharding
        )
        for group in self.groups:
            builder.add_group(group, src_shardings)
        self._feeds = [builder.add_feed(feed, feed_shardings) for feed in self._feeds]
        local_plan = builder.build()
        self._uses = builder.uses
        return local_plan, builder.extra

    def _compile_extra(self, extra: list[Extra]) -> dict[str, Any]:
        """Compiles the transfer and receive-buffer modules; one executable per transfer use."""
        jobs = [(name, stage.mlir_module, devices) for name, stage, devices, _ in extra]
        compiled = dict(
            zip([name for name, _, _, _ in extra], _compile.compile_stages(jobs), strict=True)
        )
        result: dict[str, Any] = {}
        bases = {}
        for name, stage, devices, layouts in extra:
            if layouts:  # receive buffers, rebuilt from their shards like transfer results
                result[name] = collectives.TransferExecutable(
                    compiled[name],
                    f"making rank {stage.rank}'s receive buffers",
                    self.process,
                    stage.output_specs,
                    layouts,
                    None,
                    None,
                    takes_inputs=False,
                )
            else:
                bases[name] = (stage, devices)
        self._first_use: dict[str, str] = {}  # transfer executable -> its first use
        for name, use in self._uses.items():
            stage, devices = bases[use.base]
            result[name] = collectives.TransferExecutable(
                compiled[use.base],
                use.description,
                use.peer,
                stage.output_specs,
                use.local_shardings,
                self._dog,
                devices,
            )
            self._first_use.setdefault(use.base, name)
        self._extra = result
        return result

    def _warm_up(self) -> None:
        """Runs every transfer executable once, in the global order of first use, so
        connections exist before the first step (both sides meet in the same order)."""
        first = set(self._first_use.values())
        order = [
            (inst.executable, inst.rank)
            for inst in self.local_plan.instructions
            if isinstance(inst, RunStage) and inst.executable in first
        ]
        seen = {name for name, _ in order}
        for feed in self._feeds:
            if feed.executable in first and feed.executable not in seen:
                seen.add(feed.executable)
                side = feed.src_rank if feed.src_process == self.process else feed.dst_rank
                order.append((feed.executable, side))
        self._dog.set_state(f"program {self.serial}: connecting transfers")
        for name, rank in order:
            exe = self._extra[name]
            self._run_transfer(
                name, [self._zeros(rank, a, i, name) for i, a in enumerate(exe.avals)]
            )
        jax.block_until_ready(list(self._zero_cache.values()))

    def _zeros(self, rank: int, aval: Any, position: int, name: str) -> jax.Array:
        """A cached array of zeros laid out as input ``position`` of transfer ``name``."""
        sharding = self._extra[name].local_shardings[position]
        key = (rank, aval.shape, str(aval.dtype), str(sharding))
        if key not in self._zero_cache:
            self._zero_cache[key] = jax.device_put(np.zeros(aval.shape, aval.dtype), sharding)
        return self._zero_cache[key]

    def _run_transfer(self, name: str, arguments: list[jax.Array]) -> list[jax.Array]:
        return self._extra[name].execute_sharded(arguments).consume_with_handlers()

    # ------------------------------------------------------------------- call
    def __call__(self, *args: Any) -> list[Any]:
        """Runs this process's part of the plan; returns every output (``RemoteOutput``
        for the ones held elsewhere), in ``plan.outputs`` order."""
        self._dog.check()
        if len(args) != len(self.plan.inputs):
            raise CallError(
                f"the program takes {len(self.plan.inputs)} arguments, but {len(args)} were given"
            )
        call = self.calls
        self.calls += 1
        self._dog.set_state(f"program {self.serial}, call {call}")
        args = list(args)
        if self._feeds:
            self._forward(args, call)
        local_args = []
        for k, (x, binding) in enumerate(zip(args, self.local_plan.inputs, strict=True)):
            if not binding.ranks:
                local_args.append(self._placeholder(k))
            elif isinstance(x, RemoteOutput):
                raise CallError(
                    f"argument {k} is needed by rank(s) {list(binding.ranks)} of this process, "
                    f"but it is {x!r}, held by another process; only an output of this "
                    f"program's previous call that is an input of ranks in several processes "
                    f"is forwarded automatically"
                )
            else:
                local_args.append(x)
        try:
            local_outputs = self.local(*local_args)
        except JaxppError as e:
            raise type(e)(f"process {self.process}: {e}") from e
        outputs: list[Any] = []
        it = iter(local_outputs)
        for j, out in enumerate(self.plan.outputs):
            if self.process_of[out.rank] == self.process:
                outputs.append(next(it))
            else:
                outputs.append(
                    RemoteOutput(
                        self.serial, call, j, out.rank, self.process_of[out.rank], out.spec
                    )
                )
        self._forwardable = {
            f.output: outputs[f.output] for f in self._feeds if f.src_process == self.process
        }
        self._dog.set_state(f"program {self.serial}, call {call} dispatched")
        return outputs

    def _placeholder(self, k: int) -> np.ndarray:
        if k not in self._placeholders:
            self._placeholders[k] = collectives.zeros_like_spec(self.plan.inputs[k].spec)
        return self._placeholders[k]

    def _forward(self, args: list[Any], call: int) -> None:
        """Forwards outputs of the previous call passed back as inputs needed elsewhere."""
        me = self.process
        needers = sorted({f.dst_process for f in self._feeds})
        candidates = {(f.output, f.input): f for f in self._feeds if f.dst_process == me}
        needs: list[tuple[int, int]] = []
        for j, k in sorted(candidates, key=lambda pair: (pair[1], pair[0])):
            x = args[k]
            if isinstance(x, RemoteOutput) and x.index == j and x.program == self.serial:
                if x.call != call - 1:
                    raise CallError(
                        f"argument {k} is output {j} of call {x.call} of this program; only "
                        f"outputs of the previous call are forwarded between processes"
                    )
                needs.append((j, k))
        exchange = self._exchange
        name = f"needs{call}"
        if me in needers:
            exchange.put(name, json.dumps(needs))
            exchange.delete(f"needs{call - 8}")
        all_needs: list[tuple[int, int, int]] = []  # (input, output, process)
        for p in needers:
            if p == me:
                all_needs += [(k, j, p) for j, k in needs]
            elif any(f.src_process == me and f.dst_process == p for f in self._feeds):
                text = exchange.get(name, p, self.options.watchdog.transfer_timeout_s)
                all_needs += [(k, j, p) for j, k in json.loads(text)]
        feeds = {(f.output, f.input, f.dst_process): f for f in self._feeds}
        for k, j, p in sorted(all_needs):
            feed = feeds[(j, k, p)]
            if feed.src_process == me:
                value = self._forwardable[j]
                self._run_transfer(feed.executable, [value])
            elif feed.dst_process == me:
                aval = self._extra[feed.executable].avals[0]
                buffer = self._zeros(feed.dst_rank, aval, 0, feed.executable)
                args[k] = self._run_transfer(feed.executable, [buffer])[0]

    def __repr__(self) -> str:
        ranks = ", ".join(map(str, self.local_ranks)) or "none"
        return (
            f"DistributedPlan(program {self.serial}, process {self.process} of "
            f"{self.num_processes}, ranks {ranks}, {len(self.groups)} cross-process transfer "
            f"groups)\n{self.local!r}"
        )


def gather(tree: Any) -> Any:
    """Every leaf of ``tree`` as a host numpy array, in every process.

    A ``RemoteOutput`` leaf comes from the process that holds it; any other
    leaf is this process's own value. With several processes this is a
    collective: every process calls it with trees of the same structure (the
    outputs of the same call), and it waits at most the transfer timeout.
    """
    leaves, tree_def = jax.tree_util.tree_flatten(tree)
    if jax.process_count() == 1:
        return jax.tree_util.tree_unflatten(tree_def, [np.asarray(x) for x in leaves])
    from jax.experimental import multihost_utils

    me = jax.process_index()
    dog = _watchdog.current()
    if dog is not None:
        dog.check()
    mine, owners = [], []
    for x in leaves:
        if isinstance(x, RemoteOutput):
            mine.append(np.zeros(x.shape, x.dtype))
            owners.append(x.process)
        else:
            mine.append(np.asarray(x))
            owners.append(me)
    if dog is None:
        stacked = multihost_utils.process_allgather(mine)
    else:
        with dog.waiting("gather of outputs (every process must call gather)", -1):
            stacked = multihost_utils.process_allgather(mine)
    return jax.tree_util.tree_unflatten(
        tree_def, [np.asarray(s[p]) for s, p in zip(stacked, owners, strict=True)]
    )


def compile_distributed(
    plan: ExecutionPlan,
    rank_devices: Sequence[Sequence[jax.Device]],
    *,
    num_user_inputs: int | None = None,
    options: DistributedOptions | None = None,
) -> DistributedPlan:
    """Compiles this process's part of ``plan`` (every process calls it, in the same order).

    ``num_user_inputs``: the first inputs that a caller may pass back from an
    earlier call's outputs (the rest, such as microbatch indices, never are).
    Raises ``ScheduleError`` before anything runs if the cross-process transfers
    would deadlock, ``MeshError`` if a rank spans processes.
    """
    if not isinstance(plan, ExecutionPlan):
        raise ScheduleError(f"compile_distributed takes an ExecutionPlan, got {type(plan)}")
    return DistributedPlan(plan, rank_devices, num_user_inputs=num_user_inputs, options=options)
