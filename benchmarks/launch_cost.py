"""Launch cost per task (issue 13): host time of one executable launch against its buffers.

Run: python benchmarks/launch_cost.py [--quick] [--workloads W1,W2] [--reps 200]
                                      [--compare-donation] [--no-sweep] [--pack-parameters]
                                      [--fuse-tasks]

Three kinds of rows, one JSON line each, all measured in one process:

- ``sweep``: one tiny executable (float32[4] leaves) with ``inputs`` input and
  ``outputs`` output buffers, compiled through the runtime's own
  ``compile_stage`` and launched the way the runtime launches it
  (``execute_sharded`` then ``consume_with_handlers``). ``host_us`` is the
  median time until the launch call returns (the host's cost; execution is
  asynchronous), ``ready_us`` until its results are ready; ``jit_host_us`` and
  ``jit_ready_us`` are the same for plain ``jax.jit`` of the same function,
  timed alternately with it; ``results_equal_jit``: the launch computes jax.jit's
  results bit for bit (the executable is compiled from the very module jax.jit lowers:
  the same program). Done on the CPU backend and on the default
  backend when that is an accelerator.
- ``chain``: ``tasks`` launches back to back, each reading the previous one's
  outputs (a step of ``tasks`` tasks with 64 inputs and 16 outputs each):
  host microseconds per task as a function of tasks per step.
- ``workload``: the pipelined W1/W2 steps of ``benchmarks/reference.py``
  (``Std1F1B``, one CPU device per stage; ``W2:1`` is W2 on one stage, the
  configuration whose ~180-input tasks issue 13 measured): launches per step, buffers per
  launch (mean and max, in and out), host microseconds per launch (from the
  runtime's operations timed one by one, as ``reference.py --breakdown``
  does) next to the pipelined and the plain ``jax.jit`` step time; two rows
  per workload, with the gradient accumulators packed
  (jaxpp-pack-accumulators added to the pipeline, ``packed``: true) and
  without (the default pipeline), the two pipelined steps and plain jit timed alternately.
  ``--compare-donation`` adds two rows per workload, the same steps without
  loop-carried donation (``donated``: false, each accumulator a fresh buffer
  per task, as before), all four timed alternately with plain jit;
  ``aliased_launches_per_step``/``aliased_buffers_per_step`` count the
  launches that write a result into an input's buffer.
  ``--pack-parameters`` adds three rows per workload, with each stage's parameters
  packed (jaxpp-pack-parameters, ``params_packed``: the value of
  ``JAXPP_MLIR_PACK_PARAMETERS``, 1: every parameter, 2: not the operands of
  contractions): 1 without and with the accumulators packed, 2 with them packed;
  all timed alternately with plain jit. Every workload row has
  ``peak_bytes_per_rank`` (``PartitionedProgram.peak_bytes_per_rank``) and the
  buffers of the microbatch tasks alone (``task_buffers_*``: the stage programs,
  not the code before and after the loop).

- ``fusion`` (``--fuse-tasks``): per workload, the default pipeline without and with
  automatic task fusion (``partition(fuse_tasks=True)``), timed alternately with plain
  jit: launches, buffers and host time per launch, step / plain jit, compile time of
  the program and of each fused executable next to its parts', peak bytes per rank and
  the simulated makespan.

``--quick`` shrinks everything (few buffer counts, width 16, few repetitions)
so that a test can run the same code paths in seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import importlib.util
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jaxpp_mlir.runtime import _jax_compat as jc  # noqa: E402
from jaxpp_mlir.runtime.compilation.compile import compile_stage  # noqa: E402
from jaxpp_mlir.runtime.instructions import run as run_kind  # noqa: E402

LEAF_SHAPE = (4,)
# (inputs, outputs): the measured points, and a few between them.
FULL_SWEEP = [(2, 1), (8, 1), (16, 1), (64, 1), (180, 1), (180, 64), (400, 1), (2, 16), (2, 64)]
QUICK_SWEEP = [(2, 1), (16, 1), (16, 8)]
FULL_CHAIN = [1, 4, 16, 64]
QUICK_CHAIN = [1, 4]
CHAIN_BUFFERS = (64, 16)


def _load_reference():
    if "benchmark_reference" in sys.modules:
        return sys.modules["benchmark_reference"]
    path = Path(__file__).resolve().with_name("reference.py")
    spec = importlib.util.spec_from_file_location("benchmark_reference", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------ one launch


def buffers_fn(num_inputs: int, num_outputs: int) -> Callable:
    """A function of ``num_inputs`` leaves with ``num_outputs`` results that reads every input
    (so that no argument is pruned) and writes distinct results."""

    def fn(*xs):
        total = xs[0]
        for x in xs[1:]:
            total = total + x
        return tuple(total * float(k + 1) for k in range(num_outputs))

    return fn


@dataclasses.dataclass
class Launcher:
    """One compiled executable and everything a launch needs, as the runtime holds it."""

    exe: jc.LoadedExecutable
    handlers: list
    jitted: Callable

    def launch(self, args: Sequence[jax.Array]) -> list[jax.Array]:
        return self.exe.execute_sharded(args).consume_with_handlers(self.handlers)


def make_launcher(num_inputs: int, num_outputs: int, device: jax.Device) -> Launcher:
    fn = buffers_fn(num_inputs, num_outputs)
    args = [jax.ShapeDtypeStruct(LEAF_SHAPE, jnp.float32)] * num_inputs
    jitted = jax.jit(fn)  # follows its committed arguments onto ``device``
    text = jitted.lower(*args).as_text()
    exe = compile_stage(f"buffers_{num_inputs}_{num_outputs}", text, [device])
    sharding = jax.sharding.SingleDeviceSharding(device)
    handlers = [
        jc.result_handler(jax.core.ShapedArray(LEAF_SHAPE, np.dtype(np.float32)), sharding)
        for _ in range(num_outputs)
    ]
    return Launcher(exe, handlers, jitted)


def _timed(call: Callable[[], object]) -> tuple[float, float]:
    """Seconds until ``call`` returns and until its results are ready."""
    t0 = time.perf_counter()
    result = call()
    t1 = time.perf_counter()
    jax.block_until_ready(result)
    return t1 - t0, time.perf_counter() - t0


def sweep_row(num_inputs: int, num_outputs: int, device: jax.Device, reps: int) -> dict:
    launcher = make_launcher(num_inputs, num_outputs, device)
    rng = np.random.default_rng(0)
    args = [
        jax.device_put(rng.standard_normal(LEAF_SHAPE).astype(np.float32), device)
        for _ in range(num_inputs)
    ]
    ours = launcher.launch(args)
    theirs = launcher.jitted(*args)
    equal = all(
        np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(ours, theirs, strict=True)
    )
    times: dict[str, list[tuple[float, float]]] = {"launch": [], "jit": []}
    for _ in range(3):
        jax.block_until_ready((launcher.launch(args), launcher.jitted(*args)))
    for _ in range(reps):
        times["launch"].append(_timed(lambda: launcher.launch(args)))
        times["jit"].append(_timed(lambda: launcher.jitted(*args)))
    med = statistics.median
    return {
        "row": "sweep",
        "platform": device.platform,
        "device": str(device.device_kind),
        "inputs": num_inputs,
        "outputs": num_outputs,
        "host_us": med(t[0] for t in times["launch"]) * 1e6,
        "ready_us": med(t[1] for t in times["launch"]) * 1e6,
        "jit_host_us": med(t[0] for t in times["jit"]) * 1e6,
        "jit_ready_us": med(t[1] for t in times["jit"]) * 1e6,
        "results_equal_jit": equal,
        "reps": reps,
    }


def chain_row(num_tasks: int, device: jax.Device, reps: int) -> dict:
    """``num_tasks`` launches back to back; each feeds its outputs into the next one's first
    inputs, so that every launch waits on the one before, as the tasks of a step do."""
    num_inputs, num_outputs = CHAIN_BUFFERS
    launcher = make_launcher(num_inputs, num_outputs, device)
    rng = np.random.default_rng(0)
    args = [
        jax.device_put(rng.standard_normal(LEAF_SHAPE).astype(np.float32), device)
        for _ in range(num_inputs)
    ]

    def step():
        current = list(args)
        for _ in range(num_tasks):
            current[:num_outputs] = launcher.launch(current)
        return current[:num_outputs]

    for _ in range(3):
        jax.block_until_ready(step())
    host, ready = [], []
    for _ in range(reps):
        h, r = _timed(step)
        host.append(h)
        ready.append(r)
    return {
        "row": "chain",
        "platform": device.platform,
        "inputs": num_inputs,
        "outputs": num_outputs,
        "tasks": num_tasks,
        "host_us_per_task": statistics.median(host) / num_tasks * 1e6,
        "ready_us_per_task": statistics.median(ready) / num_tasks * 1e6,
        "reps": reps,
    }


# ------------------------------------------------------------------ W1 / W2


def launch_shape(plan) -> dict:
    """Launches per step and buffers per launch of an ``ExecutionPlan``."""
    runs = [inst for inst in plan.instructions if inst.kind == run_kind.KIND]
    ins = [len(plan.executables[r.executable].input_specs) for r in runs]
    outs = [len(plan.executables[r.executable].output_specs) for r in runs]
    return {
        "launches_per_step": len(runs),
        "launches_per_rank_max": max(
            sum(1 for r in runs if r.rank == rank) for rank in range(plan.num_ranks)
        ),
        "buffers_in_mean": statistics.fmean(ins),
        "buffers_in_max": max(ins),
        "buffers_out_mean": statistics.fmean(outs),
        "buffers_out_max": max(outs),
    }


def aliases_shape(plan) -> dict:
    """How many launches per step alias an input to an output, and how many buffers."""
    runs = [inst for inst in plan.instructions if inst.kind == run_kind.KIND]
    aliased = [len(plan.executables[r.executable].aliases) for r in runs]
    return {
        "aliased_launches_per_step": sum(1 for n in aliased if n),
        "aliased_buffers_per_step": sum(aliased),
    }


def accumulators_packed():
    """Partitions inside also run jaxpp-pack-accumulators (``JAXPP_MLIR_PACK_ACCUMULATORS=1``;
    it is not in the default pipeline: see benchmarks/RESULTS.md)."""
    return _load_reference().environment("JAXPP_MLIR_PACK_ACCUMULATORS", "1")


def task_shape(plan) -> dict:
    """Buffers per launch of the microbatch tasks (the stage programs) alone."""
    runs = [
        inst
        for inst in plan.instructions
        if inst.kind == run_kind.KIND and inst.executable.startswith("stage")
    ]
    ins = [len(plan.executables[r.executable].input_specs) for r in runs]
    outs = [len(plan.executables[r.executable].output_specs) for r in runs]
    return {
        "task_buffers_in_mean": statistics.fmean(ins),
        "task_buffers_in_max": max(ins),
        "task_buffers_out_mean": statistics.fmean(outs),
        "task_buffers_out_max": max(outs),
    }


def parameters_packed(level: int = 1):
    """Partitions inside also run jaxpp-pack-parameters (``JAXPP_MLIR_PACK_PARAMETERS=level``)."""
    return _load_reference().environment("JAXPP_MLIR_PACK_PARAMETERS", str(level))


@contextlib.contextmanager
def accumulators_not_donated():
    """Partitions inside consume only the caller's donated inputs (the rule before
    loop-carried donation: no accumulator from task to task, nothing the step made);
    a benchmark-only switch."""
    builder = importlib.import_module("jaxpp_mlir.plan.builder")
    original = builder.donation_aliases
    builder.donation_aliases = functools.partial(original, step_buffers=False)
    try:
        yield
    finally:
        builder.donation_aliases = original


def _launch_figures(reference, compiled, state) -> dict:
    """Host time per launch from the runtime's operations timed one by one."""
    breakdown = reference.step_breakdown(compiled, state)
    if "error" in breakdown:
        return {"host_us_per_launch": None, "breakdown_error": breakdown["error"]}
    runs = breakdown["ops_per_step"]["run"]
    return {
        "host_us_per_launch": breakdown["python_wall_s"]["run"] / runs * 1e6,
        "host_cpu_us_per_launch": breakdown["python_cpu_s"]["run"] / runs * 1e6,
        "host_ms_per_step_in_launches": breakdown["python_wall_s"]["run"] * 1e3,
    }


