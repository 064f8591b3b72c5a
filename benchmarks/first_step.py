"""Time to the first step (issue 38): lower + partition + compile + first step, by phase,
next to plain ``jax.jit``'s lower + compile + first step.

Run: python benchmarks/first_step.py [--workloads W1,W2,W2x64,S16,GPT2] [--rounds 5]
                                     [--cache cold|warm|both] [--baseline CHECKOUT]

Every figure comes from a fresh process: per round and workload, one process runs the
pipelined step and one runs plain ``jax.jit``, in alternating order (the pipelined one
first in even rounds), so both see the same machine load; the table shows medians over
the rounds and the median of the per-round ratios. Children run with Python's bytecode
cache on (``PYTHONDONTWRITEBYTECODE`` removed from their environment), as in a normal
install; the first round's processes write it, so run ``--rounds`` of at least 3.

Workloads (the models of ``benchmarks/reference.py`` unless said otherwise):

- W1, W2: issue 6's reference workloads (``Std1F1B``), against reference.py's
  unmarked ``lax.scan`` step under ``jax.jit`` on one device;
- W2x64: W2 at 64 microbatches of 4;
- S16: 32 layers of width 256 as 16 stages on 16 CPU devices, 16 microbatches of 4;
- GPT2: ``examples/gpt2_flax_linen.py`` (flax linen, optax adamw, a marker per stage;
  4 layers, 4 stages, width 64, bfloat16, 8 microbatches of 4), against ``jax.jit`` of
  the same ``train_step``. No third-party transformer is installed with the project's
  dependencies, so this is the project's own example of a flax model.

Phases of the pipelined process (seconds; ``jaxpp_mlir.phases``, ``jaxpp_mlir.passes``
and ``jaxpp_mlir.runtime.compilation.compile`` at DEBUG give them):

- import: the ``jaxpp_mlir`` modules that partition and compile load lazily, loaded
  up front here through the names that load them for a user (``jaxpp_mlir.partition``,
  ``treduce``, ``jaxpp_mlir.runtime.compile_plan``; a user pays them inside the first
  trace, partition and compile);
- trace, lower: ``jax.jit(step).trace(...)`` and ``.lower()``;
- partition: its own total, then import (the lowered module into the library's
  context), each pass, the plan (``PartitionedProgram``), setup advice;
- compile: its total, then the stage programs (wall time of compiling them all,
  concurrently) with each program's own wall time and how it was made (compiled,
  loaded from the persistent cache, reused from memory), the dispatch (slots and
  generated operations) and placing the constants (microbatch indices), how many
  programs were rebound to other ranks' devices (a program several ranks run is compiled
  once, then deserialized for each other rank) and their seconds summed; one process
  moves values between ranks by device-to-device copies, so there are no transfer
  programs here;
- first step: the first call until its results are ready; then, not in the time to first
  step, the second call's (the first's excess over it is the executables' first runs);
- other: the time to first step less the phases above (Python between them).

The ratios: the times to first step; the same less the lazy imports; CPU seconds; the
CPU floor (every phase but compile() as ``jax.jit``'s); the XLA floor, in wall time (the
stage programs' compilations as compile() waits for them, concurrent, and every other
phase as ``jax.jit``'s: the ratio no work of the library's own could go below while XLA
compiles each stage program separately).

On an accelerator backend with fewer devices than a workload's stages (one GPU), every stage
runs on its first device with ``Interleaved1F1B(num_stages, mpmd_dim=1)``, as in
``single_accelerator.py``, and the record says ``one_device``; plain ``jax.jit`` runs on the
same device.

``--baseline CHECKOUT`` adds a third process per round: the same pipelined step with the
library of another checkout of the project (``git worktree add /tmp/before <rev>``), the
before of an A/B, printed as its own table against the same ``jax.jit`` processes.

``--cache warm`` points JAX's persistent compilation cache (``jax_compilation_cache_dir``,
every program cached whatever its compile time) of both sides at a fresh directory, fills
it with one untimed process each, then times processes that load from it; ``both`` times
cold and warm.
"""

from __future__ import annotations

import argparse
import importlib.abc
import importlib.util
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

