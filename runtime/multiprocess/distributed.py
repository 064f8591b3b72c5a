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

import contextlib
import dataclasses
import itertools
import json
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, Sharding

from .. import options, records
from ..errors import CallError, JaxppError, MeshError, PlanError
from ..execution.constants import place_constants
from ..failure import watchdog as _watchdog
from ..plan import ExecutionPlan
from ..stacked_array import StackedArray
from . import collectives
from .assembled import assemble_output, remote_piece, whole_shardings
from .coordination import Exchange
from .distributed_setup import (
    Placement,
    plan_transfers,
    rank_processes,
    set_up,
    warm_up_order,
)
from .local_plan import local_outputs
from .remote_output import RemoteOutput
from .shared_outputs import OutputSharing, share_owners

__all__ = [
    "DistributedOptions",
    "DistributedPlan",
    "RemoteOutput",
    "compile_distributed",
    "gather",
    "plan_transfers",
    "rank_processes",
]

_program_serials = itertools.count()


@records.frozen
class DistributedOptions:
    """Limits of a multi-process run, in seconds.

    ``setup_timeout_s`` bounds each setup barrier (a peer still partitioning
    or compiling); the watchdog's options bound transfers and heartbeats.
    ``shared_output_max_bytes``: outputs up to this size reach every process
    after each call (``shared_outputs``). Environment variables override the
    defaults (``runtime.options``).
    """

    setup_timeout_s: float = options.SETUP_TIMEOUT.default
    shared_output_max_bytes: int = options.SHARED_OUTPUT_MAX_BYTES.default
    watchdog: _watchdog.WatchdogOptions = dataclasses.field(
        default_factory=_watchdog.WatchdogOptions
    )

    @classmethod
    def from_env(cls) -> DistributedOptions:
        return cls(
            setup_timeout_s=options.SETUP_TIMEOUT.value(),
            shared_output_max_bytes=options.SHARED_OUTPUT_MAX_BYTES.value(),
            watchdog=_watchdog.WatchdogOptions.from_env(),
        )


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
        rank_meshes: Sequence[Mesh] | None = None,
        mpmd_axis: str | None = None,
    ):
        self.plan = plan
        self.rank_meshes = rank_meshes  # given: arrays get NamedShardings on these
        self.mpmd_axis = mpmd_axis  # the rank_meshes' axis that stacks ranks, if known
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
        self.num_user_inputs = plan.num_user_inputs if num_user_inputs is None else num_user_inputs
        self.serial = next(_program_serials)
        self.calls = 0
        self._zero_cache: dict[tuple, jax.Array] = {}
        self._placeholders: dict[int, np.ndarray] = {}
        self._forwardable: dict[int, Any] = {}  # output index -> this process's last value
        # Output index (and (index, k) for its piece k) -> its sharding.
        self.output_shardings: dict[int | tuple[int, int], Sharding] = {}
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
        self._sharing = OutputSharing(
            self.serial,
            self.process,
            self.num_processes,
            share_owners(plan.outputs, self.process_of, self.options.shared_output_max_bytes),
            [out.spec for out in plan.outputs],
            self.options.watchdog.transfer_timeout_s,
        )
        self._dog.set_state(f"program {self.serial} ready")

    # ------------------------------------------------------------------ setup
    def _setup(self) -> None:
        where = Placement(
            self.rank_devices, self.process, self.num_processes, self.process_of, self.local_ranks
        )
        setup = set_up(
            self.plan,
            where,
            num_user_inputs=self.num_user_inputs,
            exchange=self._exchange,
            dog=self._dog,
            serial=self.serial,
            rank_meshes=self.rank_meshes,
        )
        self.groups = setup.groups
        self.local = setup.local
        self.local_plan = setup.local_plan
        self._feeds = setup.feeds
        self._transfers = setup.transfers
        self.output_shardings = setup.output_shardings
        self._local_outputs = [key for key, _ in local_outputs(self.plan, self.local_ranks)]
        self._whole = whole_shardings(
            self.plan, self.output_shardings, self.rank_meshes, self.mpmd_axis
        )
        self._exchange.gather("compiled", "ok")  # nobody transfers before all have compiled
        self._warm_up(warm_up_order(setup, self.process))
        self._exchange.gather("ready", "ok")

    def _warm_up(self, order: list[tuple[str, int]]) -> None:
        """Runs every transfer executable once, in the global order of first use, so
        connections exist before the first step (both sides meet in the same order)."""
        self._dog.set_state(f"program {self.serial}: connecting transfers")
        for name, rank in order:
            exe = self._transfers[name]
            self._run_transfer(
                name, [self._zeros(rank, a, i, name) for i, a in enumerate(exe.avals)]
            )
        jax.block_until_ready(list(self._zero_cache.values()))

    def _zeros(self, rank: int, aval: Any, position: int, name: str) -> jax.Array:
        """A cached array of zeros laid out as input ``position`` of transfer ``name``."""
        sharding = self._transfers[name].local_shardings[position]
        key = (rank, aval.shape, str(aval.dtype), str(sharding))
        if key not in self._zero_cache:
            self._zero_cache[key] = jax.device_put(np.zeros(aval.shape, aval.dtype), sharding)
        return self._zero_cache[key]

    def _run_transfer(self, name: str, arguments: list[jax.Array]) -> list[jax.Array]:
        return self._transfers[name].execute_sharded(arguments).consume_with_handlers()

    def place_constants(self) -> list[Any]:
        """The plan's constants: placed for this process's ranks, host arrays for others'."""
        return place_constants(self.plan, self.rank_devices, self.local.input_shardings)

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
        self._sharing.before_call(args)
        if self._feeds:
            self._forward(args, call)
        local_args = []
        for k, (x, binding) in enumerate(zip(args, self.local_plan.inputs, strict=True)):
            if not binding.ranks and not binding.pieces:
                local_args.append(self._placeholder(k))
            elif isinstance(x, RemoteOutput) and x.loader is not None:
                local_args.append(x.loader())  # a checkpoint leaf restored for another process
            elif isinstance(x, RemoteOutput) and x.shared is not None:
                local_args.append(x.value())  # a small output every process received
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
        held = dict(zip(self._local_outputs, local_outputs, strict=True))
        mine = {j: array for (j, k), array in held.items() if k is None}
        shared = self._sharing.after_call(call, mine)
        outputs = [
            mine[j]
            if j in mine
            else self._assembled(j, held, call)
            if out.pieces
            else RemoteOutput(
                self.serial,
                call,
                j,
                out.rank,
                self.process_of[out.rank],
                out.spec,
                self.output_shardings.get(j),
                shared=shared.get(j),
            )
            for j, out in enumerate(self.plan.outputs)
        ]
        self._forwardable = {
            f.output: outputs[f.output] for f in self._feeds if f.src_process == self.process
        }
        self._dog.set_state(f"program {self.serial}, call {call} dispatched")
        return outputs

    def _assembled(self, j: int, held: dict, call: int) -> Any:
        """Output ``j``, made of pieces: one global array, or a ``StackedArray``."""
        remote = remote_piece(self.serial, call, j, self.process_of, self.output_shardings)
        return assemble_output(j, self.plan.outputs[j], held, self._whole[j], remote)

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
                aval = self._transfers[feed.executable].avals[0]
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

    A ``RemoteOutput`` leaf (or ``StackedArray`` chunk) comes from the process that
    holds it, a global array (a stacked output sharded over processes) from every
    process holding part of it; any other leaf is this process's own value. With
    several processes this is a collective: every process calls it with trees of the
    same structure (the outputs of the same call), and it waits at most the transfer
    timeout.
    """
    leaves, tree_def = jax.tree_util.tree_flatten(tree)
    if jax.process_count() == 1:
        return jax.tree_util.tree_unflatten(tree_def, [np.asarray(x) for x in leaves])
    from jax.experimental import multihost_utils

    me = jax.process_index()
    dog = _watchdog.current()
    if dog is not None:
        dog.check()
    mine, owners, spans = [], [], []  # per part; per leaf, its parts' [first, last)
    for x in leaves:
        parts = [c.array for c in x.chunks] if isinstance(x, StackedArray) else [x]
        spans.append((len(mine), len(mine) + len(parts)))
        for part in parts:
            if isinstance(part, RemoteOutput):
                mine.append(np.zeros(part.shape, part.dtype))
                owners.append(part.process)
            elif isinstance(part, jax.Array) and not part.is_fully_addressable:
                mine.append(np.zeros((), np.int8))  # gathered below, as a global array
                owners.append(-1)
            else:
                mine.append(np.asarray(part))
                owners.append(me)
    what = "gather of outputs (every process must call gather)"
    with dog.waiting(what, -1) if dog is not None else contextlib.nullcontext():
        stacked = multihost_utils.process_allgather(mine)
        whole = {
            i: multihost_utils.process_allgather(part, tiled=True)
            for i, (part, owner) in enumerate(zip(_parts(leaves), owners, strict=True))
            if owner == -1
        }
    gathered = [
        np.asarray(whole[i]) if p == -1 else np.asarray(s[p])
        for i, (s, p) in enumerate(zip(stacked, owners, strict=True))
    ]
    result = [
        gathered[first] if last - first == 1 and not isinstance(x, StackedArray)
        else np.concatenate(gathered[first:last], axis=0)
        for x, (first, last) in zip(leaves, spans, strict=True)
    ]  # fmt: skip
    return jax.tree_util.tree_unflatten(tree_def, result)


def _parts(leaves: Sequence[Any]) -> list[Any]:
    """Each leaf's parts in order: a ``StackedArray``'s chunks, any other leaf itself."""
    return [
        part
        for x in leaves
        for part in ([c.array for c in x.chunks] if isinstance(x, StackedArray) else [x])
    ]


def compile_distributed(
    plan: ExecutionPlan,
    rank_devices: Sequence[Sequence[jax.Device]],
    *,
    num_user_inputs: int | None = None,
    options: DistributedOptions | None = None,
    rank_meshes: Sequence[Mesh] | None = None,
    mpmd_axis: str | None = None,
) -> DistributedPlan:
    """Compiles this process's part of ``plan`` (every process calls it, in the same order).

    ``num_user_inputs``: the first inputs that a caller may pass back from an
    earlier call's outputs (the rest, such as microbatch indices, never are;
    default: the inputs before the plan's constants). Raises ``PlanError``
    before anything runs if the cross-process transfers would deadlock,
    ``MeshError`` if a rank spans processes. With ``rank_meshes`` (rank r's
    submesh), outputs, this process's and the others', carry ``NamedSharding``s
    on them; with ``mpmd_axis`` too, an output made of equal pieces on distinct ranks is
    one global array sharded along that axis (``assembled``).
    """
    if not isinstance(plan, ExecutionPlan):
        raise PlanError(f"compile_distributed takes an ExecutionPlan, got {type(plan)}")
    return DistributedPlan(
        plan,
        rank_devices,
        num_user_inputs=num_user_inputs,
        options=options,
        rank_meshes=rank_meshes,
        mpmd_axis=mpmd_axis,
    )