def _lowered_workload(reference, spec):
    """The CPU devices, the workload's inputs, its mesh (one device per stage), the
    lowered pipelined step and its Std1F1B schedule."""
    import jaxpp_mlir as pp

    devices = jax.devices("cpu")
    if len(devices) < spec.num_stages:
        raise SystemExit(f"{spec.name} needs {spec.num_stages} CPU devices, found {len(devices)}")
    params, xs, ys = reference.init(spec)
    mesh = pp.MpmdMesh(jax.sharding.Mesh(np.array(devices[: spec.num_stages]), ("stage",)), "stage")
    lowered = jax.jit(reference.pipelined_step_fn(spec)).lower(params, xs, ys)
    return devices, (params, xs, ys), mesh, lowered, pp.Std1F1B(spec.num_stages)


def workload_rows(
    reference,
    spec,
    steps: int,
    warmup: int,
    *,
    compare_donation: bool = False,
    pack_parameters: bool = False,
) -> list[dict]:
    """Two rows: the pipelined step with packed accumulators (``packed``: true) and
    without (the default pipeline); the two and plain jit timed alternately. With
    ``compare_donation`` two more, the same without loop-carried donation
    (``donated``: false), all four timed alternately with plain jit. With
    ``pack_parameters`` three more with the parameters packed (``params_packed``: 1,
    the accumulators not packed and packed; 2, not the contractions' operands, the
    accumulators packed)."""
    import jaxpp_mlir as pp

    devices, (params, xs, ys), mesh, lowered, schedule = _lowered_workload(reference, spec)
    configs = [(True, True, 0), (False, True, 0)]
    if compare_donation:
        configs += [(True, False, 0), (False, False, 0)]
    if pack_parameters:
        configs += [(False, True, 1), (True, True, 1), (True, True, 2)]
    programs = []
    for packed, donated, params_packed in configs:
        with contextlib.ExitStack() as switches:
            if params_packed:
                switches.enter_context(parameters_packed(params_packed))
            if packed:
                switches.enter_context(accumulators_packed())
            if not donated:
                switches.enter_context(accumulators_not_donated())
            programs.append(pp.partition(lowered, mesh=mesh, schedule=schedule))
    compiled = [program.compile() for program in programs]
    timings = _timed_against_jit(
        reference, spec, devices, (params, xs, ys), programs, compiled, steps, warmup
    )
    rows = []
    for (packed, donated, params_packed), program, timing in zip(
        configs, programs, timings, strict=True
    ):
        rows.append(
            {
                "row": "workload",
                "workload": spec.name,
                "packed": packed,
                "donated": donated,
                "params_packed": params_packed,
                "peak_bytes_per_rank": program.peak_bytes_per_rank(),
                **aliases_shape(program.plan),
                "platform": devices[0].platform,
                "config": dataclasses.asdict(spec),
                **launch_shape(program.plan),
                **task_shape(program.plan),
                **timing,
            }
        )
    return rows