WORKLOADS = ("W1", "W2", "W2x64", "S16", "GPT2")
DEVICES = {"S16": 16}  # CPU devices a workload's process needs (default 8)
SIDES = ("pp", "jit")
#: The checkout whose library the "baseline" side imports (``--baseline``).
BASELINE_ENV = "JAXPP_FIRST_STEP_BASELINE"
#: The phase of compile() that waits for XLA's compilations of the stage programs.
STAGE_PROGRAMS = "compile: stage programs"


# ------------------------------------------------------------------ in the child


class _Records(logging.Handler):
    """Collects the phase, pass and compile records of one process."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.phases: dict[str, float] = {}
        self.passes: list[tuple[str, float]] = []
        self.programs: list[tuple[str, str, float]] = []
        self.rebinds: list[float] = []  # seconds of each program rebound to another rank

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == "jaxpp_mlir.phases":
            name = record.phase  # type: ignore[attr-defined]
            self.phases[name] = self.phases.get(name, 0.0) + record.seconds  # type: ignore[attr-defined]
        elif record.name == "jaxpp_mlir.passes" and record.msg.startswith("pass "):
            element, ms = record.args  # type: ignore[misc]
            self.passes.append((str(element).split("{")[0], ms / 1e3))
        elif record.name == "jaxpp_mlir.runtime.compilation.compile":
            how, name, _devices, seconds = record.args[:4]  # type: ignore[index]
            self.programs.append((name, how, seconds))
        elif record.name == "jaxpp_mlir.runtime.compilation.compile.rebinds":
            self.rebinds.append(record.args[-1])  # type: ignore[index]


def _setup_child(workload: str, cache_dir: str | None) -> None:
    flags = [
        f
        for f in os.environ.get("XLA_FLAGS", "").split()
        if not f.startswith("--xla_force_host_platform_device_count")
    ]
    flags.append(f"--xla_force_host_platform_device_count={DEVICES.get(workload, 8)}")
    os.environ["XLA_FLAGS"] = " ".join(flags)
    if cache_dir:
        import jax

        jax.config.update("jax_compilation_cache_dir", cache_dir)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def _model(workload: str):
    """(pipelined step, jit step, args for each, mesh size, schedule) of ``workload``."""
    import jax
    import numpy as np

    sys.path.insert(0, HERE)
    import reference

    import jaxpp_mlir as pp

    if workload == "GPT2":
        sys.path.insert(0, os.path.join(ROOT, "examples"))
        import gpt2_flax_linen as gpt2

        args = gpt2.parse_args(["--init", "numpy"])
        state, batch = gpt2.make_inputs(args)
        jax.block_until_ready((state, batch))
        return gpt2.train_step, gpt2.train_step, (state, batch), (state, batch), args.stages, None
    specs = dict(reference.WORKLOADS)
    specs["W2x64"] = reference.dataclasses.replace(specs["W2"], name="W2x64", num_microbatches=64)
    specs["S16"] = reference.Workload(
        "S16", num_layers=32, width=256, num_microbatches=16, microbatch_size=4, num_stages=16
    )
    spec = specs[workload]
    params, xs, ys = reference.init(spec)
    jax.block_until_ready((params, xs, ys))
    device = jax.devices()[0]
    jit_args = jax.device_put((params, xs, ys), device)
    jax.block_until_ready(jit_args)
    del np
    return (
        reference.pipelined_step_fn(spec),
        reference.reference_step_fn(spec),
        (params, xs, ys),
        jit_args,
        spec.num_stages,
        pp.Std1F1B(spec.num_stages),
    )


class _RuntimeFrom(importlib.abc.MetaPathFinder):
    """Finds ``jaxpp_mlir.runtime`` in ``<checkout>/runtime`` (its submodules follow)."""

    def __init__(self, checkout: str):
        self.folder = os.path.join(checkout, "runtime")

    def find_spec(self, name, path=None, target=None):
        if name != "jaxpp_mlir.runtime":
            return None
        return importlib.util.spec_from_file_location(
            name,
            os.path.join(self.folder, "__init__.py"),
            submodule_search_locations=[self.folder],
        )


def _use_library(checkout: str) -> None:
    """Imports ``jaxpp_mlir`` (and ``jaxpp_mlir.runtime``) from ``checkout`` instead."""
    for part in ("jaxpp_mlir", "runtime"):
        if not os.path.isdir(os.path.join(checkout, part)):
            raise SystemExit(f"{checkout} is not a checkout of the project: it has no {part}/")
    sys.path.insert(0, checkout)
    sys.meta_path.insert(0, _RuntimeFrom(checkout))
    import jaxpp_mlir.runtime

    for module in (jaxpp_mlir, jaxpp_mlir.runtime):
        if not os.path.realpath(module.__file__).startswith(os.path.realpath(checkout) + os.sep):
            raise SystemExit(f"{module.__name__} did not come from {checkout}: {module.__file__}")


def run_child(workload: str, side: str, cache_dir: str | None) -> dict:
    """Times one side of one workload in this (fresh) process."""
    _setup_child(workload, cache_dir)
    if side == "baseline":
        _use_library(os.environ[BASELINE_ENV])
    import jax
    import numpy as np

    import jaxpp_mlir as pp

    pp_step, jit_step, pp_args, jit_args, num_stages, schedule = _model(workload)
    record: dict = {"workload": workload, "side": side}
    t, cpu = time.perf_counter, time.process_time  # process_time: all threads' CPU
    if side == "jit":
        c0, t0 = cpu(), t()
        traced = jax.jit(jit_step).trace(*jit_args)
        c1, t1 = cpu(), t()
        lowered = traced.lower()
        c2, t2 = cpu(), t()
        compiled = lowered.compile()
        c3, t3 = cpu(), t()
        jax.block_until_ready(compiled(*jit_args))
        c4, t4 = cpu(), t()
        record["second_step"] = _second_step(compiled, jit_args)
        record.update(trace=t1 - t0, lower=t2 - t1, compile=t3 - t2, first_step=t4 - t3)
        record.update(total=t4 - t0, cpu_total=c4 - c0, cpu_compile=c3 - c2)
        record.update(cpu_trace=c1 - c0, cpu_lower=c2 - c1, cpu_first_step=c4 - c3)
        record["loadavg"] = os.getloadavg()[0]
        return record

    records = _Records()
    for name in (
        "jaxpp_mlir.phases",
        "jaxpp_mlir.passes",
        "jaxpp_mlir.runtime.compilation.compile",
    ):
        logger = logging.getLogger(name)
        logger.setLevel(logging.DEBUG)
        logger.addHandler(records)
        logger.propagate = False
    c0, t0 = cpu(), t()
    # The modules partition, compile and treduce load, through the names that load them
    # for a user (the package's lazy exports; compile() loads the executor the same way).
    import jaxpp_mlir.runtime

    for name in ("partition", "treduce"):
        getattr(pp, name)
    jaxpp_mlir.runtime.compile_plan  # noqa: B018
    c1, t1 = cpu(), t()
    devices = jax.devices()
    if len(devices) < num_stages:  # one accelerator: every stage on it, as single_accelerator.py
        devices = devices[:1]
        schedule = pp.Interleaved1F1B(num_stages, mpmd_dim=1)
        record["one_device"] = True
    mesh = pp.MpmdMesh(jax.sharding.Mesh(np.array(devices[:num_stages]), ("stage",)), "stage")
    c2, t2 = cpu(), t()
    traced = jax.jit(pp_step).trace(*pp_args)
    c3, t3 = cpu(), t()
    lowered = traced.lower()
    c4, t4 = cpu(), t()
    program = pp.partition(lowered, mesh=mesh, schedule=schedule)
    c5, t5 = cpu(), t()
    compiled = program.compile()
    c6, t6 = cpu(), t()
    jax.block_until_ready(compiled(*pp_args))
    c7, t7 = cpu(), t()
    record["second_step"] = _second_step(compiled, pp_args)
    record.update(
        {
            "import": t1 - t0,
            "trace": t3 - t2,
            "lower": t4 - t3,
            "partition": t5 - t4,
            "compile": t6 - t5,
            "first_step": t7 - t6,
            "total": (t1 - t0) + (t7 - t2),
            "cpu_total": (c1 - c0) + (c7 - c2),
            "cpu_compile": c6 - c5,
            "cpu_import": c1 - c0,
            "cpu_trace": c3 - c2,
            "cpu_lower": c4 - c3,
            "cpu_partition": c5 - c4,
            "cpu_first_step": c7 - c6,
            "phases": records.phases,
            "passes": records.passes,
            "programs": records.programs,
            "rebinds": records.rebinds,
            "executables": len(program.plan.executables),
            "distinct_programs": len({e.mlir_module for e in program.plan.executables.values()}),
            **_unions(compiled),
            "loadavg": os.getloadavg()[0],
        }
    )
    return record


def _second_step(compiled, args) -> float:
    """The wall time of a second call, after the timed ones: what the first step costs
    beyond a step's own work (each executable's first run) is the difference."""
    import jax

    start = time.perf_counter()
    jax.block_until_ready(compiled(*args))
    return time.perf_counter() - start


def _unions(compiled) -> dict[str, int]:
    """How many union programs the stage programs were compiled as, and how many distinct
    stage programs they hold (``runtime/compilation/merge.py``; none with a baseline
    library that has no union programs)."""
    members: dict[str, int] = {}
    for exe in getattr(compiled.executable, "executables", {}).values():
        union = getattr(exe, "union", None)
        if union is not None:
            members[union.program.text] = len(union.program.members)
    return {"unions": len(members), "union_members": sum(members.values())}


# ------------------------------------------------------------------ in the parent


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a normal install has its bytecode cached
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH", "")) if p)
    return env


def spawn(workload: str, side: str, cache_dir: str | None) -> dict:
    command = [sys.executable, os.path.abspath(__file__), "--child", workload, side]
    if cache_dir:
        command += ["--cache-dir", cache_dir]
    done = subprocess.run(
        command, capture_output=True, text=True, check=False, env=_child_env(), timeout=900
    )
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"{workload} {side} failed with exit status {done.returncode}")
    return json.loads([line for line in done.stdout.splitlines() if line.startswith("{")][-1])


def measure(
    workloads: list[str], rounds: int, cache_dir: str | None, sides: tuple[str, ...] = SIDES
) -> dict:
    """``{workload: {side: [record per round]}}``, the sides' order rotating per round."""
    if cache_dir:  # fill the persistent cache, untimed
        for workload in workloads:
            for side in sides:
                spawn(workload, side, cache_dir)
    runs: dict = {w: {s: [] for s in sides} for w in workloads}
    for k in range(rounds):
        for workload in workloads:
            for side in sides[k % len(sides) :] + sides[: k % len(sides)]:
                record = spawn(workload, side, cache_dir)
                runs[workload][side].append(record)
                # Each process's total as it comes, so that a run stopped early still tells.
                print(f"  {workload} {side}: {record['total']:.3f} s", file=sys.stderr)
        print(f"  round {k + 1}/{rounds} done (load {os.getloadavg()[0]:.2f})", file=sys.stderr)
    return runs


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def summarize(runs: dict) -> dict:
    """Medians per workload: each side's phases and the pipelined/jit ratio."""
    out = {}
    for workload, sides in runs.items():
        ours, theirs = sides["pp"], sides["jit"]
        row: dict = {"workload": workload, "rounds": len(ours)}
        for key in ("import", "trace", "lower", "partition", "compile", "first_step", "total"):
            row[key] = _median([r[key] for r in ours])
        row["second_step"] = _median([r.get("second_step", 0.0) for r in ours])
        row["jit_second_step"] = _median([r.get("second_step", 0.0) for r in theirs])
        cpu_phases = ("trace", "lower", "compile", "first_step", "total")
        for key in ("trace", "lower", "compile", "first_step", "total"):
            row["jit_" + key] = _median([r[key] for r in theirs])
        for key in cpu_phases:
            row["jit_cpu_" + key] = _median([r["cpu_" + key] for r in theirs])
        for key in ("import", "partition", *cpu_phases):
            row["cpu_" + key] = _median([r["cpu_" + key] for r in ours])
        # The ratio if every phase but compile() cost what jax.jit's cost: a floor set by
        # XLA's compilations of the stage programs (with the dispatch and the rebinds).
        row["cpu_floor_ratio"] = _median(
            [
                (b["cpu_total"] - b["cpu_compile"] + a["cpu_compile"]) / b["cpu_total"]
                for a, b in zip(ours, theirs, strict=True)
            ]
        )
        # The same in wall time, with only the stage programs' compilations (concurrent, as
        # compile() runs them) added to jax.jit's other phases: what XLA alone leaves.
        row["xla_floor_ratio"] = _median(
            [
                (b["total"] - b["compile"] + a["phases"].get(STAGE_PROGRAMS, 0.0)) / b["total"]
                for a, b in zip(ours, theirs, strict=True)
            ]
        )
        row["cpu_ratio"] = _median(
            [a["cpu_total"] / b["cpu_total"] for a, b in zip(ours, theirs, strict=True)]
        )
        row["ratio"] = _median([a["total"] / b["total"] for a, b in zip(ours, theirs, strict=True)])
        row["ratio_without_import"] = _median(
            [(a["total"] - a["import"]) / b["total"] for a, b in zip(ours, theirs, strict=True)]
        )
        phase_names = sorted({p for r in ours for p in r["phases"]})
        row["phases"] = {p: _median([r["phases"].get(p, 0.0) for r in ours]) for p in phase_names}
        pass_names = list(dict.fromkeys(name for r in ours for name, _ in r["passes"]))
        row["passes"] = {
            p: _median([sum(s for n, s in r["passes"] if n == p) for r in ours]) for p in pass_names
        }
        row["programs"] = {}
        for r in ours:
            for name, how, seconds in r["programs"]:
                row["programs"].setdefault(name, ([], how))[0].append(seconds)
        row["programs"] = {
            name: (_median(times), how) for name, (times, how) in row["programs"].items()
        }
        row["programs_made"] = _median([len(r["programs"]) for r in ours])
        row["programs_compiled"] = _median(
            [sum(how == "compiled" for _, how, _ in r["programs"]) for r in ours]
        )
        row["rebinds"] = _median([len(r.get("rebinds", ())) for r in ours])
        row["rebind_s"] = _median([sum(r.get("rebinds", ())) for r in ours])
        row["executables"] = ours[0]["executables"]
        row["distinct_programs"] = ours[0]["distinct_programs"]
        row["unions"] = ours[0].get("unions", 0)
        row["union_members"] = ours[0].get("union_members", 0)
        row["loadavg"] = _median([r["loadavg"] for r in ours + theirs])
        accounted = [
            r["import"] + r["trace"] + r["lower"] + r["partition"] + r["compile"] + r["first_step"]
            for r in ours
        ]
        row["other"] = _median([r["total"] - a for r, a in zip(ours, accounted, strict=True)])
        out[workload] = row
    return out


