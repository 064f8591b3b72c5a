"""Setting up a distributed plan: each step a function that takes and returns values.

``set_up`` runs the steps in order: check the cross-process transfers, compare
plan fingerprints, compile this process's stages, agree on the layouts of
transferred values, build the local plan with its transfer executables and
compile those. Every step that talks to the other processes does so through
the ``Exchange`` it is given, with its timeouts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from typing import Any

import jax
from jax.sharding import Mesh, Sharding

from .. import _jax_compat as jc
from .. import transfer as _transfer
from ..compilation import compile as _compile
from ..errors import MeshError, RuntimeFailure
from ..execution.executor import CompiledPlan
from ..named_shardings import as_named
from ..plan import ExecutionPlan, RunStage
from . import collectives, ordering
from .coordination import Exchange
from .local_plan import Extra, Feed, LocalPlanBuilder, Use

RankDevices = tuple[tuple[jax.Device, ...], ...]


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where a distributed plan runs, seen from this process."""

    rank_devices: RankDevices
    process: int
    num_processes: int
    process_of: tuple[int, ...]  # each rank's process
    local_ranks: tuple[int, ...]  # the ranks this process owns


@dataclasses.dataclass(frozen=True)
class Setup:
    """What ``set_up`` made: this process's compiled part and its transfers."""

    groups: list[ordering.TransferGroup]
    local: CompiledPlan
    local_plan: ExecutionPlan
    feeds: list[Feed]  # with the transfer executable each one uses
    transfers: dict[str, Any]  # transfer and receive-buffer executables, by name
    first_use: dict[str, str]  # compiled transfer -> the name of its first use


def plan_transfers(
    plan: ExecutionPlan, process_of: Sequence[int], num_processes: int
) -> list[ordering.TransferGroup]:
    """The plan's cross-process transfer groups, checked: pairing, held values, no deadlock.

    Pure (no jax.distributed needed): ``process_of[r]`` is rank r's process.
    Raises ``PlanError`` for a plan that cannot run on these processes.
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


def set_up(
    plan: ExecutionPlan,
    where: Placement,
    *,
    num_user_inputs: int,
    exchange: Exchange,
    dog: Any,
    serial: int,
    rank_meshes: Sequence[Mesh] | None = None,
) -> Setup:
    """Checks, compiles and wires this process's part of ``plan`` (every process calls it)."""
    groups = plan_transfers(plan, where.process_of, where.num_processes)
    check_fingerprints(plan, where.rank_devices, exchange, serial)
    local_stage_names = [n for n, s in plan.executables.items() if s.rank in where.local_ranks]
    stage_exes, compiled = _compile.compile_plan_executables(
        plan, where.rank_devices, local_stage_names
    )
    sharded = any(len(d) > 1 for d in where.rank_devices)
    src_shardings = transfer_shardings(plan, where, groups, stage_exes, exchange, sharded)
    feeds = find_feeds(plan, where.process_of, num_user_inputs)
    feed_layouts = feed_shardings(plan, where, feeds, stage_exes, exchange, sharded)
    builder = LocalPlanBuilder(
        plan,
        where.rank_devices,
        where.process,
        where.local_ranks,
        lambda rank, text: sharding_from_text(where.rank_devices, rank, text),
    )
    for group in groups:
        builder.add_group(group, src_shardings)
    feeds = [builder.add_feed(feed, feed_layouts) for feed in feeds]
    local_plan = builder.build()
    transfers, first_use = compile_extra(builder.extra, builder.uses, where.process, dog)
    executables = {**stage_exes, **transfers}
    local = CompiledPlan(
        local_plan, where.rank_devices, executables, compiled + len(builder.extra), rank_meshes
    )
    return Setup(groups, local, local_plan, feeds, transfers, first_use)


def check_fingerprints(
    plan: ExecutionPlan, rank_devices: RankDevices, exchange: Exchange, serial: int
) -> None:
    """Raises ``RuntimeFailure`` unless every process partitioned the same plan."""
    digest = hashlib.sha256()
    digest.update(repr(plan.inputs).encode())
    digest.update(repr(plan.outputs).encode())
    digest.update(repr(plan.instructions).encode())
    for name in sorted(plan.executables):
        stage = plan.executables[name]
        digest.update(f"{name}|{stage.rank}|{stage.input_specs}|{stage.output_specs}".encode())
        digest.update(hashlib.sha256(stage.mlir_module.encode()).digest())
    digest.update(repr([[d.id for d in ds] for ds in rank_devices]).encode())
    mine = digest.hexdigest()[:16]
    prints = exchange.gather("plan", mine)
    differ = [p for p, fp in enumerate(prints) if fp != prints[0]]
    if differ:
        raise RuntimeFailure(
            f"the processes partitioned different programs (program {serial}): plan "
            f"fingerprints {prints}; every process must lower and partition the same step "
            f"with the same arguments, mesh and schedule"
        )


# ------------------------------------------------------------------ shardings


def value_sharding(
    plan: ExecutionPlan, rank_devices: RankDevices, exes: dict[str, Any], rank: int, value: int
) -> Sharding:
    """How ``rank`` holds ``value``: its producer's output layout, else its first
    reader's input layout, else replicated."""
    devices = rank_devices[rank]
    if len(devices) == 1:
        return jax.sharding.SingleDeviceSharding(devices[0])
    for inst in plan.instructions:
        if isinstance(inst, RunStage) and inst.rank == rank and value in inst.outputs:
            shardings = _transfer.executable_shardings(
                exes[inst.executable], devices, len(inst.outputs), outputs=True
            )
            return shardings[inst.outputs.index(value)]
    for inst in plan.instructions:
        if isinstance(inst, RunStage) and inst.rank == rank and value in inst.inputs:
            shardings = _transfer.executable_shardings(
                exes[inst.executable], devices, len(inst.inputs), outputs=False
            )
            return shardings[inst.inputs.index(value)]
    return _transfer.replicated_sharding(devices)


