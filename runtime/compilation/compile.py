"""Compiling stage modules through the PJRT client, without tracing.

Each ``StageExecutable`` is StableHLO text with a public ``@main``. It is
compiled for one rank's submesh (``num_partitions`` = the submesh size) by the
client that owns the submesh's devices. Distinct modules compile concurrently:
XLA releases the GIL while it compiles (8 tiny stages took about 90 ms on 4 threads
against 165 ms serially on the 2-core development machine). The pool has a thread per
core, at least 2: XLA compiles each program on threads of its own too, so more threads
than cores only add CPU time (``_cores``). A program this process compiled already, for
these or other devices, is taken from memory instead (``executable_memo``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import jax
import numpy as np

from .. import _jax_compat as jc
from .. import options
from ..errors import RuntimeFailure
from ..observation import trace as _trace
from ..plan import ExecutionPlan, TensorSpec
from . import compile_pool, executable_cache, executable_memo
from .progress import COMPILED, LOADED, REUSED, CompileProgress
from .tier_up import TierUp

if TYPE_CHECKING:
    from . import merge

_logger = logging.getLogger("jaxpp_mlir.runtime.compilation.compile")
# One DEBUG record per program rebound to another rank's devices (see ``_rebind``).
_rebind_logger = logging.getLogger("jaxpp_mlir.runtime.compilation.compile.rebinds")

#: ``JAXPP_MLIR_MERGE_PROGRAMS``' mode of union programs for the first steps only.
FIRST_STEPS = "first-steps"

# Executables made by this process through ``compile_stage``: compiled, loaded from the
# persistent cache or taken from memory (tests check that calling a compiled plan never
# compiles again).
compile_count = 0
_count_lock = threading.Lock()


def compile_stage(
    name: str, mlir_module: str, devices: Sequence[jax.Device]
) -> jc.LoadedExecutable:
    """Compiles one stage module for ``devices``, or loads it (see ``compile_or_load``)."""
    return compile_or_load(name, mlir_module, devices)[0]


def compile_or_load(
    name: str, mlir_module: str, devices: Sequence[jax.Device]
) -> tuple[jc.LoadedExecutable, str]:
    """Compiles one stage module for ``devices`` (one partition per device), or loads it
    from JAX's persistent compilation cache when that is on (``executable_cache``), or,
    when this process has compiled or loaded the same program already (for these or other
    devices of the same kind), takes it from memory (``executable_memo``; stored in the
    persistent cache then too, as a compilation would be). Each call counts in
    ``compile_count``, however the executable was made.

    Returns the executable and how it was made: ``progress.COMPILED``, ``progress.LOADED``
    (from the persistent cache) or ``progress.REUSED`` (from memory). Raises
    ``RuntimeFailure`` naming the executable when XLA rejects it.
    """
    global compile_count
    devices = tuple(devices)
    client = devices[0].client
    options = compile_options(devices)
    started = time.time_ns() / 1000.0
    exe, slot = executable_cache.lookup(name, mlir_module, devices, options)
    how = LOADED if exe is not None else COMPILED
    memo_key = executable_memo.key(mlir_module, devices) if executable_memo.capacity() else None
    if exe is not None:
        if memo_key is not None:
            _remember_loaded(memo_key, mlir_module, devices, options, exe)
    elif memo_key is not None and (found := executable_memo.load(name, memo_key, devices, options)):
        exe, entry = found
        how = REUSED
        if slot is not None:
            executable_cache.store(slot, name, exe, entry.compile_seconds, entry.serialized)
    if exe is None:
        compile_started = time.perf_counter()
        try:
            exe = client.compile_and_load(mlir_module, jc.device_list(devices), options)
        except Exception as e:  # XLA raises JaxRuntimeError; parse errors vary
            raise RuntimeFailure(
                f"compiling executable {name!r} for devices {[d.id for d in devices]} failed: {e}"
            ) from e
        compile_seconds = time.perf_counter() - compile_started
        serialize = exe.serialize
        if memo_key is not None:
            entry = executable_memo.Entry(exe, devices, exe.serialize, compile_seconds)
            serialize = executable_memo.add(memo_key, entry).serialized
        if slot is not None:
            executable_cache.store(slot, name, exe, compile_seconds, serialize)
    with _count_lock:
        compile_count += 1
        hits, misses = executable_cache.stats()
        _logger.debug(
            "%s %r for devices %s in %.3f s (compilation %d of this process; persistent cache:"
            " %d hits, %d misses)",
            how,
            name,
            [d.id for d in devices],
            (time.time_ns() / 1000.0 - started) / 1e6,
            compile_count,
            hits,
            misses,
        )
    if _trace.ACTIVE is not None:  # tracing hook: a compile span
        _trace.ACTIVE.record_compile(name, started, time.time_ns() / 1000.0)
    return exe, how


def _remember_loaded(
    memo_key: executable_memo.Key,
    text: str,
    devices: tuple[jax.Device, ...],
    options: jc.CompileOptions,
    exe: jc.LoadedExecutable,
) -> None:
    """Keeps ``exe``, loaded from the persistent cache, in the in-memory cache; rebinding it
    reads its persistent entry (the loaded copy cannot be serialized on XLA:CPU)."""
    entry = executable_memo.find(memo_key)
    if entry is not None:
        entry.remember(devices, exe)
        return

    def serialize() -> bytes | None:
        return executable_cache.cached_serialization(text, devices, options)

    executable_memo.add(memo_key, executable_memo.Entry(exe, devices, serialize, 0.0))


def compile_stages(
    jobs: Sequence[tuple[str, str, Sequence[jax.Device]]],
    flops: Sequence[float] | None = None,
) -> list[jc.LoadedExecutable]:
    """Compiles ``(name, mlir_module, devices)`` jobs, concurrently when several: see
    ``start_stages``; returns the executables in job order."""
    return start_stages(jobs, flops).result()


class PendingStages:
    """Stage programs compiling on the pool's threads (``start_stages``): ``result``
    waits for them, ``abandon`` drops the jobs not started when the caller gives up."""

    def __init__(
        self,
        pool: compile_pool.CompilePool[jc.LoadedExecutable],
        count: int,
        progress: CompileProgress | None,
    ):
        self._pool, self._count, self._progress = pool, count, progress
        self._executables: list[jc.LoadedExecutable] | None = None

    def result(self) -> list[jc.LoadedExecutable]:
        """The executables in job order. A failing job raises its ``RuntimeFailure`` (the
        first one in job order of those that failed before it was seen), and the jobs
        not started by then are dropped; so does ``JAXPP_MLIR_COMPILE_TIMEOUT`` passing."""
        if self._executables is None:
            try:
                executables = [self._pool.result(index) for index in range(self._count)]
            except BaseException:
                if self._progress is not None:
                    self._progress.abandon()  # no "ready" line, no line refreshed after it
                raise
            if self._progress is not None:
                self._progress.finish()
            self._executables = executables
        return self._executables

    def abandon(self, cause: BaseException) -> None:
        """Drops the jobs not started yet (``cause`` is why); those running finish."""
        self._pool.cancel(cause)
        if self._progress is not None:
            self._progress.abandon()


def start_stages(
    jobs: Sequence[tuple[str, str, Sequence[jax.Device]]],
    flops: Sequence[float] | None = None,
    *,
    progress: bool = True,
) -> PendingStages:
    """Starts compiling ``(name, mlir_module, devices)`` jobs, concurrently when several.

    Jobs start in the order of their ``flops`` (each job's estimated floating-point
    operations per run, the compiler's ``StageExecutable.flops``), the most first, then
    of their module's length. Where XLA autotunes kernels (GPUs) the first compiles
    alone: the program with the most matrix products fills XLA's autotuning results,
    which the others then find instead of autotuning the same kernels each at once.

    A module text that several jobs share (identical stages of a deep model,
    the same optimizer update on every rank) is compiled once; the other jobs
    get the compiled executable rebound to their devices, which costs a
    millisecond or two instead of a compilation, each a job of the pool started after
    every compile (waiting for its program where that is still compiling).
    """
    first_of: dict[tuple[str, int], int] = {}
    copies: dict[int, list[int]] = {}
    for index, (_, text, devices) in enumerate(jobs):
        source = first_of.setdefault((text, len(tuple(devices))), index)
        copies.setdefault(source, [])
        if source != index:
            copies[source].append(index)
    unique = sorted(copies)
    report = CompileProgress.start(len(unique)) if progress else None  # None: switched off
    compile_one = report.wrap(compile_or_load) if report is not None else compile_stage

    source_of = {index: source for source, indices in copies.items() for index in indices}
    pool: compile_pool.CompilePool[jc.LoadedExecutable] | None = None
    pool_made = threading.Event()  # a rebind may start before the pool's constructor returns

    def make(index: int) -> jc.LoadedExecutable:
        """The executable of job ``index``: compiled, or, for a job that shares another's
        text, that job's executable rebound to its devices once compiled."""
        source = source_of.get(index)
        if source is None:
            return compile_one(*jobs[index])
        if not pool_made.wait(options.COMPILE_TIMEOUT.value()) or pool is None:
            raise RuntimeFailure(f"rebinding executable {jobs[index][0]!r}: its compile failed")
        return _rebind(jobs[index][0], pool.result(source), jobs[source], jobs[index][2])

    # Largest program first (FLOPs, then its text's length standing for its compile
    # time), so that the longest compile does not start last and set the makespan; then
    # the rebinds (each waits for its program).
    weight = flops or [0.0] * len(jobs)
    largest_first = sorted(unique, key=lambda i: (-weight[i], -len(jobs[i][1])))
    # The smallest programs' rebinds first: they are likely compiled when a thread turns to
    # them, where the largest one may still be compiling (its rebinds would wait for it).
    rebinds = [index for source in reversed(largest_first) for index in copies[source]]
    try:
        pool = compile_pool.CompilePool(
            make,
            largest_first + rebinds,
            workers=min(len(jobs), options.COMPILE_THREADS.value() or max(2, _cores()), 16),
            first_alone=bool(unique) and _autotunes(jobs[largest_first[0]][2]),
            timeout_s=options.COMPILE_TIMEOUT.value(),
            names=lambda i: jobs[i][0],
        )
    except BaseException:
        if report is not None:
            report.abandon()
        raise
    finally:
        pool_made.set()  # rebinds waiting for a pool that failed to start end with an error
    return PendingStages(pool, len(jobs), report)


def _autotunes(devices: Sequence[jax.Device]) -> bool:
    """Whether XLA autotunes the kernels of programs for ``devices``: on GPUs it times
    the candidate kernels of each matrix product and fusion once per process and keeps
    the results, so the program with the most FLOPs compiled alone first leaves the
    others little to autotune. Started together, every program autotuned the same
    kernels at once: on an H100 the stage programs of W1 took 4.7 s all at once, 2.7 s
    one at a time, 1.7 s with the largest alone first (``benchmarks/first_step.py``).
    XLA:CPU does not autotune."""
    return any(device.platform != "cpu" for device in devices)


def _cores() -> int:
    """The cores this process may run on. XLA compiles each program on its own thread
    pool too, so more compile threads than cores only add CPU time: on the 2-core
    development machine the GPT-2 example's 12 stage programs took 11.3 CPU seconds with
    4 threads against 10.1 with 2 (9.5 one at a time), tiny stage programs the same."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _rebind(
    name: str,
    exe: jc.LoadedExecutable,
    source: tuple[str, str, Sequence[jax.Device]],
    devices: Sequence[jax.Device],
) -> jc.LoadedExecutable:
    """``exe`` (compiled from the job ``source``) loaded for ``devices`` instead, logged at
    DEBUG on ``jaxpp_mlir.runtime.compilation.compile.rebinds`` with its seconds.

    XLA:CPU cannot serialize an executable that was itself deserialized (the copy
    lacks its compiled functions), so an executable from the persistent cache is
    rebound from its cache entry, not from ``exe.serialize()``.
    """
    devices = tuple(devices)
    if tuple(source[2]) == devices:
        return exe
    started = time.perf_counter()
    rebound = _load_for(name, exe, source, devices)
    _rebind_logger.debug(
        "rebound %r for devices %s from %r in %.4f s",
        name,
        [d.id for d in devices],
        source[0],
        time.perf_counter() - started,
    )
    return rebound


def _load_for(
    name: str,
    exe: jc.LoadedExecutable,
    source: tuple[str, str, Sequence[jax.Device]],
    devices: tuple[jax.Device, ...],
) -> jc.LoadedExecutable:
    _, text, source_devices = source
    source_devices = tuple(source_devices)
    if executable_memo.capacity():
        memo_key = executable_memo.key(text, devices)
        found = executable_memo.load(name, memo_key, devices, compile_options(devices))
        if found is not None:
            return found[0]
    client = devices[0].client
    try:
        serialized = executable_cache.cached_serialization(
            text, source_devices, compile_options(source_devices)
        )
        return client.deserialize_executable(
            serialized if serialized is not None else exe.serialize(),
            jc.device_list(devices),
            compile_options(devices),
        )
    except Exception as e:
        raise RuntimeFailure(
            f"loading executable {name!r} on devices {[d.id for d in devices]} failed: {e}"
        ) from e


def compile_options(devices: tuple[jax.Device, ...]) -> jc.CompileOptions:
    """Compile options for one SPMD program over ``devices`` (one partition each)."""
    return jc.get_compile_options(
        num_replicas=1,
        num_partitions=len(devices),
        device_assignment=np.array([[d.id for d in devices]]),
        backend=devices[0].client,
    )


#: A compiled ``@main``'s parameters and results: (shape, numpy dtype) each, per partition.
Signature = tuple[tuple[tuple[tuple[int, ...], np.dtype], ...], ...]


def compiled_signature(exe: jc.LoadedExecutable) -> Signature:
    """The parameters and results of ``exe``'s compiled ``@main`` (per partition). The
    same for every executable compiled from one module text for as many devices."""
    shape = jc.program_shape(exe)
    result = shape.result_shape()
    results = list(result.tuple_shapes()) if result.is_tuple() else [result]
    return tuple(
        tuple((tuple(s.dimensions()), np.dtype(s.numpy_dtype())) for s in shapes)
        for shapes in (shape.parameter_shapes(), results)
    )


def check_signature(
    name: str,
    signature: Signature,
    input_specs: Sequence[TensorSpec],
    output_specs: Sequence[TensorSpec],
    num_devices: int,
) -> None:
    """Checks a compiled ``@main`` signature (``compiled_signature``) against the plan's
    specs.

    Results are later wrapped without checks, so a plan whose specs disagree
    with its module must fail here, once, rather than give wrong arrays. With
    several devices the compiled module is per partition: only counts and
    dtypes are compared.
    """
    pairs = zip(("input", "output"), (input_specs, output_specs), signature, strict=True)
    for what, specs, shapes in pairs:
        if len(specs) != len(shapes):
            raise RuntimeFailure(
                f"executable {name!r} has {len(shapes)} {what}s but the plan gives "
                f"{len(specs)} {what} specs"
            )
        for i, (spec, (dims, dtype)) in enumerate(zip(specs, shapes, strict=True)):
            same_shape = num_devices > 1 or dims == tuple(spec.shape)
            if dtype != np.dtype(spec.dtype) or not same_shape:
                got = TensorSpec(dims, dtype.name)
                raise RuntimeFailure(
                    f"executable {name!r} {what} {i} is {got} but the plan says {spec}"
                )


def compile_plan_executables(
    plan: ExecutionPlan,
    rank_devices: Sequence[Sequence[jax.Device]],
    names: Sequence[str],
) -> tuple[dict[str, Any], int]:
    """Compiles the executables ``names`` of ``plan``, each on its rank's devices, checked:
    ``start_plan_executables(...).result()``, without the first steps' unions (nothing
    here would replace them: ``first-steps`` compiles each program alone)."""
    first_steps = options.MERGE_PROGRAMS.value() == FIRST_STEPS
    return start_plan_executables(plan, rank_devices, names, merge=not first_steps).result()


class PendingPlanExecutables:
    """A plan's executables compiling (``start_plan_executables``)."""

    def __init__(
        self,
        plan: ExecutionPlan,
        rank_devices: Sequence[Sequence[jax.Device]],
        names: Sequence[str],
        stages: PendingStages,
        finish: Callable[[list[jc.LoadedExecutable]], tuple[dict[str, Any], set[str]]],
        count: int,
        tiered: bool,
    ):
        self._plan, self._rank_devices, self._names = plan, rank_devices, names
        self._stages, self._finish, self._count = stages, finish, count
        self._tiered = tiered  # first-steps: union members to replace by their programs alone
        self._result: tuple[dict[str, Any], int] | None = None
        # After ``result``, with ``tiered`` and union members: what replaces them once started.
        self.tier_up: TierUp | None = None

    def result(self) -> tuple[dict[str, Any], int]:
        """The executables by name, checked against the plan, and how many compilations
        (and rebinds to other devices) they took."""
        if self._result is None:
            self._result = self._checked()
        return self._result

    def _checked(self) -> tuple[dict[str, Any], int]:
        executables, members = self._finish(self._stages.result())
        if self._tiered and members:
            self.tier_up = TierUp(
                self._plan, self._rank_devices, {n: executables[n] for n in members}
            )
        # Executables of one module text (a program rebound to other ranks) share a
        # signature: read once per text, each still checked against its own specs.
        signatures: dict[tuple[str, int], Signature] = {}
        for name in self._names:
            stage = self._plan.executables[name]
            devices = tuple(self._rank_devices[stage.rank])
            if name in members:
                continue  # a union's member: checked against the plan when its union was made
            key = (stage.mlir_module, len(devices))
            if key not in signatures:
                signatures[key] = compiled_signature(executables[name])
            try:
                check_signature(
                    name, signatures[key], stage.input_specs, stage.output_specs, len(devices)
                )
            except RuntimeFailure as e:
                where = executable_cache.origin(
                    stage.mlir_module, devices, compile_options(devices)
                )
                if where is None:
                    raise
                raise RuntimeFailure(f"{e}; this executable was {where}") from e
        return executables, self._count

    def abandon(self, cause: BaseException) -> None:
        """Drops the compiles not started yet (the caller failed while they ran)."""
        self._stages.abandon(cause)