def _timed_against_jit(
    reference, spec, devices, data, programs, compiled, steps: int, warmup: int
) -> list[dict]:
    """The step figures of each compiled program (step and dispatch time, over plain jit,
    the largest differences from plain jit, absolute and in ulps of each leaf's largest
    magnitude, after all the steps; host time per launch), all of them and plain
    jit timed alternately on ``data`` (params, xs, ys)."""
    ref_state = jax.device_put(data, devices[0])
    ref_compiled = jax.jit(reference.reference_step_fn(spec)).lower(*ref_state).compile()
    states = [reference.place_pipelined_inputs(p, data) for p in programs]
    *ours, (theirs, _, _, (ref_params, ref_loss)) = reference.timed_steps(
        [*compiled, ref_compiled], [*states, ref_state], steps, warmup
    )
    figures = []
    for fn, state, (step, dispatch, _, (out_params, out_loss)) in zip(
        compiled, states, ours, strict=True
    ):
        figures.append(
            {
                "step_ms": step * 1e3,
                "dispatch_ms": dispatch * 1e3,
                "jit_step_ms": theirs * 1e3,
                "step_ratio": step / theirs,
                "max_abs_diff_params": reference.max_abs_diff(out_params, ref_params),
                "max_abs_diff_loss": reference.max_abs_diff(out_loss, ref_loss),
                "max_ulps_params": reference.max_ulps(out_params, ref_params),
                "max_ulps_loss": reference.max_ulps(out_loss, ref_loss),
                "steps": steps,
                **_launch_figures(reference, fn, (out_params, state[1], state[2])),
            }
        )
    return figures