def print_table(summary: dict, title: str) -> None:
    rows = list(summary.values())
    width = 44
    print(title)
    print(f"{'':<{width}}" + "".join(f" {r['workload']:>9}" for r in rows))

    def line(label: str, values: list[str]) -> None:
        print(f"{label:<{width}}" + "".join(f" {v:>9}" for v in values))

    def seconds(key: str, source: str | None = None) -> list[str]:
        out = []
        for r in rows:
            table = r if source is None else r[source]
            out.append(f"{table[key]:.3f}" if key in table else "-")
        return out

    def untimed(phase: str, passes: list[str]) -> list[str]:
        """``phase`` less its timed parts (from the medians)."""
        out = []
        for r in rows:
            parts = sum(
                v
                for k, v in r["phases"].items()
                if k.startswith(phase + ":") and not k.endswith(OVERLAPPED)
            )
            parts += sum(r["passes"].get(p, 0.0) for p in passes)
            out.append(f"{r[phase] - parts:.3f}")
        return out

    line("pipelined: import (lazy modules) s", seconds("import"))
    line("  trace s", seconds("trace"))
    line("  lower s", seconds("lower"))
    line("  partition s", seconds("partition"))
    phase_rows = sorted({p for r in rows for p in r["phases"]})
    for p in (p for p in phase_rows if p.startswith("partition")):
        line(f"    {p.split(': ', 1)[1]} s", seconds(p, "phases"))
    pass_rows = list(dict.fromkeys(p for r in rows for p in r["passes"]))
    for p in pass_rows:
        line(f"    pass {p.removeprefix('jaxpp-')} s", seconds(p, "passes"))
    line("    untimed (Python between them, GC) s", untimed("partition", pass_rows))
    line("  compile s", seconds("compile"))
    for p in (p for p in phase_rows if p.startswith("compile")):
        line(f"    {p.split(': ', 1)[1]} s", seconds(p, "phases"))
    line("    untimed (Python between them, GC) s", untimed("compile", []))
    line(
        "    executables / distinct texts",
        [f"{r['executables']}/{r['distinct_programs']}" for r in rows],
    )
    line(
        "    programs made / compiled by XLA",
        [f"{r['programs_made']:.0f}/{r['programs_compiled']:.0f}" for r in rows],
    )
    line(
        "    rebinds to other ranks: count/s summed",
        [f"{r['rebinds']:.0f}/{r['rebind_s']:.3f}" for r in rows],
    )
    line(
        "    union programs (distinct texts in them)",
        [f"{r['unions']}({r['union_members']})" for r in rows],
    )
    line("  first step s", seconds("first_step"))
    line("  time to first step s", seconds("total"))
    line("  second step s (after; not in the total)", seconds("second_step"))
    line("jax.jit: trace s", seconds("jit_trace"))
    line("  lower s", seconds("jit_lower"))
    line("  compile s", seconds("jit_compile"))
    line("  first step s", seconds("jit_first_step"))
    line("  time to first step s", seconds("jit_total"))
    line("  second step s (after; not in the total)", seconds("jit_second_step"))
    line("CPU s, all threads: pipelined import", seconds("cpu_import"))
    for key in ("trace", "lower", "partition", "compile", "first_step", "total"):
        line(f"  {key.replace('_', ' ')}", seconds("cpu_" + key))
    line("  jax.jit trace", seconds("jit_cpu_trace"))
    for key in ("lower", "compile", "first_step", "total"):
        line(f"    {key.replace('_', ' ')}", seconds("jit_cpu_" + key))
    line("pipelined / jax.jit (median of rounds)", [f"{r['ratio']:.2f}" for r in rows])
    line("  without the lazy imports", [f"{r['ratio_without_import']:.2f}" for r in rows])
    line("  CPU seconds, pipelined / jax.jit", [f"{r['cpu_ratio']:.2f}" for r in rows])
    line(
        "  CPU floor (all but compile() as jax.jit's)",
        [f"{r['cpu_floor_ratio']:.2f}" for r in rows],
    )
    line(
        "  XLA floor (the stage programs' compile, the rest as jax.jit's)",
        [f"{r['xla_floor_ratio']:.2f}" for r in rows],
    )
    line("machine load (1 min avg, median)", [f"{r['loadavg']:.2f}" for r in rows])
    print()
    for r in rows:
        programs = sorted(r["programs"].items(), key=lambda kv: -kv[1][0])
        shown = ", ".join(f"{n} {s:.3f} ({how})" for n, (s, how) in programs[:10])
        more = f", ... {len(programs) - 10} more" if len(programs) > 10 else ""
        print(f"{r['workload']} programs, wall s each (concurrent): {shown}{more}")
    print()