def start_plan_executables(
    plan: ExecutionPlan,
    rank_devices: Sequence[Sequence[jax.Device]],
    names: Sequence[str],
    *,
    merge: bool = True,
    progress: bool = True,
) -> PendingPlanExecutables:
    """Starts compiling the executables ``names`` of ``plan``, each on its rank's devices.

    One compilation per distinct (module text, devices): names that share both
    share one executable. On XLA:CPU with ``JAXPP_MLIR_MERGE_PROGRAMS`` ``on`` or
    ``first-steps`` (and ``merge``), small one-device programs are compiled as union
    programs (``merge.py``), each member then run by a ``BranchExecutable``; with
    ``first-steps`` the result's ``tier_up`` replaces them by the programs alone
    (``tier_up.py``) once started. ``progress``: the compile progress lines.
    """
    keys: dict[tuple[str, tuple[int, ...]], int] = {}
    jobs: list[tuple[str, str, tuple[jax.Device, ...]]] = []
    job_of: dict[str, int] = {}
    flops: list[float] = []
    for name in names:
        stage = plan.executables[name]
        devices = tuple(rank_devices[stage.rank])
        key = (stage.mlir_module, tuple(d.id for d in devices))
        if key not in keys:
            keys[key] = len(jobs)
            jobs.append((name, stage.mlir_module, devices))
            flops.append(stage.flops)
        job_of[name] = keys[key]
    mode = options.MERGE_PROGRAMS.value() if merge else "off"
    unions = union_programs(plan, jobs) if mode in ("on", FIRST_STEPS) else []
    union_of = {text: union for union in unions for text in union.members}
    compile_jobs: list[tuple[str, str, tuple[jax.Device, ...]]] = []
    compile_flops: list[float] = []
    compile_job_of: dict[tuple[str, tuple[int, ...]], int] = {}
    target: list[int] = []  # per job, its compile job
    for (name, text, devices), job_flops in zip(jobs, flops, strict=True):
        union = union_of.get(text)
        if union is not None:
            name, text = union.name, union.text
        key = (text, tuple(d.id for d in devices))
        if key not in compile_job_of:
            compile_job_of[key] = len(compile_jobs)
            compile_jobs.append((name, text, devices))
            compile_flops.append(0.0)
        compile_flops[compile_job_of[key]] += job_flops
        target.append(compile_job_of[key])

    def finish(compiled: list[jc.LoadedExecutable]) -> tuple[dict[str, Any], set[str]]:
        """The executables by name (a union's members as ``BranchExecutable``s), and the
        names of the members."""
        executables = {name: compiled[target[job]] for name, job in job_of.items()}
        members = _members(jobs, job_of, union_of, compiled, target) if unions else {}
        executables.update(members)
        return executables, set(members)

    stages = start_stages(compile_jobs, compile_flops, progress=progress)
    tiered = mode == FIRST_STEPS
    return PendingPlanExecutables(
        plan, rank_devices, names, stages, finish, len(compile_jobs), tiered
    )