def share(exchange: Exchange, name: str, mine: dict[str, str], sharded: bool) -> dict[str, str]:
    """Merges every process's ``mine`` (HLO sharding strings) through the store."""
    if not sharded:
        return {}
    merged: dict[str, str] = {}
    for part in exchange.gather(name, json.dumps(mine)):
        merged.update(json.loads(part))
    return merged


def transfer_shardings(
    plan: ExecutionPlan,
    where: Placement,
    groups: list[ordering.TransferGroup],
    exes: dict[str, Any],
    exchange: Exchange,
    sharded: bool,
) -> dict[str, str]:
    """Per transfer (key ``group/position``), the sender's layout as HLO sharding text."""
    mine = {}
    for group in groups:
        if group.src_process != where.process:
            continue
        for n, t in enumerate(group.transfers):
            sharding = value_sharding(plan, where.rank_devices, exes, t.src_rank, t.value)
            mine[f"{group.index}/{n}"] = str(jc.hlo_sharding(sharding, len(t.spec.shape)))
    return share(exchange, "transfer-shardings", mine, sharded)


def feed_shardings(
    plan: ExecutionPlan,
    where: Placement,
    feeds: list[Feed],
    exes: dict[str, Any],
    exchange: Exchange,
    sharded: bool,
) -> dict[str, str]:
    """Per forwarded output (key: its index), the sender's layout as HLO sharding text."""
    mine = {}
    for feed in feeds:
        if feed.src_process == where.process:
            out = plan.outputs[feed.output]
            sharding = value_sharding(plan, where.rank_devices, exes, out.rank, out.value)
            mine[str(feed.output)] = str(jc.hlo_sharding(sharding, len(out.spec.shape)))
    return share(exchange, "feed-shardings", mine, sharded)


def output_shardings(
    plan: ExecutionPlan,
    where: Placement,
    exes: dict[str, Any],
    exchange: Exchange,
    rank_meshes: Sequence[Mesh] | None,
) -> dict[int, Sharding]:
    """Every output's sharding (key: its index), this process's and the others', as a
    ``NamedSharding`` on its rank's mesh where ``rank_meshes`` are given."""
    mine = {}
    for j, out in enumerate(plan.outputs):
        if where.process_of[out.rank] == where.process:
            sharding = value_sharding(plan, where.rank_devices, exes, out.rank, out.value)
            mine[str(j)] = str(jc.hlo_sharding(sharding, len(out.spec.shape)))
    texts = share(exchange, "output-shardings", mine, True)
    result = {}
    for key, text in texts.items():
        out = plan.outputs[int(key)]
        sharding = sharding_from_text(where.rank_devices, out.rank, text)
        if rank_meshes is not None:
            sharding = as_named(sharding, rank_meshes[out.rank], len(out.spec.shape))
        result[int(key)] = sharding
    return result


def sharding_from_text(rank_devices: RankDevices, rank: int, text: str | None) -> Sharding:
    """Rank ``rank``'s layout from HLO sharding text (None: its first device)."""
    devices = rank_devices[rank]
    if text is None or len(devices) == 1:
        return jax.sharding.SingleDeviceSharding(devices[0])
    return jc.sharding_from_hlo_text(devices, text)


# ----------------------------------------------------------------- transfers


def find_feeds(plan: ExecutionPlan, process_of: Sequence[int], num_user_inputs: int) -> list[Feed]:
    """Outputs that may come back as an input needed on several processes."""
    feeds = []
    for k, binding in enumerate(plan.inputs[:num_user_inputs]):
        processes = {process_of[r] for r in binding.ranks}
        if len(processes) < 2:
            continue
        for j, out in enumerate(plan.outputs):
            src = process_of[out.rank]
            if out.spec != binding.spec or src not in processes:
                continue
            for dst in sorted(processes - {src}):
                dst_rank = next(r for r in binding.ranks if process_of[r] == dst)
                feeds.append(Feed(j, k, out.rank, dst_rank, src, dst))
    return feeds


def compile_extra(
    extra: list[Extra], uses: dict[str, Use], process: int, dog: Any
) -> tuple[dict[str, Any], dict[str, str]]:
    """Compiles the transfer and receive-buffer modules; one executable per transfer use.

    Returns the executables by name and, per compiled transfer, its first use.
    """
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
                process,
                stage.output_specs,
                layouts,
                None,
                None,
                takes_inputs=False,
            )
        else:
            bases[name] = (stage, devices)
    first_use: dict[str, str] = {}  # transfer executable -> its first use
    for name, use in uses.items():
        stage, devices = bases[use.base]
        result[name] = collectives.TransferExecutable(
            compiled[use.base],
            use.description,
            use.peer,
            stage.output_specs,
            use.local_shardings,
            dog,
            devices,
        )
        first_use.setdefault(use.base, name)
    return result, first_use


def warm_up_order(setup: Setup, process: int) -> list[tuple[str, int]]:
    """Each compiled transfer's first use and the rank it runs on, in the global order
    (both sides of a transfer meet in the same order)."""
    first = set(setup.first_use.values())
    order = [
        (inst.executable, inst.rank)
        for inst in setup.local_plan.instructions
        if isinstance(inst, RunStage) and inst.executable in first
    ]
    seen = {name for name, _ in order}
    for feed in setup.feeds:
        if feed.executable in first and feed.executable not in seen:
            seen.add(feed.executable)
            side = feed.src_rank if feed.src_process == process else feed.dst_rank
            order.append((feed.executable, side))
    return order