def _compile_seconds(plan, name: str, device: jax.Device) -> float:
    """Seconds to compile one executable of ``plan`` alone (the in-memory executable cache
    off; JAX's persistent cache is not on in the benchmarks)."""
    with _load_reference().environment("JAXPP_MLIR_EXECUTABLE_MEMORY_CACHE", "0"):
        t0 = time.perf_counter()
        compile_stage(f"timed_{name}", plan.executables[name].mlir_module, [device])
        return time.perf_counter() - t0


def _fused_compile_figures(plain_plan, fused_plan, devices) -> dict:
    """Each distinct fused executable: its parts, its compile time, and the compile time
    of the plain executables of its parts (each distinct one once), compiled one by one."""
    seen: dict[str, dict] = {}
    for run in fused_plan.instructions:
        if run.kind != run_kind.KIND or run.executable in seen:
            continue
        parts = fused_plan.executables[run.executable].fused_parts
        if not parts:
            continue
        device = devices[run.rank]
        part_names = sorted(set(parts))  # a plain plan runs each stage function as itself
        seen[run.executable] = {
            "parts": len(parts),
            "compile_s": _compile_seconds(fused_plan, run.executable, device),
            "parts_compile_s": sum(_compile_seconds(plain_plan, n, device) for n in part_names),
        }
    return {
        "fused_executables": len(seen),
        "fused_parts_max": max((f["parts"] for f in seen.values()), default=0),
        "fused_compile_s": sum(f["compile_s"] for f in seen.values()),
        "fused_parts_compile_s": sum(f["parts_compile_s"] for f in seen.values()),
        "fused_detail": sorted(seen.values(), key=lambda f: f["parts"]),
    }