def _members(
    jobs: Sequence[tuple[str, str, tuple[jax.Device, ...]]],
    job_of: dict[str, int],
    union_of: dict[str, merge.MergedProgram],
    compiled: Sequence[jc.LoadedExecutable],
    target: Sequence[int],
) -> dict[str, Any]:
    """A ``BranchExecutable`` for each name whose program is a union's member, over the
    union loaded on its rank's devices (one ``UnionRun`` per union and devices)."""
    from . import branch_executable

    runs: dict[int, branch_executable.UnionRun] = {}
    members: dict[str, Any] = {}
    for name, job in job_of.items():
        _, text, devices = jobs[job]
        union = union_of.get(text)
        if union is None:
            continue
        if target[job] not in runs:
            exe = compiled[target[job]]
            check_signature(
                union.name,
                compiled_signature(exe),
                union.parameters,
                union.results,
                len(devices),
            )
            runs[target[job]] = branch_executable.UnionRun(union, exe, devices)
        members[name] = branch_executable.BranchExecutable(runs[target[job]], union.branches[text])
    return members


def union_programs(
    plan: ExecutionPlan, jobs: Sequence[tuple[str, str, tuple[jax.Device, ...]]]
) -> list[merge.MergedProgram]:
    """Union programs for the distinct one-device programs of ``jobs`` on XLA:CPU
    (``merge.plan_merges``): where XLA:CPU compiles the same fusion once per program,
    several small programs compiled as one build each kernel once. Not on GPUs: not
    measured there, where XLA compiles and launches differently (autotuning, kernels
    launched from the host)."""
    from . import merge  # builds IR: loaded only when unions are on

    candidates: dict[str, merge.Candidate] = {}
    for name, text, devices in jobs:
        if len(devices) != 1 or devices[0].platform != "cpu" or text in candidates:
            continue
        stage = plan.executables[name]
        candidates[text] = merge.Candidate(
            name, text, stage.input_specs, stage.output_specs, stage.aliases
        )
    if len(candidates) < 2:
        return []
    return merge.plan_merges(list(candidates.values()))
