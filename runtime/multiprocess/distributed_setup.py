"""Setting up a distributed plan: each step a function that takes and returns values.

``set_up`` runs the steps in order: check the cross-process transfers, compare
plan fingerprints, compile this process's stages, read the layouts of
transferred values and outputs from the plan's value table (exchanging, as
``Layout`` data, only those it leaves to XLA), build the local plan with its
transfer executables and compile those. Every step that talks to the other processes does so through
the ``Exchange`` it is given, with its timeouts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import jax
from jax.sharding import Mesh, Sharding

from .. import records
from .. import transfer as _transfer
from ..compilation import compile as _compile
from ..errors import MeshError, RuntimeFailure
from ..executable import Executable
from ..execution.executor import CompiledPlan
from ..instructions import run
from ..named_shardings import as_named, layout_sharding, sharding_layout
from ..plan import ExecutionPlan, Layout
from . import collectives, ordering
from .coordination import Exchange
from .local_plan import Extra, Feed, HeldLayout, LocalPlanBuilder, Use

RankDevices = tuple[tuple[jax.Device, ...], ...]


@records.frozen
class Placement:
    """Where a distributed plan runs, seen from this process."""

    rank_devices: RankDevices
    process: int
    num_processes: int
    process_of: tuple[int, ...]  # each rank's process
    local_ranks: tuple[int, ...]  # the ranks this process owns


@records.frozen
class Setup:
    """What ``set_up`` made: this process's compiled part and its transfers."""

    groups: list[ordering.TransferGroup]
    local: CompiledPlan
    local_plan: ExecutionPlan
    feeds: list[Feed]  # with the transfer executable each one uses
    transfers: dict[
        str, collectives.TransferExecutable
    ]  # transfer and receive-buffer executables, by name
    first_use: dict[str, str]  # compiled transfer -> the name of its first use
    output_shardings: dict[int | tuple[int, int], Sharding]  # by index (and piece)


def plan_transfers(
    plan: ExecutionPlan, process_of: Sequence[int], num_processes: int
) -> list[ordering.TransferGroup]:
    """The plan's cross-process transfer groups, checked: pairing, held values, no deadlock.

    Pure (no jax.distributed needed): ``process_of[r]`` is rank r's process.
    Raises ``PlanError`` for a plan that cannot run on these processes.
    """
    transfers = ordering.cross_transfers(plan, process_of)
    groups = ordering.group_transfers(transfers)
    ordering.check_sender_holds_values(plan, groups)
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
    feeds = find_feeds(plan, where.process_of, num_user_inputs)
    held = held_values(plan, groups, feeds)
    layouts = held_layouts(plan, where, held, stage_exes, exchange)
    builder = LocalPlanBuilder(
        plan,
        where.rank_devices,
        where.process,
        where.local_ranks,
        lambda rank, layout: sharding_on(where.rank_devices, rank, layout),
    )
    for group in groups:
        builder.add_group(
            group, [layouts[f"transfer/{group.index}/{n}"] for n in range(len(group.transfers))]
        )
    feeds = [builder.add_feed(feed, layouts[f"feed/{feed.output}"]) for feed in feeds]
    local_plan = builder.build()
    transfers, first_use = compile_extra(builder.extra, builder.uses, where.process, dog)
    executables = {**stage_exes, **transfers}
    local = CompiledPlan(
        local_plan, where.rank_devices, executables, compiled + len(builder.extra), rank_meshes
    )
    outputs = output_shardings(plan, where, layouts, rank_meshes)
    return Setup(groups, local, local_plan, feeds, transfers, first_use, outputs)


def check_fingerprints(
    plan: ExecutionPlan, rank_devices: RankDevices, exchange: Exchange, serial: int
) -> None:
    """Raises ``RuntimeFailure`` unless every process partitioned the same plan."""
    digest = hashlib.sha256()
    digest.update(repr(plan.inputs).encode())
    digest.update(repr(plan.outputs).encode())
    digest.update(repr(plan.instructions).encode())
    digest.update(repr(plan.constants).encode())
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


# ------------------------------------------------------------------- layouts


@records.frozen
class Held:
    """A value as ``rank`` holds it (a transfer's, a forwarded or a program output)."""

    rank: int
    value: int
    ndim: int


def value_sharding(
    plan: ExecutionPlan,
    rank_devices: RankDevices,
    exes: Mapping[str, Executable],
    rank: int,
    value: int,
) -> Sharding:
    """How ``rank`` holds ``value``: the layout of the run that fixes it (its producer's
    output, else its first reader's input), read from the compiled executable; else
    replicated."""
    devices = rank_devices[rank]
    if len(devices) == 1:
        return jax.sharding.SingleDeviceSharding(devices[0])
    info = plan.values.get((rank, value))
    if info is None or info.layout_at is None:
        return _transfer.replicated_sharding(devices)
    inst = plan.instructions[info.layout_at]
    outputs = info.layout_at == info.defined_at
    values = inst.writes() if outputs else inst.reads()
    shardings = _transfer.executable_shardings(
        exes[inst.executable], devices, len(values), outputs=outputs
    )
    return shardings[values.index(value)]


def plan_layout(plan: ExecutionPlan, rank: int, num_devices: int, held: Held) -> Layout | None:
    """The layout ``value_sharding`` finds, as the plan states it (None: XLA chooses)."""
    info = plan.values.get((rank, held.value))
    if info is None or info.layout_at is None:
        return Layout((("replicated", num_devices),), ((),) * held.ndim)
    return info.layout