def fusion_rows(reference, spec, steps: int, warmup: int) -> list[dict]:
    """Two rows (``row``: ``fusion``): the pipelined step (``Std1F1B``, default pipeline)
    without and with automatic task fusion (``partition(fuse_tasks=True)``), the two and
    plain jit timed alternately: launches, buffers and host time per launch, step time
    over plain jit, program compile time, peak bytes per rank, the simulated makespan
    (``DEFAULT_COSTS`` plus ``DEFAULT_LAUNCH_COST`` per launch); the fused row also times
    each fused executable's compile against its parts' plain executables."""
    import jaxpp_mlir as pp
    from jaxpp_mlir.schedules.autofuse import DEFAULT_LAUNCH_COST

    devices, (params, xs, ys), mesh, lowered, schedule = _lowered_workload(reference, spec)
    programs, compiled, compile_s = [], [], []
    for fuse in (False, True):
        program = pp.partition(lowered, mesh=mesh, schedule=schedule, fuse_tasks=fuse)
        t0 = time.perf_counter()
        compiled.append(reference.compile_uncached(program))
        compile_s.append(time.perf_counter() - t0)
        programs.append(program)
    timings = _timed_against_jit(
        reference, spec, devices, (params, xs, ys), programs, compiled, steps, warmup
    )
    rows = []
    for fuse, program, timing in zip((False, True), programs, timings, strict=True):
        simulated = program.schedule.simulate(
            spec.num_microbatches, launch_cost=DEFAULT_LAUNCH_COST
        )
        row = {
            "row": "fusion",
            "workload": spec.name,
            "fused": fuse,
            "platform": devices[0].platform,
            "config": dataclasses.asdict(spec),
            **launch_shape(program.plan),
            "executables": len(program.plan.executables),
            "compile_s": compile_s[fuse],
            "peak_bytes_per_rank": program.peak_bytes_per_rank(),
            "simulated_makespan": simulated.makespan,
            **timing,
        }
        if fuse:
            row.update(_fused_compile_figures(programs[0].plan, program.plan, devices))
        rows.append(row)
    return rows