#: A phase that runs inside another one (the dispatch generated while the stage programs
#: compile): shown, not subtracted from its parent's untimed rest.
OVERLAPPED = "(while compiling)"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cache", choices=("cold", "warm", "both"), default="cold")
    parser.add_argument(
        "--baseline",
        metavar="CHECKOUT",
        help="also time the pipelined step with the library of another checkout of the "
        "project (say `git worktree add /tmp/before <rev>`), in a third process per round",
    )
    parser.add_argument("--child", nargs=2, metavar=("WORKLOAD", "SIDE"), help=argparse.SUPPRESS)
    parser.add_argument("--cache-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_child(*args.child, args.cache_dir)))
        return
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    for w in workloads:
        if w not in WORKLOADS:
            parser.error(f"unknown workload {w!r} (known: {', '.join(WORKLOADS)})")
    sides = SIDES
    if args.baseline:
        os.environ[BASELINE_ENV] = os.path.abspath(args.baseline)
        sides = (*SIDES, "baseline")
    modes = ("cold", "warm") if args.cache == "both" else (args.cache,)
    for mode in modes:
        with tempfile.TemporaryDirectory(prefix="jaxpp-first-step-") as cache:
            runs = measure(workloads, args.rounds, cache if mode == "warm" else None, sides)
        if args.baseline:
            baseline = {w: {"pp": r["baseline"], "jit": r["jit"]} for w, r in runs.items()}
            print_table(
                summarize(baseline),
                f"BASELINE ({args.baseline}), {mode} compilation cache: medians of "
                f"{args.rounds} rounds (the same jax.jit processes as below)",
            )
        summary = summarize(runs)
        print_table(
            summary,
            f"time to first step, {mode} compilation cache: medians of {args.rounds} rounds of "
            "fresh processes (pipelined and jax.jit alternated)",
        )
        for row in summary.values():
            print(json.dumps({"cache": mode, **row}))


if __name__ == "__main__":
    main()