def held_layouts(
    plan: ExecutionPlan,
    where: Placement,
    held: dict[str, Held],
    exes: Mapping[str, Executable],
    exchange: Exchange,
) -> dict[str, HeldLayout]:
    """Each held value's layout (by key), from the plan; the ones the plan leaves to
    XLA on ranks of several devices are read from the compiled executable by the process
    holding them and exchanged, in one round, as ``Layout`` data."""
    result: dict[str, HeldLayout] = {}
    unknown, mine = [], {}
    for key, h in held.items():
        devices = where.rank_devices[h.rank]
        if len(devices) == 1:
            result[key] = None
            continue
        result[key] = plan_layout(plan, h.rank, len(devices), h)
        if result[key] is None:
            unknown.append(key)
            if where.process_of[h.rank] == where.process:
                sharding = value_sharding(plan, where.rank_devices, exes, h.rank, h.value)
                mine[key] = layout_data(_layout_of(sharding, devices, h))
    if unknown:
        for part in exchange.gather("layouts", json.dumps(mine)):
            result.update({key: layout_from_data(data) for key, data in json.loads(part).items()})
    return result


def _layout_of(sharding: Sharding, devices: Sequence[jax.Device], held: Held) -> Layout:
    layout = sharding_layout(sharding, devices, held.ndim)
    if layout is None:
        raise MeshError(
            f"rank {held.rank} holds value {held.value} as {sharding}, which no mesh layout "
            "over its devices describes, so other processes cannot be told: give the value "
            "a sharding in the step (jax.lax.with_sharding_constraint)"
        )
    return layout


def layout_data(layout: Layout) -> dict[str, list]:
    """``layout`` as JSON data: ``{"mesh_axes": [[name, size]...], "dims": [[axis...]...]}``."""
    return {"mesh_axes": [list(axis) for axis in layout.mesh_axes], "dims": list(layout.dims)}


def layout_from_data(data: dict[str, list]) -> Layout:
    """The ``Layout`` that ``layout_data`` gave."""
    return Layout(
        tuple((str(name), int(size)) for name, size in data["mesh_axes"]),
        tuple(tuple(map(str, dim)) for dim in data["dims"]),
    )


def held_values(
    plan: ExecutionPlan, groups: list[ordering.TransferGroup], feeds: list[Feed]
) -> dict[str, Held]:
    """The values whose layout a process needs, keyed ``transfer/group/position``,
    ``feed/output`` and ``output/index``: sent ones on their sender, outputs on their rank."""
    held = {}
    for group in groups:
        for n, t in enumerate(group.transfers):
            held[f"transfer/{group.index}/{n}"] = Held(t.src_rank, t.value, len(t.spec.shape))
    for feed in feeds:
        out = plan.outputs[feed.output]
        held[f"feed/{feed.output}"] = Held(out.rank, out.value, len(out.spec.shape))
    for j, out in enumerate(plan.outputs):
        for k, piece in enumerate(out.pieces):
            held[f"output/{j}/{k}"] = Held(piece.rank, piece.value, len(out.spec.shape))
        if not out.pieces:
            held[f"output/{j}"] = Held(out.rank, out.value, len(out.spec.shape))
    return held


def sharding_on(rank_devices: RankDevices, rank: int, layout: HeldLayout) -> Sharding:
    """Rank ``rank``'s sharding in ``layout`` (None, or one device: its first device)."""
    devices = rank_devices[rank]
    if layout is None or len(devices) == 1:
        return jax.sharding.SingleDeviceSharding(devices[0])
    sharding = layout_sharding(layout, devices)
    if sharding is None:
        raise MeshError(f"rank {rank}'s {len(devices)} devices cannot hold layout {layout}")
    return sharding


def output_shardings(
    plan: ExecutionPlan,
    where: Placement,
    layouts: dict[str, HeldLayout],
    rank_meshes: Sequence[Mesh] | None,
) -> dict[int | tuple[int, int], Sharding]:
    """Every output's sharding (key: its index; ``(index, k)`` for its piece k), this
    process's and the others', as a ``NamedSharding`` on its rank's mesh where
    ``rank_meshes`` are given."""
    result: dict[int | tuple[int, int], Sharding] = {}
    for j, out in enumerate(plan.outputs):
        held = [((j, k), p.rank, f"output/{j}/{k}") for k, p in enumerate(out.pieces)]
        for key, rank, name in held or [(j, out.rank, f"output/{j}")]:
            sharding = sharding_on(where.rank_devices, rank, layouts[name])
            if rank_meshes is not None:
                sharding = as_named(sharding, rank_meshes[rank], len(out.spec.shape))
            result[key] = sharding
    return result


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
            if out.spec != binding.spec or src not in processes or out.pieces:
                continue
            for dst in sorted(processes - {src}):
                dst_rank = next(r for r in binding.ranks if process_of[r] == dst)
                feeds.append(Feed(j, k, out.rank, dst_rank, src, dst))
    return feeds


def compile_extra(
    extra: list[Extra], uses: dict[str, Use], process: int, dog: Any
) -> tuple[dict[str, collectives.TransferExecutable], dict[str, str]]:
    """Compiles the transfer and receive-buffer modules; one executable per transfer use.

    Returns the executables by name and, per compiled transfer, its first use.
    """
    jobs = [(name, stage.mlir_module, devices) for name, stage, devices, _ in extra]
    compiled = dict(
        zip([name for name, _, _, _ in extra], _compile.compile_stages(jobs), strict=True)
    )
    result: dict[str, collectives.TransferExecutable] = {}
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
        if inst.kind == run.KIND and inst.executable in first
    ]
    seen = {name for name, _ in order}
    for feed in setup.feeds:
        if feed.executable in first and feed.executable not in seen:
            seen.add(feed.executable)
            side = feed.src_rank if feed.src_process == process else feed.dst_rank
            order.append((feed.executable, side))
    return order