# ------------------------------------------------------------------ main


def sweep_devices() -> list[jax.Device]:
    """The first CPU device, and the first device of the default backend if it is not CPU."""
    devices = [jax.devices("cpu")[0]]
    if jax.default_backend() != "cpu":
        devices.append(jax.devices()[0])
    return devices


def run(
    *,
    quick: bool,
    workloads: Sequence[str],
    reps: int | None = None,
    emit=print,
    compare_donation: bool = False,
    sweep: bool = True,
    pack_parameters: bool = False,
    fuse_tasks: bool = False,
) -> list[dict]:
    """Every row, in order; ``emit`` gets each as one JSON line as soon as it is measured."""
    reps = reps or (20 if quick else 200)
    rows = []

    def done(row: dict) -> None:
        row["loadavg_1min"] = os.getloadavg()[0]
        rows.append(row)
        emit(json.dumps(row))

    for device in sweep_devices() if sweep else []:
        for num_inputs, num_outputs in QUICK_SWEEP if quick else FULL_SWEEP:
            done(sweep_row(num_inputs, num_outputs, device, reps))
        for num_tasks in QUICK_CHAIN if quick else FULL_CHAIN:
            done(chain_row(num_tasks, device, max(5, reps // max(1, num_tasks // 4))))
    if workloads:
        reference = _load_reference()
        for entry in workloads:
            name, _, stages = entry.partition(":")
            spec = reference.WORKLOADS[name]
            if stages:  # e.g. "W2:1": the workload with all its layers on fewer stages
                spec = dataclasses.replace(spec, name=entry, num_stages=int(stages))
            if quick:
                spec = dataclasses.replace(spec, width=16, microbatch_size=2)
            for row in workload_rows(
                reference,
                spec,
                steps=3 if quick else 20,
                warmup=1 if quick else 3,
                compare_donation=compare_donation,
                pack_parameters=pack_parameters,
            ):
                done(row)
            if fuse_tasks:
                for row in fusion_rows(
                    reference, spec, steps=3 if quick else 20, warmup=1 if quick else 3
                ):
                    done(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes, few repetitions")
    parser.add_argument(
        "--workloads",
        default="W1,W2,W2:1",
        help="comma-separated; W2:1 is W2 with its 32 layers on 1 stage; empty for none",
    )
    parser.add_argument("--reps", type=int, default=None, help="launches timed per sweep row")
    parser.add_argument(
        "--compare-donation",
        action="store_true",
        help="also the workloads without loop-carried donation, timed in the same run",
    )
    parser.add_argument("--no-sweep", action="store_true", help="workload rows only")
    parser.add_argument(
        "--pack-parameters",
        action="store_true",
        help="also the workloads with packed parameters (and packed accumulators), same run",
    )
    parser.add_argument(
        "--fuse-tasks",
        action="store_true",
        help="also two fusion rows per workload: without and with automatic task fusion",
    )
    args = parser.parse_args()
    names = [n.strip() for n in args.workloads.split(",") if n.strip()]
    for n in names:
        name, _, stages = n.partition(":")
        if name not in ("W1", "W2") or not (stages == "" or stages.isdigit()):
            parser.error(f"unknown workload {n!r} (known: W1, W2, W1:<stages>, W2:<stages>)")
    run(
        quick=args.quick,
        workloads=names,
        reps=args.reps,
        compare_donation=args.compare_donation,
        sweep=not args.no_sweep,
        pack_parameters=args.pack_parameters,
        fuse_tasks=args.fuse_tasks,
    )


if __name__ == "__main__":
    main()
